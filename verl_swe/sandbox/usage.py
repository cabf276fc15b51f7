"""What sandboxes cost: CPU-seconds (the container's or cgroup's own counter) and sandbox-seconds alive.

Every sandbox reports its usage when it closes to the meters open in the closing code's context
(`contextvars`, so concurrent episodes in one event loop each see only their own sandboxes, the grader's
fresh sandbox included):

    with usage_meter() as meter:
        ...  # open and close sandboxes
    meter.cpu_s, meter.sandbox_s, meter.sandboxes
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Iterator


@dataclass
class SandboxUsage:
    cpu_s: float | None = None  # None: the backend could not read it (no cgroup, engine gone)
    alive_s: float = 0.0  # from the end of the start to close

    def to_dict(self) -> dict:
        return {"cpu_s": self.cpu_s, "alive_s": self.alive_s}


@dataclass
class UsageMeter:
    cpu_s: float = 0.0
    sandbox_s: float = 0.0
    sandboxes: int = 0
    unmeasured: int = 0  # sandboxes whose CPU time could not be read

    def add(self, usage: SandboxUsage) -> None:
        self.sandboxes += 1
        self.sandbox_s += usage.alive_s
        if usage.cpu_s is None:
            self.unmeasured += 1
        else:
            self.cpu_s += usage.cpu_s


_meters: contextvars.ContextVar[tuple[UsageMeter, ...]] = contextvars.ContextVar("verl_swe_usage_meters", default=())


@contextlib.contextmanager
def usage_meter() -> Iterator[UsageMeter]:
    meter = UsageMeter()
    token = _meters.set((*_meters.get(), meter))
    try:
        yield meter
    finally:
        _meters.reset(token)


def record_usage(usage: SandboxUsage) -> None:
    for meter in _meters.get():
        meter.add(usage)
