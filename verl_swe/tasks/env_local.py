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
from verl_swe.tasks.env_plan import EnvBuildError, download_wheels, plan_env
from verl_swe.tasks.repos import RepoStore, async_file_lock
from verl_swe.tasks.schema import Task

logger = logging.getLogger(__name__)
SYSTEM_PYTHON = "/usr/bin/python3"  # what sandboxes see of the host: /usr is mounted read-only
BUILD_TIMEOUT_S = 1800.0


@lru_cache(maxsize=1)  # one subprocess per process, not one per task prepared
def _system_python() -> tuple[str, str]:
    import subprocess

    out = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return ".".join(out.split(".")[:2]), f"{SYSTEM_PYTHON} {out} {sys.platform}"


async def prepare_local(task: Task, store: RepoStore, template: LocalSandboxConfig) -> LocalSandboxConfig:
    if task.install_config is None:
        raise EnvBuildError(f"{task.instance_id}: no install_config; the local backend builds environments only "
                            "from one (rows that rely on a published image need the docker backend)")
    python, base = await asyncio.to_thread(_system_python)
    plan = plan_env(task, python, base)
    env_dir = store.cache_dir / "local-envs" / plan.key
    venv = env_dir / "venv"
    lock = store.cache_dir / "locks" / f"local-env-{plan.key}.lock"
    async with async_file_lock(lock):
        if not (env_dir / ".ok").exists():
            await _build(task, plan, store, env_dir, python)
    snapshot = await asyncio.to_thread(store.snapshot, task, task.base_commit)
    env = {"PATH": f"{venv}/bin:{SANDBOX_PATH}", "VIRTUAL_ENV": str(venv), **plan.env_vars, **template.env}
    return template.model_copy(update={"source_dir": snapshot, "ro_binds": [*template.ro_binds, env_dir], "env": env})


async def _build(task, plan, store: RepoStore, env_dir, python: str) -> None:
    shutil.rmtree(env_dir, ignore_errors=True)
    env_dir.mkdir(parents=True)
    wheels = env_dir / "wheels"
    repo = await asyncio.to_thread(store.snapshot, task, task.setup_commit) if plan.needs_repo else None
    await asyncio.to_thread(download_wheels, plan, python, wheels, repo)
    config = LocalSandboxConfig(
        source_dir=repo, rw_binds=[env_dir], limits=Limits(cpus=2, memory_mb=8192, pids=4096),
        default_timeout_s=BUILD_TIMEOUT_S, output_head_bytes=2000, output_tail_bytes=6000,
    )
    (env_dir / "build.sh").write_text(plan.script)
    logger.info("building local environment %s for %s", plan.key, task.instance_id)
    async with open_sandbox(config) as box:
        r = await box.exec(f"VENV={env_dir}/venv WHEELS={wheels} bash {env_dir}/build.sh")
    if r.exit_code != 0:
        raise EnvBuildError(f"{task.instance_id}: building the local environment failed "
                            f"(exit {r.exit_code}{', timed out' if r.timed_out else ''}):\n{r.output[-2500:]}")
    shutil.rmtree(wheels, ignore_errors=True)
    (env_dir / ".ok").write_text(plan.script)

