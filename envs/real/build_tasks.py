"""Build a suite of real tasks from published PyPI sdists (nothing of those projects is committed here:
they are fetched into a cache, and their own licences apply).

    python envs/real/build_tasks.py [--out DIR] [--cache DIR] [--backend local|docker]

DIR (default $VERL_SWE_REAL_DIR or ~/.cache/verl-swe/real) gets:
  repos/pypi__<name>/  one git repository per project, one commit per published version (its sdist's files)
  tasks.jsonl          real bug fixes: base = the older version, gold patch = the source diff to the newer
                       one, test_patch = its regression tests; FAIL_TO_PASS / PASS_TO_PASS found by running
                       the tests in a sandbox before and after the fix
  envs.jsonl           one row per project (every build backend below): the published version's own test
                       suite (an eval_script), PASS_TO_PASS found by running it; these rows check environments,
                       not agents: the empty patch "resolves" them and curation drops them (no gold patch)

Use them with `--repos-dir DIR/repos`, e.g. `verl-swe envs build --instances DIR/tasks.jsonl --repos-dir DIR/repos`.
A rerun reuses the sdists, repositories and rows already built (the rows are rebuilt when this file changes).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the source checkout, if verl_swe is not installed
from verl_swe.tasks.snapshot import git  # noqa: E402

OWNER = "pypi"
PYTEST = "python -m pytest -rA --tb=short -p no:cacheprovider"


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    backend: str  # what the check covers
    tests: tuple[str, ...]  # test paths of the published suite
    install: str = "pip install -e ."
    pip_packages: tuple[str, ...] = ("pytest",)
    test_cmd: str = PYTEST


@dataclass(frozen=True)
class Fix:
    project: Project  # at the buggy version
    fixed: str  # the version that fixed it
    problem_statement: str
    test_dirs: tuple[str, ...] = ("tests",)


PLATFORMDIRS = Project("platformdirs", "4.2.1", "hatchling + hatch-vcs, extras in the install line",
                       ("tests",), install='pip install -e ".[test]"', pip_packages=())
SEMVER = Project("semver", "3.0.1", "setuptools (setup.cfg) + setuptools_scm", ("tests",),
                 pip_packages=("pytest", "pytest-cov"))
TOMLKIT = Project("tomlkit", "0.11.5", "poetry-core", ("tests/test_items.py", "tests/test_api.py"))
PROJECTS = [
    Project("six", "1.16.0", "setuptools (setup.py only, no pyproject.toml)", ("test_six.py",)),
    Project("cachetools", "5.3.1", "setuptools (setup.cfg)", ("tests",)),
    Project("more-itertools", "10.2.0", "flit_core", ("tests",)),
    Project("findpython", "0.6.1", "pdm-backend", ("tests/test_utils.py", "tests/test_finder.py")),
    PLATFORMDIRS, SEMVER, TOMLKIT,
]
FIXES = [
    Fix(PLATFORMDIRS, "4.2.2", (
        "user_data_dir and friends are wrong on Android apps built with python-for-android\n\n"
        "On Android, platformdirs finds the app's folder through pyjnius, then by looking for /data/.../files on "
        "sys.path. Apps packaged by python-for-android expose the context as `android.mActivity`, which is never "
        "tried, and apps installed on adopted storage live under /mnt/expand/<uuid>/user/<n>/<app>/files, which "
        "the sys.path fallback does not recognise, so _android_folder() returns None there.")),
    Fix(SEMVER, "3.0.2", (
        "Version.replace() on a subclass returns the base class\n\n"
        "Following the docs' example of a Version subclass that accepts a 'v' prefix, "
        "`SemVerWithVPrefix.parse('v1.1.0').replace(prerelease='dev.0')` gives a plain Version (printed "
        "'1.1.0-dev.0'), or fails in the subclass's parse, instead of a SemVerWithVPrefix printed 'v1.1.0-dev.0'.")),
    Fix(TOMLKIT, "0.11.6", (
        "Keys containing a backslash are written unescaped\n\n"
        "`tomlkit.key('\\\\').as_string()` produces `\"\\\"`, which is not valid TOML: a backslash in a quoted key "
        "must be escaped (`\"\\\\\\\\\"`), as tomlkit already does for quotes and control characters.")),
]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return proc


def fetch_sdist(name: str, version: str, cache: Path) -> Path:
    """The published sdist, downloaded once with pip (PyPI or the mirror pip is configured for)."""
    cache.mkdir(parents=True, exist_ok=True)
    want = f"{name}-{version}.".lower().replace("-", "_")
    for attempt in range(2):
        for p in cache.iterdir():
            if p.name.lower().replace("-", "_").startswith(want) and p.name.endswith((".tar.gz", ".zip")):
                return p
        if attempt == 0:
            _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                  "-d", str(cache), f"{name}=={version}"])
    raise SystemExit(f"pip downloaded no sdist of {name}=={version} into {cache}")


def _unpack(sdist: Path, dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(sdist) as t:
        t.extractall(tmp, filter="data")
        (root,) = Path(tmp).iterdir()
        for item in root.iterdir():
            shutil.move(str(item), dest / item.name)


def project_repo(name: str, versions: list[str], repos: Path, cache: Path) -> dict[str, str]:
    """repos/pypi__<name>: one commit per version, in order; returns version -> commit."""
    repo = repos / f"{OWNER}__{name}"
    commits_file = repo / ".git" / "verl-swe-versions.json"
    if commits_file.exists():
        commits = json.loads(commits_file.read_text())
        if all(v in commits for v in versions):
            return commits
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo)
    commits = {}
    for v in versions:
        for item in repo.iterdir():
            if item.name != ".git":
                shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
        _unpack(fetch_sdist(name, v, cache), repo)
        git("add", "-A", "-f", cwd=repo)
        git("commit", "-q", "--allow-empty", "-m", f"{name} {v} (published sdist)", cwd=repo)
        commits[v] = git("rev-parse", "HEAD", cwd=repo)
    commits_file.write_text(json.dumps(commits))
    return commits


def _is_test(path: str, test_dirs: tuple[str, ...]) -> bool:
    return path.startswith(tuple(d.rstrip("/") + "/" for d in test_dirs)) or Path(path).name.startswith("test_")


def fix_patches(repo: Path, a: str, b: str, test_dirs: tuple[str, ...]) -> tuple[str, str]:
    """(gold patch: the Python source changed between the versions, test_patch: the changed tests)."""
    changed = git("diff", "--name-only", a, b, cwd=repo).splitlines()
    tests = [p for p in changed if _is_test(p, test_dirs)]
    source = [p for p in changed if p not in tests and p.endswith((".py", ".pyi")) and ".egg-info/" not in p]
    def diff(paths: list[str]) -> str:  # not through git(): it strips the output, and a diff ends in context lines
        return _run(["git", "diff", "--no-color", "--no-renames", a, b, "--", *paths], cwd=repo).stdout if paths else ""

    return diff(source), diff(tests)


def suite_script(p: Project) -> str:
    """An environment row's eval script (swebench's shape): the published suite between the log markers."""
    import shlex

    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    return "\n".join(["#!/bin/bash", "set -uxo pipefail", f"echo '{START_TEST_OUTPUT}'",
                      " ".join([p.test_cmd, *map(shlex.quote, p.tests)]), f"echo '{END_TEST_OUTPUT}'"]) + "\n"


def base_row(p: Project, commit: str) -> dict:
    return {
        "repo": f"{OWNER}/{p.name}", "base_commit": commit, "environment_setup_commit": commit,
        "version": p.version, "created_at": "2025-01-01T00:00:00Z", "hints_text": "",
        "install_config": {"python": "3.11", "install": p.install, "pip_packages": list(p.pip_packages),
                           "test_cmd": p.test_cmd, "log_parser": "parse_log_pytest"},
        "meta": {"source": f"PyPI sdist {p.name}=={p.version}", "build_backend": p.backend},
    }


async def determine_tests(rows: list[dict], fixes: list[bool], envs) -> list[dict]:
    """FAIL_TO_PASS / PASS_TO_PASS of each row as `verl-swe mine` finds them: the tests run in the task's sandbox
    before and after the fix (verl_swe/mine/validate.py); an environment row's published suite, run once."""
    from verl_swe.mine.validate import TestRunError, classify, statuses
    from verl_swe.tasks import Task

    out = []
    for row, is_fix in zip(rows, fixes):
        probe = Task.model_validate({**row, "FAIL_TO_PASS": row["FAIL_TO_PASS"] or ["?"]})
        files = row.pop("_test_files")
        try:
            if is_fix:
                before, _ = await statuses(probe, envs, "", row["test_patch"], files=files)
                after, _ = await statuses(probe, envs, row["patch"], row["test_patch"], files=files)
                row["FAIL_TO_PASS"], row["PASS_TO_PASS"], _ = classify([before], [after])
            else:
                status, _ = await statuses(probe, envs, "", "", files=files)
                passed = sorted(t for t, s in status.items() if s == "PASSED")
                row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = passed[:1], passed[1:]
                row["meta"]["suite"] = {s: sum(v == s for v in status.values()) for s in sorted(set(status.values()))}
        except TestRunError as e:
            raise SystemExit(f"{row['instance_id']}: {e}") from None
        if not row["FAIL_TO_PASS"]:
            raise SystemExit(f"{row['instance_id']}: no test goes from failing to passing")
        out.append(row)
    return out


