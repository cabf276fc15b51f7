"""Admission control on sandbox starts: at most N starting at once in this process, and optionally a
cluster-wide gate, so a burst of a few hundred episodes does not become a start storm on the engine.

Every `Sandbox.start()` passes through `START_ADMISSION.slot()`. Unconfigured, it admits everything (the
single-node default is unchanged). A node's sandbox host configures it with its per-node limit and the
cluster's gate (verl_swe/sandbox/remote.py). Only the start is held back: a running sandbox holds no slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from dataclasses import dataclass, field
from typing import AsyncContextManager, AsyncIterator, Callable

Gate = Callable[[], AsyncContextManager[None]]


@dataclass
class StartStats:
    started: int = 0  # starts admitted (whatever their outcome)
    in_flight: int = 0
    waiting: int = 0
    max_in_flight: int = 0
    wait_s: list[float] = field(default_factory=list)  # time each start waited for its slot (last 10k)


class StartAdmission:
    def __init__(self) -> None:
        self.limit: int | None = None
        self.gate: Gate | None = None
        self.stats = StartStats()
        # asyncio primitives belong to one event loop; tests (and Ray's actor threads) run several.
        self._sems: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def configure(self, max_concurrent: int | None = None, gate: Gate | None = None) -> None:
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent starts must be >= 1 or None, got {max_concurrent}")
        if (max_concurrent, gate) == (self.limit, self.gate):
            return  # keep the semaphores (and the starts they hold)
        self.limit, self.gate = max_concurrent, gate
        self._sems = weakref.WeakKeyDictionary()

    def _sem(self) -> asyncio.Semaphore | None:
        if self.limit is None:
            return None
        loop = asyncio.get_running_loop()
        sem = self._sems.get(loop)
        if sem is None:
            sem = self._sems[loop] = asyncio.Semaphore(self.limit)
        return sem

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        s = self.stats
        asked, admitted = time.monotonic(), False
        s.waiting += 1
        try:
            async with contextlib.AsyncExitStack() as stack:
                sem = self._sem()
                if sem is not None:
                    await stack.enter_async_context(sem)
                if self.gate is not None:
                    await stack.enter_async_context(self.gate())
                admitted = True
                s.waiting -= 1
                s.started += 1
                s.in_flight += 1
                s.max_in_flight = max(s.max_in_flight, s.in_flight)
                s.wait_s.append(time.monotonic() - asked)
                del s.wait_s[:-10_000]
                try:
                    yield
                finally:
                    s.in_flight -= 1
        finally:
            if not admitted:  # cancelled, or the gate failed, while waiting
                s.waiting -= 1

START_ADMISSION = StartAdmission()
