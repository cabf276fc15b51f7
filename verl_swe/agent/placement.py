"""Where an episode's sandboxes run: `local` (this process's machine, the default) or `ray` (the cluster's
sandbox nodes, verl_swe/agent/placement_ray.py). The agent never knows which: `SWEEnv` asks its placement to
`open(task)` a started sandbox and to `grade(task, patch)` in a fresh one.

`LocalPlacement` is also what runs on each sandbox node under `ray`: the task's environment is prepared on
the machine whose engine runs it (a docker image, a local virtualenv), once per environment per machine
(the environment cache's own file locks), and outside the episode's clock. A build that failed is
remembered, so the task's other episodes fail at once instead of building again (`env_build`); with
`env_prepare: ahead` nothing is built during training at all: a task whose environment `verl-swe envs
build` did not make on that machine is `env_not_ready` at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from verl_swe.agent.infra import ENV_BUILD, ENV_NOT_READY, GRADING, InfraFailure
from verl_swe.concurrency import bounded_gather
from verl_swe.files import write_json_atomic
from verl_swe.sandbox import parse_sandbox_config, sandboxes_opened_by
from verl_swe.sandbox.admission import START_ADMISSION
from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.pool import WarmPools
from verl_swe.sandbox.usage import UsageMeter, usage_meter
from verl_swe.tasks import EnvBuildError, Environments, RepoError, Task

logger = logging.getLogger(__name__)


def task_key(task: Task, envs: Environments) -> str:
    """The identity of a task's environment on one backend and sandbox template (the ready record's name)."""
    text = f"{envs.backend}\n{envs.template.model_dump_json()}\n{task.model_dump_json()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class ReadyRecords:
    """Which task environments are ready on this machine: one small JSON per task under the environment
    cache (`<cache>/ready/`), written when its environment was prepared, holding the sandbox config."""

    def __init__(self, cache_dir: Path):
        self.dir = Path(cache_dir) / "ready"

    def get(self, key: str):
        try:
            return parse_sandbox_config(json.loads((self.dir / f"{key}.json").read_text())["config"])
        except (OSError, ValueError, KeyError):
            return None

    def instance_ids(self) -> set[str]:
        """Every task with a record here (environments built on this machine, by this run or an earlier one)."""
        ids = set()
        for path in self.dir.glob("*.json") if self.dir.is_dir() else ():
            try:
                ids.add(json.loads(path.read_text())["instance_id"])
            except (OSError, ValueError, KeyError):
                continue
        return ids

    def mark(self, key: str, task: Task, config) -> None:
        write_json_atomic(self.dir / f"{key}.json", {"instance_id": task.instance_id, "prepared_at": time.time(),
                                                     "config": config.model_dump(mode="json")})


@dataclass
class Grading:
    result: Any  # verl_swe.reward.grading.GradeResult
    meter: UsageMeter  # the grading sandbox's cost
    infra: str | None = None  # GRADING when the tests could not run for the infrastructure's reason


class LocalPlacement:
    """Sandboxes on this machine, from a `WarmPools` (warm ones per task image when `warm_per_image` > 0)."""

    def __init__(self, envs: Environments, *, run: str | None = None, env_prepare: str = "lazy",
                 warm_per_image: int = 0, max_warm: int = 64, warm_idle_s: float = 300.0, start_retries: int = 2,
                 max_concurrent_starts: int | None = None, collect_orphans: bool = True):
        if env_prepare not in ("lazy", "ahead"):
            raise ValueError(f"env_prepare must be lazy or ahead, got {env_prepare!r}")
        self.envs, self.run, self.env_prepare = envs, run, env_prepare
        self.pools = WarmPools(warm_per_image, max_warm, warm_idle_s, start_retries)
        self.ready = ReadyRecords(envs.store.cache_dir)
        self._configs: dict[str, object] = {}  # task key -> its (labelled) sandbox config
        self._ids: dict[str, str] = {}  # task key -> instance id, of the prepared ones
        self._failed: dict[str, str] = {}  # task key -> why its environment did not build here
        self._locks: dict[str, asyncio.Lock] = {}
        if max_concurrent_starts is not None:
            START_ADMISSION.configure(max_concurrent_starts, START_ADMISSION.gate)
        # (A node's TaskHost collects them itself, when it is ready: collect_orphans=False there.)
        self._collects = collect_orphans
        self.orphans_collected = self.collect_orphans("started") if collect_orphans else 0

    def collect_orphans(self, when: str) -> int:
        """Remove the sandboxes of this run that its earlier, dead drivers left on this machine (a run killed and
        resumed: by the run's label and the owner's death, never a live driver's); says how many."""
        if self.run is None:
            return 0
        from verl_swe.sandbox.gc import gc_run

        report = gc_run(self.run, self.envs.template)
        if report.removed:
            logger.warning("run %s %s: removed %d sandboxes that its earlier, dead drivers left (%s)", self.run,
                           when, report.removed, ", ".join(report.containers + report.local_sandboxes)[:300])
        for error in report.errors:
            logger.warning("run %s: collecting its dead drivers' sandboxes: %s", self.run, error)
        return report.removed

    def holds(self) -> set[str]:
        """Instance ids whose environment is prepared here (placement prefers such nodes): this process's, and
        those the machine's ready records name (`verl-swe envs build`, earlier runs)."""
        return set(self._ids.values()) | self.ready.instance_ids()

    async def prepare(self, task: Task):
        """The task's sandbox config on this machine; raises InfraFailure(env_build | env_not_ready)."""
        key = task_key(task, self.envs)
        if key in self._configs:
            return self._configs[key]
        if key in self._failed:
            raise InfraFailure(ENV_BUILD, f"{task.instance_id}: {self._failed[key]}")
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one preparation per task at a time here; the cache's file locks cover processes
            if key in self._failed:  # while this one waited for the lock
                raise InfraFailure(ENV_BUILD, f"{task.instance_id}: {self._failed[key]}")
            if key in self._configs:
                return self._configs[key]
            if self.env_prepare == "ahead":
                config = self.ready.get(key)
                if config is None:
                    raise InfraFailure(ENV_NOT_READY, f"{task.instance_id}: no environment was built on this node "
                                                      "(env_prepare: ahead; run `verl-swe envs build` first)")
            else:
                try:
                    config = await self.envs.prepare(task)
                except (EnvBuildError, RepoError) as e:
                    self._failed[key] = str(e)
                    logger.warning("environment of %s failed here; its episodes are infra failures: %s",
                                   task.instance_id, str(e)[:300])
                    raise InfraFailure(ENV_BUILD, f"{task.instance_id}: {e}") from None
                await asyncio.to_thread(self.ready.mark, key, task, config)
            self._configs[key], self._ids[key] = self._labelled(config), task.instance_id
            return self._configs[key]

    def _labelled(self, config):
        return config if self.run is None or config.run == self.run else config.model_copy(update={"run": self.run})

    async def _take(self, config) -> Sandbox:
        return await self.pools.take(self._labelled(config))

    async def open(self, task: Task) -> Sandbox:
        """A started sandbox of the task (the caller closes it). Raises InfraFailure or SandboxStartError."""
        config = await self.prepare(task)
        self.pools.warm(config)
        self.pools.sweep()
        return await self._take(config)

    async def grade(self, task: Task, patch: str, timeout_s: float, node_id: str | None = None) -> "Grading":
        """Grade `patch` in a fresh sandbox of the task's image (a warm one when there is one), with the
        grading sandbox's usage, and `infra` set when the grader could not run the tests for a reason that
        is not the patch's: its environment failed, or its sandbox did not start (the patch never ran)."""
        from verl_swe.reward.grading import grade

        failed_starts: list[BaseException] = []

        async def take(config) -> Sandbox:
            try:
                return await self._take(config)
            except Exception as e:
                failed_starts.append(e)
                raise

        with usage_meter() as meter, sandboxes_opened_by(take):
            result = await grade(task, patch, self.envs, timeout_s=timeout_s)
        infra = None
        if not result.resolved and (failed_starts or (result.error or "").startswith("environment:")):
            infra = GRADING
        return Grading(result, meter, infra)

    async def build(self, tasks: Iterable[Task], workers: int = 2, progress: bool = False) -> dict[str, str | None]:
        """Prepare every task's environment now (`verl-swe envs build`): instance_id -> error (None: ready)."""
        async def one(task: Task) -> tuple[str, str | None]:
            try:
                await self.prepare(task)
                return task.instance_id, None
            except InfraFailure:
                return task.instance_id, self._failed.get(task_key(task, self.envs), "not ready")

        desc = f"environments ({self.envs.backend})" if progress else None
        return dict(await bounded_gather((one(t) for t in tasks), workers, desc))

    async def aclose(self) -> None:
        await self.pools.close()
        # A driver that died while this one ran (its sandboxes outlived it) is collected now, not next run.
        if self._collects:
            self.orphans_collected += await asyncio.to_thread(self.collect_orphans, "ended")

    def close(self) -> None:
        self.envs.close()


def make_placement(config, envs: Environments):
    """The placement an `AgentConfig` asks for (`sandbox_placement`, `placement`), over `envs` when local."""
    p = config.placement
    if config.sandbox_placement == "ray":
        from verl_swe.agent.placement_ray import RayPlacement

        env_options = {"backend": config.backend, "repos_dir": config.repos_dir, "cache_dir": config.cache_dir,
                       "sandbox": config.sandbox}
        return RayPlacement(run=config.run_label(), env_options=env_options, options=p.model_dump(),
                            address=p.ray_address)
    return LocalPlacement(envs, run=config.run_label(), env_prepare=p.env_prepare, warm_per_image=p.warm_per_image,
                          max_warm=p.max_warm_per_node, warm_idle_s=p.warm_idle_s, start_retries=p.start_retries,
                          max_concurrent_starts=p.max_concurrent_starts_per_node)
