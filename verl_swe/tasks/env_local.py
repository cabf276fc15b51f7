"""Local environments (no container engine): a virtualenv per environment key, built inside a
bubblewrap sandbox with no network, and the task's one-commit repository as the sandbox's source."""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from functools import lru_cache

from verl_swe.sandbox import open_sandbox
from verl_swe.sandbox.config import Limits, LocalSandboxConfig
from verl_swe.sandbox.local import SANDBOX_PATH
from verl_swe.tasks.env_build import build_offline, fetch_all
from verl_swe.tasks.env_plan import EnvBuildError, needs_repo, plan_env
from verl_swe.tasks.repos import RepoStore, async_file_lock
from verl_swe.tasks.schema import Task
from verl_swe.tasks.target import PROBE, Target

logger = logging.getLogger(__name__)
SYSTEM_PYTHON = "/usr/bin/python3"  # what sandboxes see of the host: /usr is mounted read-only
BUILD_TIMEOUT_S = 1800.0


@lru_cache(maxsize=1)  # one subprocess per process, not one per task prepared
def _system_target() -> tuple[Target, str]:
    """The sandbox's interpreter is the host's system python (and its Debian packages: /usr is shared)."""
    import subprocess

    out = subprocess.run([SYSTEM_PYTHON, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    target = Target.from_probe(out)
    return target, f"{SYSTEM_PYTHON} {target.python_full} {sys.platform}"


async def prepare_local(task: Task, store: RepoStore, template: LocalSandboxConfig) -> LocalSandboxConfig:
    if task.meta.get("harbor"):
        raise EnvBuildError(f"{task.instance_id}: harbor tasks need the docker backend: their environment is a "
                            "Dockerfile, which the local backend cannot build")
    if task.install_config is None:
        raise EnvBuildError(f"{task.instance_id}: no install_config; the local backend builds environments only "
                            "from one (rows that rely on a published image need the docker backend)")
    target, base = await asyncio.to_thread(_system_target)
    setup_repo = await asyncio.to_thread(store.snapshot, task, task.setup_commit) if needs_repo(task) else None
    plan = plan_env(task, target, base, setup_repo)
    env_dir = store.cache_dir / "local-envs" / plan.key
    venv = env_dir / "venv"
    lock = store.cache_dir / "locks" / f"local-env-{plan.key}.lock"
    async with async_file_lock(lock):
        if not (env_dir / ".ok").exists():
            await _build(task, plan, store, env_dir, target, setup_repo)
    snapshot = await asyncio.to_thread(store.snapshot, task, task.base_commit)
    env = {"PATH": f"{venv}/bin:{SANDBOX_PATH}", "VIRTUAL_ENV": str(venv), **plan.env_vars, **template.env}
    return template.model_copy(update={"source_dir": snapshot, "ro_binds": [*template.ro_binds, env_dir], "env": env})


async def _build(task, plan, store: RepoStore, env_dir, target: Target, repo) -> None:
    shutil.rmtree(env_dir, ignore_errors=True)
    env_dir.mkdir(parents=True)
    wheels = env_dir / "wheels"
    scratch = env_dir / "fetch-src"  # pip writes build files into a local project: not into the cached snapshot
    if repo is not None:
        await asyncio.to_thread(shutil.copytree, repo, scratch, symlinks=True)
    fetcher = await asyncio.to_thread(fetch_all, plan, target, wheels, scratch if repo is not None else None,
                                      task.instance_id)
    shutil.rmtree(scratch, ignore_errors=True)
    config = LocalSandboxConfig(
        source_dir=repo, rw_binds=[env_dir], limits=Limits(cpus=2, memory_mb=8192, pids=4096),
        default_timeout_s=BUILD_TIMEOUT_S, output_head_bytes=2000, output_tail_bytes=30000,
    )
    (env_dir / "build.sh").write_text(plan.script)
    logger.info("building local environment %s for %s", plan.key, task.instance_id)
    loop = asyncio.get_running_loop()

    async def run_once() -> tuple[bool, str]:
        shutil.rmtree(env_dir / "venv", ignore_errors=True)
        async with open_sandbox(config) as box:
            r = await box.exec(f"VENV={env_dir}/venv WHEELS={wheels} bash {env_dir}/build.sh 2>&1")
        timed_out = f"\n[the build timed out after {BUILD_TIMEOUT_S:g} s]" if r.timed_out else ""
        return r.exit_code == 0 and not r.timed_out, r.output + timed_out

    await asyncio.to_thread(build_offline, plan, fetcher,
                            lambda: asyncio.run_coroutine_threadsafe(run_once(), loop).result(),
                            store.cache_dir / "build-logs" / f"local-{plan.key}.log", task.instance_id, "local")
    shutil.rmtree(wheels, ignore_errors=True)
    (env_dir / ".ok").write_text(plan.script)
