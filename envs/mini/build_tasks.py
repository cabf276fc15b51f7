"""Build the bundled `verl-swe-mini` task suite, and with --check prove that every task works.

Every directory envs/mini/tasks/<name>/ holds repo/ (the buggy source tree), task.yaml
(problem_statement, hints_text, FAIL_TO_PASS, PASS_TO_PASS), gold.patch and test.patch. Each
repo/ is committed as one deterministic git commit (verl_swe.tasks.snapshot), and one SWE-bench
style row per task goes to envs/mini/tasks.jsonl, sorted by instance_id.

    python envs/mini/build_tasks.py           # regenerate tasks.jsonl
    python envs/mini/build_tasks.py --check   # run each task's tests and compare tasks.jsonl

--check runs the test files that test.patch touches in scratch snapshots: with test.patch alone
every FAIL_TO_PASS test must fail and every PASS_TO_PASS test pass; with gold.patch as well all
of them must pass, and no other test may exist in those files.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the source checkout, if verl_swe is not installed
from verl_swe.tasks.snapshot import snapshot_directory  # noqa: E402

TASKS_DIR = HERE / "tasks"
OUTPUT = HERE / "tasks.jsonl"
PYTEST_ARGS = ["-rA", "--tb=short", "-p", "no:cacheprovider"]
INSTALL_CONFIG = {
    "python": "3.11",
    "pip_packages": ["pytest"],
    "install": "",
    "test_cmd": "python -m pytest " + " ".join(PYTEST_ARGS),
    "log_parser": "parse_log_pytest",
}
# Files snapshot_directory would commit but that are not part of a task's source.
STRAY_NAMES = {".git", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv"}


class TaskError(Exception):
    pass


def build_row(name: str, scratch: Path) -> dict:
    task_dir = TASKS_DIR / name
    if stray := sorted(p for p in (task_dir / "repo").rglob("*") if p.name in STRAY_NAMES):
        raise TaskError(f"{name}: delete {stray[0]}, it would change base_commit")
    meta = yaml.safe_load((task_dir / "task.yaml").read_text(encoding="utf-8"))
    if missing := [k for k in ("problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS") if k not in meta]:
        raise TaskError(f"{name}: task.yaml lacks {', '.join(missing)}")
    sha = snapshot_directory(task_dir / "repo", scratch / name)
    return {
        "instance_id": f"verl-swe-mini__{name}-1",
        "repo": f"verl-swe-mini/{name}",
        "base_commit": sha,
        "environment_setup_commit": sha,
        "version": "1.0",
        "created_at": "2025-01-01T00:00:00Z",
        "problem_statement": meta["problem_statement"],
        "hints_text": meta.get("hints_text") or "",
        "patch": (task_dir / "gold.patch").read_text(encoding="utf-8"),
        "test_patch": (task_dir / "test.patch").read_text(encoding="utf-8"),
        "FAIL_TO_PASS": list(meta["FAIL_TO_PASS"]),
        "PASS_TO_PASS": list(meta["PASS_TO_PASS"]),
        "install_config": INSTALL_CONFIG,
    }


def patched_files(patch: str) -> list[str]:
    return re.findall(r"^diff --git a/\S+ b/(\S+)$", patch, re.M)


def run_tests(root: Path, files: list[str]) -> dict[str, str]:
    """Test id -> PASSED/FAILED/ERROR, from the `-rA` short summary."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    proc = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_ARGS, *files],
                          cwd=root, capture_output=True, text=True, env=env)
    return {m[2]: m[1] for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", proc.stdout, re.M)}


def check_task(row: dict, scratch: Path) -> str:
    name = row["repo"].split("/", 1)[1]
    f2p, p2p = row["FAIL_TO_PASS"], row["PASS_TO_PASS"]
    if len(f2p) < 1 or len(p2p) < 2:
        raise TaskError(f"{name}: needs >= 1 FAIL_TO_PASS and >= 2 PASS_TO_PASS tests")
    if bad := [t for t in f2p + p2p if re.search(r"\s", t)]:
        raise TaskError(f"{name}: test ids must not contain whitespace: {bad}")
    if bad := [f for f in patched_files(row["patch"]) if f.startswith("tests/")]:
        raise TaskError(f"{name}: gold.patch must not touch tests: {bad}")
    test_files = patched_files(row["test_patch"])
    if not test_files or (bad := [f for f in test_files if not f.startswith("tests/")]):
        raise TaskError(f"{name}: test.patch must touch only files under tests/: {bad or 'it touches none'}")
    stages = (("before", "with test.patch only", ["test_patch"], "FAILED"),
              ("after", "with test.patch + gold.patch", ["test_patch", "patch"], "PASSED"))
    for tag, stage, keys, f2p_want in stages:
        work = scratch / f"{name}-{tag}"
        snapshot_directory(TASKS_DIR / name / "repo", work)
        for key in keys:
            proc = subprocess.run(["git", "apply", "-"], cwd=work, input=row[key], capture_output=True, text=True)
            if proc.returncode:
                patch_name = "gold.patch" if key == "patch" else "test.patch"
                raise TaskError(f"{name}: {patch_name} does not apply: {proc.stderr.strip()}")
        results = {t: "FAILED" if st == "ERROR" else st for t, st in run_tests(work, test_files).items()}
        want = {**{t: f2p_want for t in f2p}, **{t: "PASSED" for t in p2p}}
        if wrong := [f"{t} (want {w}, got {results.get(t, 'not run')})" for t, w in want.items() if results.get(t) != w]:
            raise TaskError(f"{name}: {stage}: " + "; ".join(wrong))
    if extra := sorted(set(results) - set(f2p) - set(p2p)):
        raise TaskError(f"{name}: tests in {test_files} missing from FAIL_TO_PASS/PASS_TO_PASS: {extra}")
    return f"ok  {row['instance_id']:<32} FAIL_TO_PASS={len(f2p)} PASS_TO_PASS={len(p2p)} files={','.join(test_files)}"


def check_output(rows: list[dict]) -> None:
    expected = "".join(json.dumps(row) + "\n" for row in rows)
    actual = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
    if actual != expected:
        old, new = set(actual.splitlines()), set(expected.splitlines())
        stale = sorted({json.loads(line)["instance_id"] for line in new - old}) or ["order/format"]
        raise TaskError(f"{OUTPUT.name} is out of date for {', '.join(stale)}: run python envs/mini/build_tasks.py")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="run every task's tests and compare tasks.jsonl")
    args = parser.parse_args()
    names = sorted(p.name for p in TASKS_DIR.iterdir() if p.is_dir() and not p.name.startswith("."))
    try:
        with tempfile.TemporaryDirectory(prefix="verl-swe-mini-") as tmp:
            rows = sorted((build_row(name, Path(tmp)) for name in names), key=lambda r: r["instance_id"])
            if not args.check:
                OUTPUT.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
                print(f"wrote {len(rows)} tasks to {OUTPUT}")
                return 0
            for row in rows:
                print(check_task(row, Path(tmp)), flush=True)
            check_output(rows)
    except (TaskError, OSError, yaml.YAMLError) as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
