"""What a task's environment is: a content hash and the build script, the same for both backends.

Tasks whose install steps and packages agree share one environment (1,000 tasks of one repo
version build once). The repository enters the key only when installation reads it. A task that
cannot be built here (another Python, conda, apt packages the image lacks, network in pre_install)
is refused while planning, before anything is fetched or built.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from verl_swe.tasks.project import ProjectError, read_project, scm_pretend_var
from verl_swe.tasks.schema import InstallConfig, Task
from verl_swe.tasks.steps import Step, StepError, plan_steps
from verl_swe.tasks.target import Target

ENV_FORMAT = 2  # bump when the build script changes, so caches rebuild
FAILED_MARK = "VERL_SWE_BUILD_FAILED"
# For legacy builds in pip's isolated environments; fetched with the repository's own build requirements
# (one resolution: these are unpinned, so they never conflict with them).
BASE_FETCH = ("setuptools", "wheel")


class EnvBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class EnvPlan:
    key: str
    steps: list[Step]
    script: str  # bash, run in the repository with $VENV and $WHEELS set
    env_vars: dict[str, str]  # the task's env_vars: the build and its sandboxes both see them
    needs_repo: bool
    build_requires: dict[str, list[str]] = field(default_factory=dict)  # local project path -> its build requires
    row_requirements: str | None = None  # the row's pinned requirements, written to $WHEELS

    def fetch_args(self, wheels: Path) -> list[tuple[list[str], str]]:
        """(pip requirement arguments, where they come from) for the host to fetch before building."""
        out = []
        for n, (path, reqs) in enumerate(self.build_requires.items()):
            out.append(([*reqs, *(BASE_FETCH if n == 0 else ())],
                        f"build requirements of the repository{'' if path == '.' else ' ' + path}"))
        if not self.build_requires:
            out.append((list(BASE_FETCH), "setuptools and wheel for legacy builds"))
        for s in self.steps:
            if s.fetch:
                out.append(([a.replace("{wheels}", str(wheels)) for a in s.fetch], f"{s.source}: {s.command}"))
        return out


def _pretend_version(task: Task) -> str | None:
    try:
        return str(Version(task.version)) if task.version else None
    except InvalidVersion:
        return None


def _project_facts(task: Task, steps: list[Step], target: Target, repo_dir: Path | None):
    """Build requirements of every repository path the steps build, and the SCM version overrides;
    refuses a project whose requires-python excludes the sandbox's Python."""
    build_requires: dict[str, list[str]] = {}
    scm_env: dict[str, str] = {}
    version = _pretend_version(task)
    for path in dict.fromkeys(p for s in steps for p in s.local_projects):
        if repo_dir is None:
            continue
        try:
            facts = read_project(repo_dir, path)
        except ProjectError as e:
            raise EnvBuildError(f"{task.instance_id}: {e}") from None
        if facts is None:
            continue
        problem = target.python_problem(facts.requires_python, f"requires-python in {path}/{facts.requires_python_from}")
        if problem:
            raise EnvBuildError(f"{task.instance_id}: refused before building: the project {problem}")
        build_requires[path] = facts.all_build_requires()
        # The sandbox's repository is one commit without tags: setuptools_scm / hatch-vcs would call it
        # 0.1.dev1, so the task's version stands in (per distribution, not to touch sdists built alongside).
        if version and facts.name:
            scm_env[scm_pretend_var(facts.name)] = version
        elif version and facts.uses_scm_version:
            scm_env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
    return build_requires, scm_env


def needs_repo(task: Task) -> bool:
    """Whether installing reads the repository (then it is in the key, and planning reads its files)."""
    cfg = task.install_config or InstallConfig()
    packages = (cfg.packages or "").strip()
    own_requirements = packages == "requirements.txt" and bool((task.requirements or "").strip())
    return bool(cfg.install.strip() or cfg.pre_install or cfg.reqs_path
                or (packages == "requirements.txt" and not own_requirements))


