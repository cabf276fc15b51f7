"""Sandbox pools: warm sandboxes ready before an episode asks, and Ray hosts spreading them over all nodes.

`RaySandboxPool` has `SandboxPool`'s `acquire()`, but puts each sandbox on the Ray node with the fewest
open ones, so a multi-node run uses every node's container engine, not the driver's alone.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import logging
from typing import Any, AsyncIterator

from verl_swe.sandbox import create_sandbox
from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import DockerSandboxConfig, LocalSandboxConfig
from verl_swe.sandbox.shell import SandboxDied, SandboxError
from verl_swe.types import ExecResult

logger = logging.getLogger(__name__)
Config = DockerSandboxConfig | LocalSandboxConfig


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

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Sandbox]:
        """A started sandbox for one use: warm if one is, else started now; closed when the block exits."""
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
            sb = create_sandbox(self.config)
            await sb.start()
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


class SandboxHost:
    """Owns the sandboxes on one Ray node; runs as an actor made by `sandbox_host_class()`."""

    def __init__(self, config: Config, warm: int = 0):
        self._pool = SandboxPool(config, warm)
        # Each open sandbox keeps its acquire() block open in an exit stack until close(sid).
        self._open: dict[str, tuple[Sandbox, contextlib.AsyncExitStack]] = {}

    async def ready(self) -> str:
        import ray

        self._pool.fill()  # the actor's event loop runs only now, not in __init__
        return ray.get_runtime_context().get_node_id()

    async def open(self) -> str:
        stack = contextlib.AsyncExitStack()
        sb = await stack.enter_async_context(self._pool.acquire())
        self._open[sb.id] = (sb, stack)
        return sb.id

    def _get(self, sid: str) -> Sandbox:
        if sid not in self._open:
            raise SandboxError(f"no open sandbox {sid} on this host")
        return self._open[sid][0]

    async def exec(self, sid: str, cmd: str, timeout: float | None = None) -> ExecResult:
        return await self._get(sid).exec(cmd, timeout)

    async def read_file(self, sid: str, path: str, timeout: float = 60.0) -> str:
        return await self._get(sid).read_file(path, timeout)

    async def write_file(self, sid: str, path: str, content: str | bytes, timeout: float = 60.0) -> None:
        await self._get(sid).write_file(path, content, timeout)

    async def close(self, sid: str) -> None:
        entry = self._open.pop(sid, None)
        if entry is not None:
            await entry[1].aclose()

    async def shutdown(self) -> None:
        await asyncio.gather(*(self.close(sid) for sid in list(self._open)), return_exceptions=True)
        await self._pool.close()


@functools.lru_cache(maxsize=None)
def sandbox_host_class():
    """The Ray actor class for `SandboxHost`; made here so importing this module never imports ray.
    num_cpus=0: the host only waits on the container engine, and must not take CPUs from training."""
    import ray

    return ray.remote(num_cpus=0)(SandboxHost)


async def _ray_call(ref) -> Any:
    """Await an actor call, raising the actor's own exception (SandboxError, FileNotFoundError), not
    Ray's wrapper, so callers handle remote and local sandboxes alike."""
    from ray.exceptions import RayActorError, RayTaskError

    try:
        return await ref
    except RayTaskError as e:
        if isinstance(getattr(e, "cause", None), Exception):
            raise e.cause from e
        raise
    except RayActorError as e:  # the host (or its node) is gone, and its sandboxes with it
        raise SandboxDied(f"sandbox host died: {e}") from e


@dataclasses.dataclass(eq=False)
class _Host:
    actor: Any
    node_id: str
    open: int = 0  # counted here, not asked of the actor, so placement costs no round trip


class RemoteSandbox:
    """A sandbox inside a `SandboxHost` actor, with `Sandbox`'s interface; every call goes through Ray."""

    def __init__(self, host: _Host, sandbox_id: str, config: Config):
        self._host, self.id, self.config = host, sandbox_id, config
        self.node_id = host.node_id  # the Ray node whose container engine runs it
        self._closed = False

    @property
    def alive(self) -> bool:  # as far as this side knows; a dead container shows as SandboxDied on use
        return not self._closed

    async def exec(self, cmd: str, timeout: float | None = None) -> ExecResult:
        return await _ray_call(self._host.actor.exec.remote(self.id, cmd, timeout))

    async def read_file(self, path: str, timeout: float = 60.0) -> str:
        return await _ray_call(self._host.actor.read_file.remote(self.id, path, timeout))

    async def write_file(self, path: str, content: str | bytes, timeout: float = 60.0) -> None:
        await _ray_call(self._host.actor.write_file.remote(self.id, path, content, timeout))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await _ray_call(self._host.actor.close.remote(self.id))
        except SandboxDied:
            pass  # the host is gone; nothing left to close from here
        finally:
            self._host.open -= 1


class RaySandboxPool:
    """One `SandboxHost` per alive Ray node (each keeping `per_node` sandboxes warm); `acquire()` yields
    a `RemoteSandbox` on the host with the fewest open sandboxes."""

    def __init__(self, config: Config, per_node: int = 0):
        self.config, self.per_node = config, per_node
        self.hosts: list[_Host] = []
        self._lock = asyncio.Lock()  # concurrent first acquires must not create two hosts per node
        self._closed = False

    async def start(self) -> None:
        async with self._lock:
            if self.hosts or self._closed:
                return
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            cls = sandbox_host_class()
            actors = [
                cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(self.config, self.per_node)
                for n in ray.nodes() if n["Alive"]
            ]
            node_ids = await asyncio.gather(*(_ray_call(a.ready.remote()) for a in actors))
            self.hosts = [_Host(a, nid) for a, nid in zip(actors, node_ids)]

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[RemoteSandbox]:
        await self.start()
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        host = min(self.hosts, key=lambda h: h.open)
        host.open += 1  # before the await, so concurrent acquires spread too
        ref = host.actor.open.remote()
        try:
            sid = await _ray_call(ref)
        except BaseException as e:
            host.open -= 1
            if isinstance(e, asyncio.CancelledError):  # the start goes on in the actor: close it, not leak it
                with contextlib.suppress(Exception):
                    await host.actor.close.remote(await ref)
            raise
        sb = RemoteSandbox(host, sid, self.config)
        try:
            yield sb
        finally:
            await asyncio.shield(sb.close())

    async def close(self) -> None:
        """Close every host's sandboxes, then end the hosts."""
        self._closed = True
        hosts, self.hosts = self.hosts, []
        if not hosts:
            return
        import ray

        results = await asyncio.gather(*(_ray_call(h.actor.shutdown.remote()) for h in hosts), return_exceptions=True)
        for h, r in zip(hosts, results):
            if isinstance(r, Exception):
                logger.warning("shutting down the sandbox host on node %s failed: %s", h.node_id, r)
            ray.kill(h.actor)  # its sandboxes are closed (or the host is already gone)

    async def __aenter__(self) -> RaySandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
