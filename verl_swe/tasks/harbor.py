"""Harbor task directories as tasks: `task.toml`, `instruction.md`, `environment/Dockerfile`, `tests/test.sh`
(the format of laude-institute/harbor, read by SkyRL, rLLM and TRL).

A task's environment is its Dockerfile, built here with no network (so `FROM` an image present
locally, e.g. verl-swe/base:bookworm), plus a one-commit git repository of its working directory so the
agent's changes are a patch. Grading is harbor's verifier convention run through the usual grader:
the eval script puts tests/ at /tests only at grading time, runs `bash /tests/test.sh` in the working
directory, and reads /logs/verifier/reward.json ("reward") or reward.txt, else the script's exit status.
The task is resolved when the reward is 1 (full credit): one test, `harbor:reward`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tarfile
import tomllib
from pathlib import Path
from typing import Any, Iterator

REWARD_TEST = "harbor:reward"
MAX_TESTS_BYTES = 8 << 20  # tests/ travels inside the eval script


def is_harbor_task(path: Path) -> bool:
    return (path / "task.toml").is_file() and (path / "instruction.md").is_file()


def harbor_dirs(root: Path) -> list[Path]:
    """`root` itself when it is a task, else its task subdirectories (a dataset), sorted."""
    if is_harbor_task(root):
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "task.toml").is_file())


def _tests_archive(tests: Path) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(tests.rglob("*")):
            info = tar.gettarinfo(str(p), arcname=str(p.relative_to(tests)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            tar.addfile(info, p.open("rb") if p.is_file() else None)
    if buf.tell() > MAX_TESTS_BYTES:
        raise ValueError(f"{tests} is {buf.tell()} bytes compressed; at most {MAX_TESTS_BYTES} travel with the task")
    return base64.encodebytes(buf.getvalue()).decode()


def eval_script(tests: Path, env: dict[str, str]) -> str:
    """Harbor's verifier as a swebench-style eval script (markers, then one PASSED/FAILED line)."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    exports = "".join(f"export {k}={_sh(v)}\n" for k, v in env.items())
    return f"""#!/bin/bash
set -uxo pipefail
rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier
base64 -d > /tmp/verl_swe_tests.tgz <<'VERL_SWE_TESTS'
{_tests_archive(tests)}VERL_SWE_TESTS
tar -xzf /tmp/verl_swe_tests.tgz -C /tests && rm -f /tmp/verl_swe_tests.tgz
{exports}bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1
verl_swe_status=$?
cat /logs/verifier/test-stdout.txt
if [ -s /logs/verifier/reward.json ]; then
  verl_swe_reward=$(python3 -c 'import json,sys; print(float(json.load(open(sys.argv[1]))["reward"]))' /logs/verifier/reward.json)
  verl_swe_from=reward.json
elif [ -s /logs/verifier/reward.txt ]; then
  verl_swe_reward=$(tr -d ' \\n\\r' < /logs/verifier/reward.txt); verl_swe_from=reward.txt
else
  verl_swe_reward=$([ "$verl_swe_status" = 0 ] && echo 1 || echo 0); verl_swe_from=exit-status
fi
echo "harbor reward: ${{verl_swe_reward:-none}} (from $verl_swe_from, test.sh exit $verl_swe_status)"
echo "{START_TEST_OUTPUT}"
if awk -v r="${{verl_swe_reward:-0}}" 'BEGIN {{ exit !(r + 0 >= 1) }}'; then echo "PASSED {REWARD_TEST}"; true; else echo "FAILED {REWARD_TEST}"; false; fi
echo "{END_TEST_OUTPUT}"
"""


def _sh(v: str) -> str:
    return "'" + str(v).replace("'", "'\\''") + "'"


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "-", text).strip("-") or "task"


def harbor_row(task_dir: Path) -> dict[str, Any]:
    """One harbor task directory as a task row (raises ValueError naming what is missing or malformed)."""
    task_dir = task_dir.resolve()
    for need in ("instruction.md", "environment/Dockerfile", "tests/test.sh"):
        if not (task_dir / need).is_file():
            raise ValueError(f"harbor task {task_dir}: {need} is missing")
    try:
        cfg = tomllib.loads((task_dir / "task.toml").read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"harbor task {task_dir}: task.toml is not valid TOML: {e}") from None
    name = (cfg.get("task") or {}).get("name") or task_dir.name
    env_cfg, verifier = cfg.get("environment") or {}, cfg.get("verifier") or {}
    digest = hashlib.sha256()
    for p in sorted((task_dir / "environment").rglob("*")):
        if p.is_file():
            digest.update(str(p.relative_to(task_dir)).encode() + b"\0" + p.read_bytes())
    return {
        "instance_id": _slug(name.replace("/", "__")),
        "repo": f"harbor/{_slug(task_dir.name)}",
        "base_commit": digest.hexdigest()[:40],
        "problem_statement": (task_dir / "instruction.md").read_text(),
        "patch": "", "test_patch": "",
        "FAIL_TO_PASS": [REWARD_TEST], "PASS_TO_PASS": [],
        "eval_script": eval_script(task_dir / "tests", {k: str(v) for k, v in (verifier.get("env") or {}).items()}),
        "log_parser": "parse_log_pytest",
        "meta": {"harbor": {"dir": str(task_dir), "environment_hash": digest.hexdigest()[:16],
                            "docker_image": env_cfg.get("docker_image"),
                            "verifier_timeout_sec": verifier.get("timeout_sec"),
                            "agent_timeout_sec": (cfg.get("agent") or {}).get("timeout_sec"),
                            "allow_internet": env_cfg.get("allow_internet")}},
    }


def harbor_rows(root: Path) -> Iterator[tuple[str, Any]]:
    dirs = harbor_dirs(root)
    if not dirs:
        yield str(root), ValueError(f"{root} is a directory but holds no harbor task (task.toml + instruction.md)")
    for d in dirs:
        try:
            yield str(d), harbor_row(d)
        except (ValueError, OSError) as e:
            yield str(d), ValueError(str(e))