def build(out: Path, cache: Path, backend: str) -> tuple[Path, Path]:
    from verl_swe.tasks import Environments

    stamp = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    done = out / ".built"
    if done.exists() and done.read_text() == stamp:
        return out / "tasks.jsonl", out / "envs.jsonl"
    repos = out / "repos"
    versions: dict[str, list[str]] = {}
    for p in PROJECTS:
        versions.setdefault(p.name, []).append(p.version)
    for f in FIXES:
        versions[f.project.name].append(f.fixed)
    commits = {name: project_repo(name, vs, repos, cache / "sdists") for name, vs in versions.items()}
    rows, is_fix = [], []
    for f in FIXES:
        p = f.project
        a, b = commits[p.name][p.version], commits[p.name][f.fixed]
        patch, test_patch = fix_patches(repos / f"{OWNER}__{p.name}", a, b, f.test_dirs)
        test_files = [d.split(" b/", 1)[1] for d in test_patch.splitlines() if d.startswith("diff --git ")]
        rows.append({**base_row(p, a), "instance_id": f"{OWNER}__{p.name}-{f.fixed}",
                     "problem_statement": f.problem_statement, "patch": patch, "test_patch": test_patch,
                     "FAIL_TO_PASS": [], "PASS_TO_PASS": [], "_test_files": [t for t in test_files if t.endswith(".py")]})
        rows[-1]["meta"]["fix"] = f"{p.name} {p.version} -> {f.fixed}"
        is_fix.append(True)
    for p in PROJECTS:
        rows.append({**base_row(p, commits[p.name][p.version]), "instance_id": f"{OWNER}__{p.name}-env-{p.version}",
                     "problem_statement": f"Environment check: the test suite of {p.name} {p.version}.",
                     "patch": "", "test_patch": "", "eval_script": suite_script(p),
                     "FAIL_TO_PASS": [], "PASS_TO_PASS": [], "_test_files": list(p.tests)})
        is_fix.append(False)
    sandbox = {"state_dir": str(cache / "sandboxes")} if backend == "local" else {}
    envs = Environments(backend, repos_dir=repos, cache_dir=cache / "verl-swe", sandbox=sandbox)
    try:
        errors = asyncio.run(envs.build([_probe_task(r) for r in rows], workers=2))
        if any(errors.values()):
            raise SystemExit("\n".join(f"{k}: {v}" for k, v in errors.items() if v))
        rows = asyncio.run(determine_tests(rows, is_fix, envs))
    finally:
        envs.close()
    out.mkdir(parents=True, exist_ok=True)
    n = len(FIXES)
    for path, part in ((out / "tasks.jsonl", rows[:n]), (out / "envs.jsonl", rows[n:])):
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in part))
    done.write_text(stamp)
    return out / "tasks.jsonl", out / "envs.jsonl"


def _probe_task(row: dict):
    from verl_swe.tasks import Task

    return Task.model_validate({k: v for k, v in row.items() if not k.startswith("_")} | {"FAIL_TO_PASS": ["?"]})


def default_dir() -> Path:
    return Path(os.environ.get("VERL_SWE_REAL_DIR") or Path.home() / ".cache" / "verl-swe" / "real")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=default_dir(), help="where rows and repos go")
    ap.add_argument("--cache", type=Path, default=None, help="sdists and build cache (default OUT/cache)")
    ap.add_argument("--backend", default="local", choices=["local", "docker"], help="where tests are run")
    a = ap.parse_args()
    tasks, envs = build(a.out, a.cache or a.out / "cache", a.backend)
    print(f"{tasks}\n{envs}\nrepos: {a.out / 'repos'}")


if __name__ == "__main__":
    main()
