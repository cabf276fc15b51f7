"""Grade a patch: a fresh sandbox at `base_commit`, the guarded patch, the task's own tests.

Steps (SWE-bench's harness, plus the guard and the integrity checks): flag the model patch statically
(static_flags.py); apply it with test and runner files removed; restore and apply the task's `test_patch`;
insert the sentinel tests and load the grader's pytest probe (integrity/); run the test files with pinned
settings and a timeout; parse the log with swebench's parser and grade it with swebench's functions; then
judge the run's integrity (a tampered run is unresolved, `integrity` says why). Every failure is a value:
`resolved=False` and the reason in `error`.
"""

from __future__ import annotations

import logging
import shlex
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from verl_swe.reward.integrity import IntegrityRun, analyze, judge, log_status
from verl_swe.reward.patch_guard import guard_patch, pytest_config_changed
from verl_swe.reward.static_flags import RUNNER_REPOS, evidence_flags, flagged_paths, static_flags
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
    tampered: bool = False  # the integrity checks found the test run manipulated: unresolved whatever the log says
    integrity: dict | None = None  # their report: reasons (check, detail), notes, checks run, sentinel names
    static_flags: list[dict] = field(default_factory=list)  # static_flags.StaticFlag of the model patch
    evidence_flags: list[dict] = field(default_factory=list)  # static_flags.evidence_flags: not tampering alone

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
                log_dir: Path | None = None, guard: bool = True, integrity: bool = True,
                static: Literal["flag", "reject"] = "flag") -> GradeResult:
    """Grade `patch` for `task`. `guard=False` skips the patch guard and `integrity=False` the integrity checks
    (both only to measure them). `static="reject"` drops the file diffs that carry a static flag."""
    start = time.monotonic()
    result = GradeResult(task.instance_id)
    try:
        await _grade(task, patch, envs, timeout_s, log_dir, guard, integrity, static, result)
    except (EnvBuildError, RepoError) as e:
        result.error = f"environment: {e}"
    except SpecError as e:
        result.error = str(e)
    except SandboxError as e:
        result.error = f"sandbox: {e}"
    result.duration_s = round(time.monotonic() - start, 3)
    return result


