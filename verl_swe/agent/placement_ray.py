"""`sandbox_placement: ray`: an episode's sandboxes on the cluster's sandbox nodes, not on the node of the
verl agent-loop worker that runs the episode.

Every node that declares the `verl_swe_sandbox` resource (its amount: how many sandboxes it may hold) gets
one `TaskHost` actor per run, named `host/<run>/<node id>` in the `verl_swe` namespace so that every worker of
the run shares it. A host prepares task environments on its own node (`LocalPlacement`: once per
environment per node, outside any episode's clock, a failed build remembered), starts sandboxes from its
warm pools behind the node's start cap and the run's cluster-wide gate, serves their calls, and grades
patches in a fresh sandbox of the same image on the same node. The client (`RayPlacement`, one per worker
process) places each sandbox on a node that already holds the task's environment while it has a free slot,
else on the least filled node; a start that fails moves to another node; a host that is lost is dropped,
its node's leftovers are collected by the survivors' gc, and newly joined nodes are picked up.

Ray is imported inside functions only (the agent imports without the training stack).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

from verl_swe.agent.infra import GRADING, NO_CAPACITY, InfraFailure
from verl_swe.agent.placement import LocalPlacement
from verl_swe.sandbox import parse_sandbox_config
from verl_swe.sandbox.remote import NAMESPACE, RESOURCE, RemoteSandbox, SandboxHost, on_node, ray_call, start_gate
from verl_swe.sandbox.shell import SandboxDied, SandboxStartError
from verl_swe.sandbox.usage import SandboxUsage, UsageMeter, record_usage
from verl_swe.tasks import Environments, Task

logger = logging.getLogger(__name__)
REFRESH_S = 60.0  # how often the client looks for sandbox nodes that joined
ORPHAN_GC_DELAYS_S = (1.0, 10.0, 30.0)  # after a host is lost: when the survivors collect its sandboxes
READY_TIMEOUT_S = 300.0  # a new host's start (its imports, the restart gc); a node that cannot is skipped


def _environments(env_options: dict) -> Environments:
    return Environments(env_options.get("backend", "docker"), repos_dir=env_options.get("repos_dir"),
                        cache_dir=env_options.get("cache_dir"), sandbox=env_options.get("sandbox") or {})


class TaskHost(SandboxHost):
    """A sandbox host that also knows tasks: environments prepared on its node, and grading there."""

    def __init__(self, run: str, env_options: dict, options: dict, gate: Any = None):
        self.local = LocalPlacement(_environments(env_options), run=run, env_prepare=options.get("env_prepare", "lazy"),
                                    warm_per_image=options.get("warm_per_image", 0),
                                    max_warm=options.get("max_warm_per_node", 64),
                                    warm_idle_s=options.get("warm_idle_s", 300.0),
                                    start_retries=options.get("start_retries", 2), collect_orphans=False)
        super().__init__(run, self.local.envs.template, max_concurrent_starts=options.get("max_concurrent_starts_per_node"),
                         gate=gate)
        self.pools = self.local.pools  # one set of warm pools for the agent's and the grader's sandboxes

    async def open_task(self, task_json: str) -> tuple[str, dict]:
        """Prepare the task's environment here (if needed) and start its sandbox: (sandbox id, state)."""
        task = Task.model_validate_json(task_json)
        self._opening += 1
        try:
            sb = await self.local.open(task)
        finally:
            self._opening -= 1
        self._open[sb.id] = sb
        return sb.id, {**self.info(), "config": sb.config.model_dump(mode="json")}

    async def grade(self, task_json: str, patch: str, timeout_s: float) -> dict:
        task = Task.model_validate_json(task_json)
        grading = await self.local.grade(task, patch, timeout_s)
        return {"result": grading.result.to_dict(), "infra": grading.infra, "cpu_s": grading.meter.cpu_s,
                "sandbox_s": grading.meter.sandbox_s, "sandboxes": grading.meter.sandboxes}

    async def holds(self) -> list[str]:
        return sorted(self.local.holds())

    async def shutdown(self) -> dict:
        report = await super().shutdown()
        self.local.close()
        return report


