"""What a task's environment is: a content hash and the build script, the same for both backends.

Tasks whose install steps and packages agree share one environment (1,000 tasks of one repo
version build once). The repository enters the key only when installation reads it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass

from verl_swe.tasks.schema import InstallConfig, Task

ENV_FORMAT = 1  # bump when the build script changes, so caches rebuild


class EnvBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class EnvPlan:
    key: str
    pip_requirements: list[str]  # downloaded as wheels on the host, installed with --no-index
    reqs_paths: list[str]  # requirement files inside the repository
    script: str  # bash, run in the repository with $VENV and $WHEELS set
    env_vars: dict[str, str]
    needs_repo: bool


def _pip_packages(cfg: InstallConfig, instance_id: str) -> list[str]:
    pkgs = list(cfg.pip_packages)
    spec = (cfg.packages or "").strip()
    if spec.endswith((".yml", ".yaml")):
        raise EnvBuildError(f"{instance_id}: conda environments (packages: {spec}) need the task's published image")
    if spec and spec != "requirements.txt":
        pkgs += spec.split()
    return pkgs


def plan_env(task: Task, python_version: str, base: str) -> EnvPlan:
    """`python_version` (e.g. "3.11") and `base` (base image id, or host python) enter the key."""
    cfg = task.install_config or InstallConfig()
    pkgs = _pip_packages(cfg, task.instance_id)
    reqs = list(cfg.reqs_path) or (["requirements.txt"] if (cfg.packages or "").strip() == "requirements.txt" else [])
    needs_repo = bool(cfg.install.strip() or cfg.pre_install or reqs)
    lines = [
        "set -euxo pipefail",
        "export PIP_NO_INDEX=1 PIP_FIND_LINKS=\"$WHEELS\" PIP_DISABLE_PIP_VERSION_CHECK=1",
        *[f"export {k}={shlex.quote(v)}" for k, v in cfg.env_vars.items()],
        "python3 -m venv \"$VENV\"",
        "export PATH=\"$VENV/bin:$PATH\" VIRTUAL_ENV=\"$VENV\"",
        *cfg.pre_install,
    ]
    if pkgs:
        lines.append("pip install " + " ".join(map(shlex.quote, pkgs)))
    lines += [f"pip install -r {shlex.quote(r)}" for r in reqs]
    if cfg.install.strip():
        lines.append(cfg.install)
    identity = {
        "format": ENV_FORMAT, "python": python_version, "base": base, "script": lines, "pkgs": pkgs,
        "repo": [task.repo, task.setup_commit] if needs_repo else None,
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return EnvPlan(key, pkgs, reqs, "\n".join(lines) + "\n", dict(cfg.env_vars), needs_repo)


def download_wheels(plan: EnvPlan, python_version: str, dest, repo_dir=None) -> None:
    """Fetch every wheel the build needs on the host, so the build itself runs with no network."""
    import subprocess
    import sys
    from pathlib import Path

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    args = list(plan.pip_requirements) + ["pip", "setuptools", "wheel"]
    for r in plan.reqs_paths:
        args += ["-r", str(Path(repo_dir) / r)] if repo_dir else []
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python_version,
           "--disable-pip-version-check", "-d", str(dest), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise EnvBuildError(f"downloading wheels for {' '.join(args)} failed:\n{proc.stderr.strip()[-1500:]}")