async def _grade(task, patch, envs, timeout_s, log_dir, guard, integrity, static, result: GradeResult) -> None:
    spec = make_test_spec(task)
    flags = static_flags(patch, task.repo)
    result.static_flags = [f.to_dict() for f in flags]
    result.evidence_flags = [f.to_dict() for f in evidence_flags(patch)]
    guarded = guard_patch(patch, task.test_patch, reject=flagged_paths(flags) if static == "reject" else None,
                          test_ids=[*task.FAIL_TO_PASS, *task.PASS_TO_PASS]) if guard else None
    model_patch = guarded.patch if guarded else (patch or "")
    result.dropped_files = guarded.dropped if guarded else {}
    config = await envs.prepare(task)
    run = _integrity_run(task, spec, model_patch, config.workdir) if integrity else None
    async with open_sandbox(config) as box:
        if model_patch.strip():
            await box.write_file("/tmp/verl_swe_model.patch", model_patch)
            ok, out = await _apply(box, "/tmp/verl_swe_model.patch")
            if not ok:
                result.error = f"patch does not apply:\n{out}"
                return
            if guarded is not None:
                result.dropped_files.update(await _restore_pytest_config(box, guarded.checked))
        result.patch_applied = True
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in DETERMINISTIC_ENV.items())
        if run is not None:
            for path, text in run.files().items():
                await box.write_file(path, text)
            env = f"{env} {run.env_assignments()}"
        if spec.eval_script:
            # swebench>=5 rows: their script restores test files, applies test_patch, runs and marks.
            script = run.splice(spec.eval_script) if run is not None else None
            if run is not None and script is None:
                run.notes.append("the eval script has no swebench markers: no sentinels, no test-file checks")
            await box.write_file("/tmp/verl_swe_eval.sh", script or spec.eval_script)
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
            if run is not None:
                await box.exec(f"bash {run.grader_dir}/pre.sh")
            cmd = f"env {env} bash -c {shlex.quote(spec.test_cmd)}"
        r = await box.exec(f"{cmd} > /tmp/verl_swe_test_output.txt 2>&1", timeout=timeout_s)
        if run is not None and not spec.eval_script:
            await box.exec(f"bash {run.grader_dir}/post.sh")
        result.test_duration_s = round(r.duration_s, 3)
        if r.timed_out:
            result.error = f"tests timed out after {timeout_s:g} s"
            return
        result.test_exit_code = r.exit_code
        await box.exec(f"truncate -s \"<{MAX_LOG_BYTES}\" /tmp/verl_swe_test_output.txt")  # a runaway log
        output = (await box.read_bytes("/tmp/verl_swe_test_output.txt", timeout=300)).decode(errors="replace")
        collected = await run.read_back(box) if run is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        log = (log_dir / task.instance_id / "test_output.txt") if log_dir else Path(tmp) / "test_output.txt"
        write_swebench_log(log, output, result.test_exit_code, eval_script=bool(spec.eval_script))
        result.resolved, result.tests_status = grade_log(task, spec, log)
        result.log_path = str(log) if log_dir else None
        if run is not None:
            status, parser, exit_code = log_status(task, spec, log)
            report = judge(run, collected, log_text=output, log_status=status, parser=parser,
                           fail_to_pass=list(task.FAIL_TO_PASS), pass_to_pass=list(task.PASS_TO_PASS),
                           exit_code=exit_code if spec.eval_script else result.test_exit_code)
            canary = [r for r in report.reasons if r["check"] == "canary"]
            if canary and result.evidence_flags:  # how a test could pass whatever it asserts
                canary[0]["detail"] += "; the patch reads callers' frames: " + ", ".join(
                    f"{f['path']}:{f['line']}" for f in result.evidence_flags[:3])
            result.integrity, result.tampered = report.to_dict(), report.tampered
            if report.tampered:
                result.resolved = False
                logger.info("grading %s: the test run was tampered with: %s", task.instance_id,
                            "; ".join(r["detail"] for r in report.reasons)[:500])
    if result.tests_status is None:
        result.error = "no test results in the log (the tests did not run, or their exit code contradicts the log)"


async def _restore_pytest_config(box, paths: list[str]) -> dict[str, str]:
    """Each setup.cfg / pyproject.toml the applied patch changed back as it was when its pytest sections changed
    (the rest of such a file is kept: real fixes edit metadata and other tools' settings); path -> why."""
    dropped = {}
    for path in paths:
        q = shlex.quote(path)
        old = await box.exec(f"git show HEAD:{q} 2>/dev/null")
        after = await box.exec(f"cat -- {q} 2>/dev/null")
        why = pytest_config_changed(path, old.output if old.exit_code == 0 else None,
                                    after.output if after.exit_code == 0 else None)
        if why is not None:
            await box.exec(f"git checkout -q HEAD -- {q} 2>/dev/null || rm -f -- {q}")
            dropped[path] = why
    return dropped


def _integrity_run(task: Task, spec, model_patch: str, workdir: str) -> IntegrityRun:
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT

    if spec.eval_script:  # the lines the script runs between swebench's marker lines
        lines = spec.eval_script.split("\n")
        start = next((i for i, line in enumerate(lines) if START_TEST_OUTPUT in line), len(lines))
        end = next((i for i, line in enumerate(lines) if END_TEST_OUTPUT in line and i > start), len(lines))
        command = "\n".join(lines[start + 1:end])
    else:
        command = spec.test_cmd
    shape = analyze(command, spec.log_parser, spec.test_files)
    return IntegrityRun(shape, workdir, touched_files(model_patch), test_files=list(spec.test_files),
                        runner_is_code=task.repo in RUNNER_REPOS,
                        graded=[*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