@dataclasses.dataclass(eq=False)
class _Host:
    actor: Any
    node_id: str
    slots: int
    load: int = 0  # the host's own count (every client's sandboxes), refreshed by its replies
    holds: set = dataclasses.field(default_factory=set)  # instance ids whose environment it has prepared
    alive: bool = True


class RayPlacement:
    """The client side: chooses a node per sandbox and proxies to its host. One per process (the runner's)."""

    def __init__(self, *, run: str, env_options: dict, options: dict, address: str | None = None):
        self.run, self.env_options, self.options, self.address = run, env_options, options, address
        self.hosts: dict[str, _Host] = {}
        self._lock = asyncio.Lock()
        self._refreshed = 0.0
        self._gate = None
        self._background: set[asyncio.Task] = set()
        self.lost_nodes: dict[str, float] = {}  # node id -> when its host was lost (time.monotonic())
        self.orphans_collected = 0  # sandboxes of lost hosts removed by the survivors' gc

    # -- the cluster ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Find the sandbox nodes and their hosts (created on first use); again every REFRESH_S."""
        if self.hosts and time.monotonic() - self._refreshed < REFRESH_S:
            return
        async with self._lock:
            if self.hosts and time.monotonic() - self._refreshed < REFRESH_S:
                return
            await self._refresh()

    async def _refresh(self) -> None:
        import ray

        from verl_swe.sandbox.remote import sandbox_nodes

        if not ray.is_initialized():
            ray.init(address=self.address or "auto", log_to_driver=False)
        limit = self.options.get("max_concurrent_starts")
        if limit and self._gate is None:
            self._gate = start_gate(self.run, int(limit))
        nodes = {n["node_id"]: n for n in await asyncio.to_thread(sandbox_nodes)}
        for node_id in [n for n in self.hosts if n not in nodes]:
            self._drop(self.hosts[node_id], "its node is no longer alive")
        # Not a node lost a moment ago: the cluster may still list it alive (the head notices in seconds), and a
        # host made there would only fail. A host dropped by mistake (its node was fine) comes back after this.
        now = time.monotonic()
        new = [n for n in nodes.values() if n["node_id"] not in self.hosts
               and now - self.lost_nodes.get(n["node_id"], -REFRESH_S) >= REFRESH_S]
        cls = ray.remote(max_concurrency=100_000, max_restarts=0)(TaskHost)
        actors = [cls.options(name=f"host/{self.run}/{n['node_id']}", namespace=NAMESPACE, get_if_exists=True,
                              **on_node(n["node_id"])).remote(self.run, self.env_options, self.options, self._gate)
                  for n in new]
        readies = [asyncio.wait_for(ray_call(a.ready.remote()), READY_TIMEOUT_S) for a in actors]
        for n, actor, ready in zip(new, actors, await asyncio.gather(*readies, return_exceptions=True)):
            try:
                if isinstance(ready, BaseException):
                    raise ready
                holds = await ray_call(actor.holds.remote())
            except Exception as e:  # noqa: BLE001 - a node that cannot host now is tried again at the next refresh
                logger.warning("no sandbox host on node %s: %s", n["node_id"], e)
                continue
            self.hosts[n["node_id"]] = _Host(actor, n["node_id"], n["slots"], holds=set(holds))
        self._refreshed = time.monotonic()
        if not self.hosts:
            raise InfraFailure(NO_CAPACITY, f"no alive Ray node offers the {RESOURCE!r} resource "
                                            f"(start nodes with --resources '{{\"{RESOURCE}\": N}}')")

    def _drop(self, host: _Host, why: str) -> None:
        if not host.alive:
            return
        host.alive = False
        self.hosts.pop(host.node_id, None)
        self.lost_nodes[host.node_id] = time.monotonic()
        logger.warning("sandbox host on node %s lost (%s); its episodes are infra failures", host.node_id, why)
        self._refreshed = 0.0  # look for the cluster's nodes again at the next open
        self._spawn(self._collect_orphans())

    async def _collect_orphans(self) -> None:
        """The lost host's sandboxes outlive it where they can (docker containers; local state dirs): every
        surviving host removes this run's orphans on its node (on one machine, or a shared engine, that is
        them; elsewhere the lost node's next host removes them when it starts). A host whose raylet died may
        live on for seconds and serve the calls it already had: so again a little later, twice."""
        for delay in ORPHAN_GC_DELAYS_S:
            await asyncio.sleep(delay)
            reports = await asyncio.gather(*(ray_call(h.actor.gc.remote()) for h in list(self.hosts.values())),
                                           return_exceptions=True)
            removed = sum(len(r["containers"]) + len(r["local_sandboxes"]) for r in reports if isinstance(r, dict))
            self.orphans_collected += removed
            if removed:
                logger.info("removed %d sandboxes a lost host left behind", removed)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _choose(self, instance_id: str, exclude: set[str]) -> _Host:
        hosts = [h for h in self.hosts.values() if h.alive and h.node_id not in exclude]
        if not hosts:
            raise InfraFailure(NO_CAPACITY, f"no sandbox node left to try (tried {len(exclude)})")
        free = [h for h in hosts if h.load < h.slots] or hosts  # all full: the host queues the start
        holders = [h for h in free if instance_id in h.holds]
        return min(holders or free, key=lambda h: (h.load / h.slots, h.node_id))

    # -- the placement interface (SWEEnv) ---------------------------------------------------------------------

    async def open(self, task: Task) -> RemoteSandbox:
        await self.start()
        tried: set[str] = set()
        last: BaseException | None = None
        for _ in range(int(self.options.get("start_retries", 2)) + 1):
            try:
                host = self._choose(task.instance_id, tried)
            except InfraFailure:
                break
            tried.add(host.node_id)
            host.load += 1
            ref = host.actor.open_task.remote(task.model_dump_json())
            try:
                sid, info = await ray_call(ref)
            except asyncio.CancelledError:
                host.load -= 1
                self._spawn(_close_when_opened(host, ref))  # the host goes on starting it: close it, not leak it
                raise
            except SandboxDied as e:
                host.load -= 1
                if e.cause == "host_lost":
                    self._drop(host, str(e))
                last = e
                continue
            except SandboxStartError as e:  # the node's engine failed (after its own retries): another node
                host.load -= 1
                last = e
                continue
            except BaseException:
                host.load -= 1
                raise
            host.load = info["load"]
            host.holds.add(task.instance_id)
            sb = RemoteSandbox(host.actor, sid, parse_sandbox_config(info["config"]), host.node_id)
            sb.on_close = lambda _sb, h=host: setattr(h, "load", max(0, h.load - 1))
            sb.on_lost = lambda _sb, e, h=host: self._drop(h, str(e))  # no new sandbox there, from now on
            return sb
        if isinstance(last, SandboxDied):
            raise last
        if last is not None:
            raise SandboxStartError(f"{last} (tried {len(tried)} nodes)") from last
        await self.start()
        raise InfraFailure(NO_CAPACITY, "no sandbox node could take the sandbox")

    async def grade(self, task: Task, patch: str, timeout_s: float, node_id: str | None = None):
        """Grade on `node_id` (the agent's sandbox's node: it holds the image) or, if it is gone, another."""
        from verl_swe.agent.placement import Grading
        from verl_swe.reward.grading import GradeResult

        await self.start()
        tried: set[str] = set()
        last: SandboxDied | None = None
        for _ in range(int(self.options.get("start_retries", 2)) + 1):
            host = self.hosts.get(node_id) if node_id and node_id not in tried else None
            if host is None or not host.alive:
                try:
                    host = self._choose(task.instance_id, tried)
                except InfraFailure:
                    break
            tried.add(host.node_id)
            try:
                out = await ray_call(host.actor.grade.remote(task.model_dump_json(), patch, timeout_s))
            except SandboxDied as e:
                if e.cause == "host_lost":
                    self._drop(host, str(e))
                last = e
                continue
            meter = UsageMeter(cpu_s=out["cpu_s"], sandbox_s=out["sandbox_s"], sandboxes=out["sandboxes"])
            record_usage(SandboxUsage(out["cpu_s"], out["sandbox_s"]))  # the episode's meter, on this side
            return Grading(GradeResult(**out["result"]), meter, out["infra"])
        result = GradeResult(task.instance_id, error=f"sandbox: grading found no sandbox host: {last}")
        return Grading(result, UsageMeter(), GRADING)

    async def shutdown(self) -> dict:
        """End the run's hosts: every sandbox closed and this run's orphans removed on each node."""
        import ray

        hosts, self.hosts = list(self.hosts.values()), {}
        for task in list(self._background):  # later orphan collections: each host's shutdown does its own
            task.cancel()
        await asyncio.gather(*list(self._background), return_exceptions=True)
        reports = await asyncio.gather(*(ray_call(h.actor.shutdown.remote()) for h in hosts), return_exceptions=True)
        for h in hosts:
            with contextlib.suppress(Exception):
                ray.kill(h.actor)
        return {h.node_id: r if isinstance(r, dict) else {"error": str(r)} for h, r in zip(hosts, reports)}

    async def stats(self) -> dict:
        out = await asyncio.gather(*(ray_call(h.actor.stats.remote()) for h in self.hosts.values()),
                                   return_exceptions=True)
        return {h.node_id: s for h, s in zip(self.hosts.values(), out) if isinstance(s, dict)}

    async def aclose(self) -> None:
        await asyncio.gather(*list(self._background), return_exceptions=True)

    def close(self) -> None:
        pass  # the hosts belong to the run, not to this process: `shutdown()` (or `sandbox gc --run`) ends them


