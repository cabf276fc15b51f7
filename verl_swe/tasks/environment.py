"""`Environments`: prepare (build or reuse) the sandbox a task runs in, on either backend."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Literal

from verl_swe.concurrency import bounded_gather
from verl_swe.sandbox.config import DockerSandboxConfig, LocalSandboxConfig, parse_sandbox_config
from verl_swe.tasks.env_plan import EnvBuildError
from verl_swe.tasks.repos import RepoError, RepoStore, default_cache_dir
from verl_swe.tasks.schema import Task

Backend = Literal["docker", "local"]
# Building blocks in docker's client; these threads may wait on each other's file locks, so they get
# their own pool instead of the event loop's default one.
_BUILD_THREADS = 16


class Environments:
    """Per-task sandbox configs, built on first use and cached by content hash.

    `sandbox` is the template every task config starts from (limits, timeouts, docker_host ...),
    as a mapping or a typed config of the chosen backend.
    """

    def __init__(self, backend: Backend = "docker", *, repos_dir: Path | str | None = None,
                 cache_dir: Path | str | None = None, sandbox: dict | DockerSandboxConfig | LocalSandboxConfig | None = None):
        if backend not in ("docker", "local"):
            raise ValueError(f"unknown backend {backend!r} (docker or local)")
        self.backend = backend
        self.store = RepoStore(Path(cache_dir) if cache_dir else default_cache_dir(), repos_dir)
        template = sandbox if not isinstance(sandbox, dict) and sandbox is not None else \
            parse_sandbox_config({"backend": backend, **(sandbox or {})})
        if template.backend != backend:
            raise ValueError(f"sandbox template is for backend {template.backend!r}, not {backend!r}")
        self.template = template
        self._executor = ThreadPoolExecutor(_BUILD_THREADS, thread_name_prefix="verl-swe-env")

    async def prepare(self, task: Task) -> DockerSandboxConfig | LocalSandboxConfig:
        """The sandbox config of `task`, building what is missing. Raises EnvBuildError or RepoError."""
        if self.backend == "docker":
            from verl_swe.tasks.env_docker import prepare_docker

            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, prepare_docker, task, self.store, self.template)
        from verl_swe.tasks.env_local import prepare_local

        return await prepare_local(task, self.store, self.template)

    async def build(self, tasks: Iterable[Task], workers: int = 2, progress: bool = False) -> dict[str, str | None]:
        """Prepare many tasks ahead of time; returns instance_id -> error message (None when ready)."""
        async def one(task: Task) -> tuple[str, str | None]:
            try:
                await self.prepare(task)
                return task.instance_id, None
            except (EnvBuildError, RepoError) as e:
                return task.instance_id, str(e)

        desc = f"environments ({self.backend})" if progress else None
        return dict(await bounded_gather((one(t) for t in tasks), workers, desc))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
