"""Environment build time per real project (envs/real), cold and warm, on both backends, beside a plain
`pip install` of the same project into a host virtualenv, measured in the same run.

    .venv/bin/python bench/env_build.py [--backends docker local] [--out bench/env-build-results.json]

cold: an empty verl-swe cache and no image for the environment (docker's `verl-swe/env:<key>` and
`verl-swe/task:<key>` of these projects are removed first), pip's HTTP cache disabled, so everything is
resolved and downloaded from the index: fetch on the host, build offline in the sandbox, the task layer.
warm: the same `Environments.prepare` again (the environment is found in the cache).
baseline: `python -m venv` + the row's own install commands (`pip install pytest`, `pip install -e .[test]`)
run on the host in a copy of the repository, with network, once with pip's cache disabled (cold) and once
with pip's HTTP cache as this machine has it (warm: a host venv has no cache of whole environments). The real suite is built first (envs/real/build_tasks.py, not timed).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _builder():
    spec = importlib.util.spec_from_file_location("real_build_tasks", ROOT / "envs" / "real" / "build_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _remove_docker_images(task, store) -> None:
    """Make the docker build cold: the env and task images of this task's plan (built by verl-swe)."""
    import hashlib

    import docker

    from verl_swe.sandbox.config import BASE_IMAGE
    from verl_swe.sandbox.docker import docker_client
    from verl_swe.tasks.env_docker import image_target
    from verl_swe.tasks.env_plan import needs_repo, plan_env

    client = docker_client(None)
    target, base_id = image_target(BASE_IMAGE, None, store.cache_dir)
    plan = plan_env(task, target, base_id, store.snapshot(task, task.setup_commit) if needs_repo(task) else None)
    task_key = hashlib.sha256(f"{plan.key}/{task.repo}@{task.base_commit}".encode()).hexdigest()[:16]
    for tag in (f"verl-swe/task:{task_key}", f"verl-swe/env:{plan.key}"):
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


def measure_ours(task, backend: str, repos: Path) -> dict:
    from verl_swe.tasks import Environments

    with tempfile.TemporaryDirectory(prefix="verl-swe-bench-") as cache:
        sandbox = {"state_dir": f"{cache}/sandboxes"} if backend == "local" else {}
        envs = Environments(backend, repos_dir=repos, cache_dir=cache, sandbox=sandbox)
        try:
            if backend == "docker":
                _remove_docker_images(task, envs.store)
            start = time.perf_counter()
            asyncio.run(envs.prepare(task))
            cold = time.perf_counter() - start
            start = time.perf_counter()
            asyncio.run(envs.prepare(task))
            warm = time.perf_counter() - start
        finally:
            envs.close()
    return {"cold_s": round(cold, 2), "warm_s": round(warm, 4)}


def measure_baseline(task, repos: Path) -> dict:
    """The row's install commands in a host virtualenv, with the network and pip's index, nothing offline."""
    from verl_swe.tasks.snapshot import snapshot_commit

    cfg = task.install_config
    commands = [f"pip install {shlex.join(cfg.pip_packages)}"] if cfg.pip_packages else []
    commands.append(cfg.install)
    out = {}
    for name, no_cache in (("cold_s", "1"), ("warm_s", "")):
        with tempfile.TemporaryDirectory(prefix="verl-swe-bench-") as tmp:
            repo = Path(tmp) / "repo"
            snapshot_commit(repos / task.repo_dirname, task.base_commit, repo)
            env = {k: v for k, v in os.environ.items() if k != "PIP_NO_CACHE_DIR"}
            env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "SETUPTOOLS_SCM_PRETEND_VERSION": task.version or "0",
                        **({"PIP_NO_CACHE_DIR": "1"} if no_cache else {})})
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "venv", f"{tmp}/venv"], check=True)
            for c in commands:
                subprocess.run(f". {tmp}/venv/bin/activate && {c}", shell=True, cwd=repo, env=env, check=True,
                               capture_output=True)
            out[name] = round(time.perf_counter() - start, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["docker", "local"])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "env-build-results.json")
    a = ap.parse_args()
    from verl_swe.tasks import load_tasks

    builder = _builder()
    out_dir = builder.default_dir()
    _, envs_file = builder.build(out_dir, out_dir / "cache", "local")
    repos = out_dir / "repos"
    rows = load_tasks(envs_file)
    os.environ["PIP_NO_CACHE_DIR"] = "1"  # cold means cold for pip's HTTP cache too (our fetch inherits it)
    results = []
    for task in rows:
        entry = {"project": task.meta["source"], "build_backend": task.meta["build_backend"],
                 "install": task.install_config.install}
        for backend in a.backends:
            entry[backend] = measure_ours(task, backend, repos)
            print(task.instance_id, backend, entry[backend], flush=True)
        entry["host_pip"] = measure_baseline(task, repos)
        print(task.instance_id, "host pip", entry["host_pip"], flush=True)
        results.append(entry)
    doc = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_at_end": os.getloadavg()},
        "method": __doc__.split("\n\n", 2)[2].strip(),
        "results": results,
    }
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(a.out)


if __name__ == "__main__":
    main()