async def _close_when_opened(host: _Host, ref) -> None:
    with contextlib.suppress(Exception):
        sid, _ = await ray_call(ref)
        await ray_call(host.actor.close.remote(sid))


# -- on every sandbox node: environments ahead of training, and gc ----------------------------------------------

def _build_on_node(env_options: dict, tasks_json: list[str], workers: int) -> dict:
    import ray

    async def run() -> dict:
        placement = LocalPlacement(_environments(env_options))
        started = time.monotonic()
        try:
            errors = await placement.build([Task.model_validate_json(t) for t in tasks_json], workers)
        finally:
            placement.close()
        return {"errors": errors, "seconds": round(time.monotonic() - started, 1)}

    out = asyncio.run(run())
    return {"node_id": ray.get_runtime_context().get_node_id(), **out}


def _gc_on_node(run: str | None, everything: bool, docker: bool, local: bool, state_dir: str | None) -> dict:
    import ray

    from verl_swe.sandbox.gc import gc

    report = gc(everything=everything, docker=docker, local=local, run=run, state_dir=state_dir)
    return {"node_id": ray.get_runtime_context().get_node_id(), **report.__dict__}


def on_every_sandbox_node(fn, *args, all_nodes: bool = False) -> list[dict]:
    """Run `fn(*args)` once on every sandbox node (every alive node with `all_nodes`), in parallel."""
    import ray

    from verl_swe.sandbox.remote import sandbox_nodes

    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")] if all_nodes else \
        [n["node_id"] for n in sandbox_nodes()]
    task = ray.remote(fn)
    refs = [task.options(**on_node(n)).remote(*args) for n in nodes]
    out = []
    for n, ref in zip(nodes, refs):
        try:
            out.append(ray.get(ref))
        except Exception as e:  # noqa: BLE001 - one lost node must not hide the others' reports
            out.append({"node_id": n, "error": f"{type(e).__name__}: {e}"})
    return out


def build_on_every_node(env_options: dict, tasks: list[Task], workers: int = 2) -> list[dict]:
    """`verl-swe envs build` on the cluster: each sandbox node builds every task's environment itself."""
    return on_every_sandbox_node(_build_on_node, env_options, [t.model_dump_json() for t in tasks], workers)


def gc_on_every_node(run: str | None, everything: bool = False, docker: bool = True, local: bool = True,
                     state_dir: str | None = None) -> list[dict]:
    """`verl-swe sandbox gc` on every alive node of the cluster (any node may have run sandboxes)."""
    return on_every_sandbox_node(_gc_on_node, run, everything, docker, local, state_dir, all_nodes=True)
