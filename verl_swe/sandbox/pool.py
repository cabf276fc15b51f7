"""Sandbox pools: started sandboxes ready before an episode asks, one pool per image.

`SandboxPool` keeps `size` sandboxes of one config warm. `WarmPools` keeps one `SandboxPool` per config
(i.e. per task image) that was asked to be warm, closes the ones left idle, and starts any other config
cold; both retry a failed start (`start_sandbox`). A node's sandbox host (verl_swe/sandbox/remote.py) serves
the training path's sandboxes from its `WarmPools`: the agent's, and the grader's fresh one of the same image.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import AsyncIterator

from verl_swe.sandbox import create_sandbox
from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import DockerSandboxConfig, LocalSandboxConfig
from verl_swe.sandbox.shell import SandboxError, SandboxStartError

logger = logging.getLogger(__name__)
Config = DockerSandboxConfig | LocalSandboxConfig


async def start_sandbox(config: Config, retries: int = 0, retry_delay_s: float = 1.0) -> Sandbox:
    """A started sandbox of `config`, retrying a failed start (the engine busy or restarting) `retries` times
    with exponential backoff; the last failure is raised as SandboxStartError naming the attempts."""
    delay = retry_delay_s
    for attempt in range(retries + 1):
        sb = create_sandbox(config)
        try:
            await sb.start()  # removes what it made if it fails
            return sb
        except SandboxError as e:
            if attempt == retries:
                if retries:
                    raise SandboxStartError(f"{e} (after {retries + 1} attempts)") from e
                raise
            logger.warning("sandbox start failed (%s); retry %d/%d in %.1f s", e, attempt + 1, retries, delay)
        await asyncio.sleep(delay)
        delay = min(2 * delay, 30.0)
    raise AssertionError("unreachable")


class SandboxPool:
    """Keeps `size` started sandboxes of one config warm, so an episode does not wait for a container start.
    Each is handed out once and closed when its `acquire()` block exits: no leftovers, no reset step."""

    def __init__(self, config: Config, size: int, retry_delay_s: float = 1.0, max_retry_delay_s: float = 60.0):
        if size < 0:
            raise ValueError(f"pool size must be >= 0, got {size}")
        self.config, self.size = config, size
        self._retry_delay_s, self._max_retry_delay_s = retry_delay_s, max_retry_delay_s
        self._warm: collections.deque[Sandbox] = collections.deque()
        self._starting: set[asyncio.Task] = set()
        self._closed = False

    @property
    def warm(self) -> int:
        return len(self._warm)

    def fill(self) -> None:
        """Start sandboxes in the background until `size` are warm or starting (needs a running loop)."""
        if self._closed:
            return
        for _ in range(self.size - len(self._warm) - len(self._starting)):
            task = asyncio.get_running_loop().create_task(self._start_one())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start_one(self) -> None:
        # A failure (engine restarting, disk full) must not kill the pool: log it and retry with backoff.
        # The task stays in `_starting` while it waits, so fill() does not pile up more retries.
        delay = self._retry_delay_s
        while not self._closed:
            try:
                sb = create_sandbox(self.config)
                await sb.start()  # closes what it made if it fails or is cancelled
            except Exception:
                logger.warning("warming a sandbox failed; retrying in %.1f s", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_retry_delay_s)
                continue
            if self._closed:  # close() ran while this one was starting
                await asyncio.shield(_close_quietly(sb))
            else:
                self._warm.append(sb)
            return

    async def take(self, retries: int = 0) -> Sandbox:
        """A started sandbox for one use, the caller's to close: warm if one is, else started now."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        sb = None
        while self._warm and sb is None:
            sb = self._warm.popleft()
            if not sb.alive:  # its container died while it waited (OOM killer, `sandbox gc`)
                await asyncio.shield(_close_quietly(sb))
                sb = None
        self.fill()  # replace the one just taken
        if sb is None:
            return await start_sandbox(self.config, retries, self._retry_delay_s)
        sb._started_at = time.monotonic()  # its cost (usage.alive_s) starts when it is handed out
        return sb

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Sandbox]:
        """`take()`, closed when the block exits."""
        sb = await self.take()
        try:
            yield sb
        finally:
            await asyncio.shield(sb.close())

    async def close(self) -> None:
        """Close every warm sandbox and end the background starts (a cancelled start cleans up after itself)."""
        self._closed = True
        tasks = list(self._starting)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        warm, self._warm = list(self._warm), collections.deque()
        await asyncio.gather(*(_close_quietly(sb) for sb in warm))

    async def __aenter__(self) -> SandboxPool:
        self.fill()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


