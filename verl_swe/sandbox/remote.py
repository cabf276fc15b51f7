"""Sandboxes on other machines of a Ray cluster: a host actor per sandbox node, and their client-side proxies.

A node offers sandbox capacity by declaring the custom resource `verl_swe_sandbox` (`ray start --resources
'{"verl_swe_sandbox": 64}'`: up to 64 sandboxes at once there; CPU-only nodes included). On each such node a
`SandboxHost` actor opens sandboxes on the node's own engine (docker, or bubblewrap for `local`) from a
`WarmPools`, and serves `exec / read_file / write_file / close` for them; `RemoteSandbox` is the same
interface on the caller's side, every call one actor call. A host that dies (its node lost) shows up as
`SandboxDied(cause="host_lost")` on the next call: the infrastructure's failure, never the agent's.

Ray is imported lazily: this module imports without it (the sandbox package installs without the training
stack). The task-aware host (environments and grading on the node) builds on this one: verl_swe/agent/placement_ray.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from typing import Any, AsyncIterator

from verl_swe.sandbox.admission import START_ADMISSION
from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import DockerSandboxConfig, LocalSandboxConfig
from verl_swe.sandbox.pool import WarmPools
from verl_swe.sandbox.shell import SandboxDied, SandboxError
from verl_swe.sandbox.usage import SandboxUsage, record_usage
from verl_swe.types import ExecResult

logger = logging.getLogger(__name__)
Config = DockerSandboxConfig | LocalSandboxConfig

RESOURCE = "verl_swe_sandbox"  # the custom Ray resource a node declares to run sandboxes; its amount = slots
NAMESPACE = "verl_swe"  # named hosts and gates live here, so every job of the cluster (CLI, trainer) finds them


async def ray_call(ref) -> Any:
    """Await an actor call, raising the actor's own exception (SandboxError, FileNotFoundError), not
    Ray's wrapper, so callers handle remote and local sandboxes alike. A host that is gone (its process
    or node died) is `SandboxDied(cause="host_lost")`."""
    from ray.exceptions import RayError, RayTaskError

    try:
        return await ref
    except RayTaskError as e:
        if isinstance(getattr(e, "cause", None), Exception):
            raise e.cause from e
        raise
    except RayError as e:  # RayActorError / ActorUnavailableError, NodeDiedError, WorkerCrashedError ...
        raise SandboxDied(f"sandbox host lost: {type(e).__name__}: {str(e)[:300]}", cause="host_lost") from e


def sandbox_nodes() -> list[dict]:
    """Alive Ray nodes that declare the `verl_swe_sandbox` resource: [{node_id, slots, address}]."""
    import ray

    return [{"node_id": n["NodeID"], "slots": int(n["Resources"][RESOURCE]), "address": n.get("NodeManagerAddress")}
            for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1]


def head_node_id() -> str | None:
    """The head node (where the GCS runs: the last node a cluster loses)."""
    import ray

    return next((n["NodeID"] for n in ray.nodes() if n.get("Alive")
                 and "node:__internal_head__" in n.get("Resources", {})), None)


def on_node(node_id: str, **options):
    """Ray options that pin an actor or task to `node_id` (hard affinity: a node's sandboxes run there)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False), "num_cpus": 0, **options}


class StartGate:
    """A cluster-wide cap on sandboxes starting at once (a named Ray actor, one per run). Leases expire after
    `lease_s`, so a host that died holding one does not shrink the cap for good."""

    def __init__(self, limit: int, lease_s: float = 300.0):
        self.limit, self.lease_s = limit, lease_s
        self._leases: dict[str, float] = {}
        self._cond: asyncio.Condition | None = None
        self.max_in_use = 0

    async def acquire(self) -> str:
        self._cond = self._cond or asyncio.Condition()
        async with self._cond:
            while True:
                now = time.monotonic()
                for lease, t in list(self._leases.items()):
                    if now - t > self.lease_s:
                        del self._leases[lease]
                if len(self._leases) < self.limit:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), 1.0)
            lease = uuid.uuid4().hex
            self._leases[lease] = now
            self.max_in_use = max(self.max_in_use, len(self._leases))
            return lease

    async def release(self, lease: str) -> None:
        self._cond = self._cond or asyncio.Condition()
        async with self._cond:
            self._leases.pop(lease, None)
            self._cond.notify()

    async def stats(self) -> dict:
        return {"limit": self.limit, "in_use": len(self._leases), "max_in_use": self.max_in_use}


def start_gate(run: str, limit: int):
    """The run's gate actor (created once, found by name afterwards), on the head node."""
    import ray

    cls = ray.remote(num_cpus=0, max_concurrency=10_000)(StartGate)
    head = head_node_id()
    where = on_node(head) if head else {}
    return cls.options(name=f"gate/{run}", namespace=NAMESPACE, get_if_exists=True, **where).remote(limit)


def gate_slot(gate):
    """An async context manager factory for START_ADMISSION: one lease of `gate` per start. If the gate is
    gone (its node lost), starts go on without the global cap rather than stop: the per-node cap remains."""

    @contextlib.asynccontextmanager
    async def slot() -> AsyncIterator[None]:
        try:
            lease = await gate.acquire.remote()
        except Exception as e:  # noqa: BLE001 - the gate is an optimisation, not a dependency
            logger.warning("the sandbox start gate is unavailable (%s); starting without the global cap", e)
            lease = None
        try:
            yield
        finally:
            if lease is not None:
                with contextlib.suppress(Exception):
                    gate.release.remote(lease)

    return slot


