"""Grade a patch: a fresh sandbox at `base_commit`, the guarded patch, the task's own tests.

Steps (SWE-bench's harness, plus the guard): apply the model patch with test and runner files
removed; restore and apply the task's `test_patch`; run the test files with pinned settings and a
timeout; parse the log with swebench's parser and grade it with swebench's functions. Every failure
is a value: `resolved=False` and the reason in `error`.
"""

from __future__ import annotations

import logging
import shlex
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verl_swe.reward.patch_guard import guard_patch
from verl_swe.sandbox import open_sandbox
from verl_swe.sandbox.shell import SandboxError
from verl_swe.tasks.env_plan import EnvBuildError
from verl_swe.tasks.environment import Environments
from verl_swe.tasks.patches import touched_files
from verl_swe.tasks.repos import RepoError
from verl_swe.tasks.schema import Task
from verl_swe.tasks.spec import DETERMINISTIC_ENV, SpecError, grade_log, make_test_spec, write_swebench_log

logger = logging.getLogger(__name__)
MAX_LOG_BYTES = 64 << 20


@dataclass
class GradeResult:
    instance_id: str
    resolved: bool = False
    patch_applied: bool = False
    tests_status: dict | None = None  # swebench's {"FAIL_TO_PASS": {"success": [], "failure": []}, "PASS_TO_PASS": ...}
    error: str | None = None
    dropped_files: dict[str, str] = field(default_factory=dict)  # path -> why the guard removed it
    test_exit_code: int | None = None
    duration_s: float = 0.0  # the whole grading, environment lookup and sandbox included
    test_duration_s: float | None = None  # the test command alone
    log_path: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


async def _apply(box, patch_path: str) -> tuple[bool, str]:
    """git apply, then GNU patch with fuzz (what SWE-bench's harness falls back to)."""
    r = await box.exec(f"git apply --whitespace=nowarn {patch_path}")
    if r.exit_code == 0:
        return True, ""
    r2 = await box.exec(f"patch --batch --fuzz=5 -p1 --no-backup-if-mismatch -i {patch_path}")
    return r2.exit_code == 0, (r.output + r2.output)[-2000:]


async def grade(task: Task, patch: str | None, envs: Environments, *, timeout_s: float = 1800.0,
                log_dir: Path | None = None, guard: bool = True) -> GradeResult:
    """Grade `patch` for `task`. `guard=False` skips the patch guard (only to measure the guard)."""
    start = time.monotonic()
    result = GradeResult(task.instance_id)
    try:
        await _grade(task, patch, envs, timeout_s, log_dir, guard, result)
    except (EnvBuildError, RepoError) as e:
        result.error = f"environment: {e}"
    except SpecError as e:
        result.error = str(e)
    except SandboxError as e:
        result.error = f"sandbox: {e}"
    result.duration_s = round(time.monotonic() - start, 3)
    return result


async def _grade(task, patch, envs, timeout_s, log_dir, guard, result: GradeResult) -> None:
    spec = make_test_spec(task)
    guarded = guard_patch(patch, task.test_patch) if guard else None
    model_patch = guarded.patch if guarded else (patch or "")
    result.dropped_files = guarded.dropped if guarded else {}
    config = await envs.prepare(task)
    async with open_sandbox(config) as box:
        if model_patch.strip():
            await box.write_file("/tmp/verl_swe_model.patch", model_patch)
            ok, out = await _apply(box, "/tmp/verl_swe_model.patch")
            if not ok:
                result.error = f"patch does not apply:\n{out}"
                return
        result.patch_applied = True
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in DETERMINISTIC_ENV.items())
        if spec.eval_script:
            # swebench>=5 rows: their script restores test files, applies test_patch, runs and marks.
            await box.write_file("/tmp/verl_swe_eval.sh", spec.eval_script)
            cmd = f"env {env} bash /tmp/verl_swe_eval.sh"
        else:
            # The task's test files exactly as test_patch makes them, whatever the model patch did.
            files = " ".join(shlex.quote(f) for f in touched_files(task.test_patch))
            restore = await box.exec(f"for f in {files}; do git checkout -q HEAD -- \"$f\" 2>/dev/null "
                                      f"|| rm -rf -- \"$f\"; done")
            await box.write_file("/tmp/verl_swe_test.patch", task.test_patch)
            r = await box.exec("git apply --whitespace=nowarn /tmp/verl_swe_test.patch")
            if restore.exit_code != 0 or r.exit_code != 0:
                result.error = f"the task's test_patch does not apply:\n{(restore.output + r.output)[-2000:]}"
                return
            cmd = f"env {env} bash -c {shlex.quote(spec.test_cmd)}"
        r = await box.exec(f"{cmd} > /tmp/verl_swe_test_output.txt 2>&1", timeout=timeout_s)
        result.test_duration_s = round(r.duration_s, 3)
        if r.timed_out:
            result.error = f"tests timed out after {timeout_s:g} s"
            return
        result.test_exit_code = r.exit_code
        await box.exec(f"truncate -s \"<{MAX_LOG_BYTES}\" /tmp/verl_swe_test_output.txt")  # a runaway log
        output = (await box.read_bytes("/tmp/verl_swe_test_output.txt", timeout=300)).decode(errors="replace")
    with tempfile.TemporaryDirectory() as tmp:
        log = (log_dir / task.instance_id / "test_output.txt") if log_dir else Path(tmp) / "test_output.txt"
        write_swebench_log(log, output, result.test_exit_code, eval_script=bool(spec.eval_script))
        result.resolved, result.tests_status = grade_log(task, spec, log)
        result.log_path = str(log) if log_dir else None
    if result.tests_status is None:
        result.error = "no test results in the log (the tests did not run, or their exit code contradicts the log)"