async def _close_quietly(sb: Sandbox) -> None:
    try:
        await sb.close()
    except Exception:
        logger.warning("closing sandbox %s failed", sb.id, exc_info=True)




class WarmPools:
    """Warm sandboxes keyed by config (one image, one task's files): `warm(config)` asks for `per_key` of it
    to be kept started; `take(config)` hands out a warm one when there is one, else starts it now. A key not
    asked for in `idle_s` seconds is closed, and at most `max_warm` sandboxes are kept warm in all (the
    least recently used key goes first), so a pool follows the tasks in flight instead of growing with
    the dataset. `per_key=0` turns warming off: every take is a start (with retries)."""

    def __init__(self, per_key: int = 0, max_warm: int = 64, idle_s: float = 300.0, start_retries: int = 2,
                 retry_delay_s: float = 1.0):
        self.per_key, self.max_warm, self.idle_s = per_key, max_warm, idle_s
        self.start_retries, self.retry_delay_s = start_retries, retry_delay_s
        self._pools: collections.OrderedDict[str, tuple[SandboxPool, float]] = collections.OrderedDict()
        self._closing: set[asyncio.Task] = set()
        self.hits = self.misses = 0

    @staticmethod
    def key(config: Config) -> str:
        return config.model_dump_json()

    @property
    def warm_count(self) -> int:
        return sum(p.warm for p, _ in self._pools.values())

    def warm(self, config: Config) -> None:
        """Keep `per_key` sandboxes of `config` started from now on (until idle)."""
        if self.per_key <= 0:
            return
        key = self.key(config)
        pool = self._pools.pop(key, (None, 0.0))[0] or SandboxPool(config, self.per_key, self.retry_delay_s)
        self._pools[key] = (pool, time.monotonic())  # most recently used last
        self._evict()
        pool.fill()

    async def take(self, config: Config) -> Sandbox:
        entry = self._pools.get(self.key(config))
        if entry is None:
            self.misses += 1
            return await start_sandbox(config, self.start_retries, self.retry_delay_s)
        pool = entry[0]
        self._pools[self.key(config)] = (pool, time.monotonic())
        self._pools.move_to_end(self.key(config))
        if pool.warm:
            self.hits += 1
        else:
            self.misses += 1
        return await pool.take(self.start_retries)

    @contextlib.asynccontextmanager
    async def acquire(self, config: Config) -> AsyncIterator[Sandbox]:
        sb = await self.take(config)
        try:
            yield sb
        finally:
            await asyncio.shield(sb.close())

    def _evict(self) -> None:
        now = time.monotonic()
        while self._pools:
            key, (pool, used) = next(iter(self._pools.items()))
            over = len(self._pools) * self.per_key > self.max_warm
            if not over and now - used < self.idle_s:
                break
            del self._pools[key]
            task = asyncio.get_running_loop().create_task(pool.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def sweep(self) -> None:
        """Close the keys idle for `idle_s` (a host calls this now and then; `warm` also does)."""
        if self._pools:
            self._evict()

    async def close(self) -> None:
        pools, self._pools = [p for p, _ in self._pools.values()], collections.OrderedDict()
        await asyncio.gather(*(p.close() for p in pools), *list(self._closing), return_exceptions=True)