def plan_env(task: Task, target: Target, base: str, repo_dir: Path | None = None) -> EnvPlan:
    """`target` (the sandbox's interpreter) and `base` (base image id, or host python) enter the key.
    `repo_dir` is the repository at setup_commit, read for the project's build requirements."""
    cfg = task.install_config or InstallConfig()
    iid = task.instance_id
    problem = target.python_problem(cfg.python, "install_config.python")
    if problem:
        raise EnvBuildError(f"{iid}: refused before building: the task {problem}. Run it in its published "
                            "image (the row's `image`/`docker_image`, docker backend)")
    try:
        facts = read_project(repo_dir) if repo_dir is not None else None
    except ProjectError:
        facts = None  # reported with its step below, when a step builds the project
    try:
        sp = plan_steps(task, facts.name if facts else None)
    except StepError as e:
        raise EnvBuildError(f"{iid}: refused before building: {e}") from None
    missing = [f"{p} ({w})" for p, w in sp.deb_packages if p not in target.deb_packages]
    if missing:
        raise EnvBuildError(f"{iid}: refused before building: pre_install needs Debian packages the sandbox image "
                            f"does not have and cannot fetch offline: {', '.join(missing)}. Add them to the base "
                            "image (DEB_PACKAGES in envs/base/build.sh) or use the task's published image")
    steps = sp.steps
    build_requires, scm_env = _project_facts(task, steps, target, repo_dir)
    reads_repo = needs_repo(task)
    lines = [
        "set -eo pipefail",
        "__verl_swe_step=setup",
        # EXIT, not ERR: a step's own `exit 3` ends the build too, and must be named as well
        f"trap 'verl_swe_rc=$?; [ \"$verl_swe_rc\" = 0 ] || echo \"{FAILED_MARK} exit=$verl_swe_rc "
        "step=$__verl_swe_step\" >&2' EXIT",
        "export PIP_NO_INDEX=1 PIP_FIND_LINKS=\"$WHEELS\" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "
        "PIP_PROGRESS_BAR=off",
        *[f"export {k}={shlex.quote(v)}" for k, v in {**cfg.env_vars, **scm_env}.items()],
        "python3 -m venv \"$VENV\"",
        "export PATH=\"$VENV/bin:$PATH\" VIRTUAL_ENV=\"$VENV\"",
    ]
    for n, s in enumerate(steps, 1):
        lines += [f"__verl_swe_step={n}; echo {shlex.quote(f'>>> [{n}] {s.command}')}", s.command]
    identity = {
        "format": ENV_FORMAT, "python": target.identity, "base": base, "script": lines,
        "fetch": [list(s.fetch) for s in steps], "build_requires": build_requires,
        "row_requirements": sp.row_requirements, "repo": [task.repo, task.setup_commit] if reads_repo else None,
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return EnvPlan(key, steps, "\n".join(lines) + "\n", dict(cfg.env_vars), reads_repo, build_requires,
                   sp.row_requirements)


def describe_failure(plan: EnvPlan, output: str, tail: int = 40) -> tuple[str, str]:
    """(headline, the failing step's last output lines) from a build log: the failing command and the
    real error at its end, not the head of the log."""
    lines = output.splitlines()
    marks = [i for i, ln in enumerate(lines) if FAILED_MARK in ln]
    if not marks:
        body = [ln for ln in lines if ln.strip()][-tail:]
        return f"the build failed: {_last_error(body)}", "\n".join(body)
    end = marks[-1]
    m = re.search(r"exit=(\d+) step=(\S+)", lines[end])
    code, step = (m.group(1), m.group(2)) if m else ("?", "?")
    start = max((i for i, ln in enumerate(lines[:end]) if ln.startswith(f">>> [{step}] ")), default=-1) + 1
    body = [ln for ln in lines[start:end] if ln.strip()][-tail:]
    if step.isdigit() and 0 < int(step) <= len(plan.steps):
        s = plan.steps[int(step) - 1]
        what = f"`{s.command}` ({s.source}) exited {code}"
    else:
        what = f"creating the virtualenv exited {code}"
    return f"{what}: {_last_error(body)}", "\n".join(body)


def _last_error(lines: list[str]) -> str:
    errors = [ln.strip() for ln in lines if re.match(r"\s*(ERROR|error|\w*Error)\b", ln)]
    return (errors or [ln.strip() for ln in lines if ln.strip()] or ["(no output)"])[-1][:400]