class SandboxHost:
    """Owns the sandboxes of one node (run as a Ray actor pinned to it). Sandboxes come from a `WarmPools`
    and are labelled with `run`; starts pass the node's admission (`max_concurrent_starts`) and, given a
    gate, the cluster's. At `ready()` it removes what an earlier incarnation of the run left on this node."""

    def __init__(self, run: str, template: Config | None = None, *, warm_per_image: int = 0, max_warm: int = 64,
                 warm_idle_s: float = 300.0, start_retries: int = 2, max_concurrent_starts: int | None = None,
                 gate: Any = None):
        self.run, self.template = run, template
        self.pools = WarmPools(warm_per_image, max_warm, warm_idle_s, start_retries)
        self._open: dict[str, Sandbox] = {}
        self._opening = 0
        self._limit, self._gate = max_concurrent_starts, gate
        self.started_at = time.time()

    @property
    def load(self) -> int:
        return len(self._open) + self._opening

    async def ready(self) -> dict:
        import ray

        START_ADMISSION.configure(self._limit, gate_slot(self._gate) if self._gate is not None else None)
        removed = await asyncio.to_thread(self._gc, False)
        if removed.removed:
            logger.info("removed %d sandboxes an earlier incarnation of run %s left", removed.removed, self.run)
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "gc_removed": removed.removed}

    def _gc(self, everything: bool):
        from verl_swe.sandbox.gc import gc_run

        return gc_run(self.run, self.template, everything)

    async def gc(self, everything: bool = False) -> dict:
        """This run's orphans on this node (all of this run's sandboxes with `everything`)."""
        return (await asyncio.to_thread(self._gc, everything)).__dict__

    def _labelled(self, config: Config) -> Config:
        return config if config.run == self.run else config.model_copy(update={"run": self.run})

    async def open(self, config: Config) -> tuple[str, dict]:
        """Start (or take a warm) sandbox of `config`; returns its id and the host's state."""
        self._opening += 1
        try:
            sb = await self.pools.take(self._labelled(config))
        finally:
            self._opening -= 1
        self._open[sb.id] = sb
        return sb.id, self.info()

    def info(self) -> dict:
        return {"load": self.load, "warm": self.pools.warm_count}

    def _get(self, sid: str) -> Sandbox:
        if sid not in self._open:
            raise SandboxError(f"no open sandbox {sid} on this host")
        return self._open[sid]

    async def exec(self, sid: str, cmd: str, timeout: float | None = None) -> ExecResult:
        return await self._get(sid).exec(cmd, timeout)

    async def read_file(self, sid: str, path: str, timeout: float = 60.0) -> str:
        return await self._get(sid).read_file(path, timeout)

    async def read_bytes(self, sid: str, path: str, timeout: float = 60.0) -> bytes:
        return await self._get(sid).read_bytes(path, timeout)

    async def write_file(self, sid: str, path: str, content: str | bytes, timeout: float = 60.0) -> None:
        await self._get(sid).write_file(path, content, timeout)

    async def close(self, sid: str) -> dict | None:
        """Close the sandbox; its usage (CPU-seconds, seconds alive) for the caller's accounting."""
        sb = self._open.pop(sid, None)
        if sb is None:
            return None
        await sb.close()
        return sb.usage.to_dict() if sb.usage else None

    async def stats(self) -> dict:
        a = START_ADMISSION.stats
        waits = sorted(a.wait_s)
        return {**self.info(), "open": len(self._open), "warm_hits": self.pools.hits, "warm_misses": self.pools.misses,
                "starts": a.started, "starts_in_flight": a.in_flight, "max_starts_in_flight": a.max_in_flight,
                "admission_wait_s_p50": waits[len(waits) // 2] if waits else None,
                "admission_wait_s_p99": waits[int(0.99 * (len(waits) - 1))] if waits else None}

    async def shutdown(self) -> dict:
        """Close every sandbox and warm pool; then this run's orphans on the node."""
        await asyncio.gather(*(self.close(sid) for sid in list(self._open)), return_exceptions=True)
        await self.pools.close()
        return await self.gc()


class RemoteSandbox:
    """A sandbox inside a host actor, with `Sandbox`'s interface; every call goes through Ray."""

    def __init__(self, actor: Any, sandbox_id: str, config: Config, node_id: str):
        self._actor, self.id, self.config, self.node_id = actor, sandbox_id, config, node_id
        self._closed = False
        self.usage: SandboxUsage | None = None
        self.on_close = None  # called once after close (the placement's load count)
        self.on_lost = None  # called when a call finds the host gone (the placement stops choosing it)

    @property
    def alive(self) -> bool:  # as far as this side knows; a dead sandbox shows as SandboxDied on use
        return not self._closed

    async def _call(self, ref) -> Any:
        try:
            return await ray_call(ref)
        except SandboxDied as e:
            if e.cause == "host_lost" and self.on_lost is not None:
                self.on_lost(self, e)
            raise

    async def exec(self, cmd: str, timeout: float | None = None) -> ExecResult:
        return await self._call(self._actor.exec.remote(self.id, cmd, timeout))

    async def read_file(self, path: str, timeout: float = 60.0) -> str:
        return await self._call(self._actor.read_file.remote(self.id, path, timeout))

    async def read_bytes(self, path: str, timeout: float = 60.0) -> bytes:
        return await self._call(self._actor.read_bytes.remote(self.id, path, timeout))

    async def write_file(self, path: str, content: str | bytes, timeout: float = 60.0) -> None:
        await self._call(self._actor.write_file.remote(self.id, path, content, timeout))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            usage = await ray_call(self._actor.close.remote(self.id))
            if usage:
                self.usage = SandboxUsage(**usage)
                record_usage(self.usage)
        except SandboxDied:
            pass  # the host is gone, and its sandboxes with it (its node's gc removes what is left)
        finally:
            if self.on_close is not None:
                self.on_close(self)
