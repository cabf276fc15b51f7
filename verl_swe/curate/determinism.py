"""Rule 4 (P1 Sec. 4.1): run a task's tests N times with the gold patch and see whether the outcome varies.

One sandbox per task, not one per run: the gold and test patches are applied and committed once, then
before every run after the first the sandbox is reset to that commit: tracked files restored, files the
tests created removed (untracked and ignored ones, except those that existed before the first run, such
as build artifacts of an in-place install), and new entries of /tmp removed. What lives elsewhere ($HOME,
the network) is the outside world: a test that depends on it is what this rule is meant to catch.
Each run is parsed and graded exactly like the grader does (swebench's parser and functions).
"""

from __future__ import annotations

import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from verl_swe.reward.grading import MAX_LOG_BYTES, _apply as apply_patch  # the grader's git apply / patch fallback
from verl_swe.reward.patch_guard import guard_patch
from verl_swe.sandbox import open_sandbox
from verl_swe.sandbox.shell import SandboxError
from verl_swe.tasks.schema import Task
from verl_swe.tasks.spec import DETERMINISTIC_ENV, grade_log, make_test_spec, write_swebench_log

STATE = "/tmp/.verl_swe_curate"  # our own files; the /tmp reset keeps this directory
OUTPUT = f"{STATE}/test_output.txt"
_GIT = "git -c user.name=verl-swe -c user.email=verl-swe@localhost -c commit.gpgsign=false"


class SetupError(RuntimeError):
    """The gold or test patch does not apply in the repeat sandbox (the grader applied them)."""


@dataclass(frozen=True)
class RunOutcome:
    timed_out: bool = False
    resolved: bool = False
    has_results: bool = True
    failing: tuple[str, ...] = ()  # FAIL_TO_PASS and PASS_TO_PASS tests that did not pass

    def describe(self) -> str:
        if self.timed_out:
            return "timed out"
        if not self.has_results:
            return "no test results"
        return "resolved" if self.resolved else f"not resolved ({len(self.failing)} tests failing)"


@dataclass
class RepeatResult:
    runs: list[RunOutcome] = field(default_factory=list)
    durations_s: list[float] = field(default_factory=list)  # each run, test command and grading
    resets_s: list[float] = field(default_factory=list)  # each reset before runs 2..N

    @property
    def consistent(self) -> bool:
        return len(set(self.runs)) <= 1

    def flipped_tests(self, tests: list[str]) -> dict[str, int]:
        """Test -> in how many runs it passed, for tests that passed in some runs and not in others."""
        n = len(self.runs)
        passed = {t: sum(t not in r.failing for r in self.runs if r.has_results and not r.timed_out) for t in tests}
        return {t: k for t, k in passed.items() if 0 < k < n}

    def summary(self, tests: list[str]) -> str:
        if self.consistent:
            return f"{len(self.runs)} runs, all {self.runs[0].describe() if self.runs else 'none'}"
        first = self.runs[0]
        diff = next(i for i, r in enumerate(self.runs) if r != first)
        flips = self.flipped_tests(tests)
        shown = ", ".join(f"{t} passed {k}/{len(self.runs)}" for t, k in list(flips.items())[:3])
        more = f" and {len(flips) - 3} more" if len(flips) > 3 else ""
        return (f"run {diff + 1} of {len(self.runs)} {self.runs[diff].describe()}, run 1 {first.describe()}"
                + (f": {shown}{more}" if shown else ""))


def _run_command(task: Task) -> str:
    spec = make_test_spec(task)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in DETERMINISTIC_ENV.items())
    if spec.eval_script:
        return f"env {env} bash {STATE}/eval.sh"
    return f"env {env} bash -c {shlex.quote(spec.test_cmd)}"


async def _setup(box, task: Task) -> None:
    spec = make_test_spec(task)
    # The gold patch as the grader sees it (the guard drops what a model patch may not touch).
    gold = guard_patch(task.patch, task.test_patch).patch
    await box.exec(f"mkdir -p {STATE}")
    if gold.strip():
        await box.write_file(f"{STATE}/gold.patch", gold)
        ok, out = await apply_patch(box, f"{STATE}/gold.patch")
        if not ok:
            raise SetupError(f"the gold patch does not apply:\n{out}")
    if spec.eval_script:  # swebench>=5 rows: the script applies the test patch itself, every run
        await box.write_file(f"{STATE}/eval.sh", spec.eval_script)
    else:
        await box.write_file(f"{STATE}/test.patch", task.test_patch)
        r = await box.exec(f"git apply --whitespace=nowarn {STATE}/test.patch")
        if r.exit_code != 0:
            raise SetupError(f"the task's test_patch does not apply:\n{r.output[-2000:]}")
    # The state every run starts from: a commit, plus the lists of ignored files and /tmp entries.
    r = await box.exec(f"git add -A && {_GIT} commit -q --no-verify --allow-empty -m verl-swe-curate "
                       f"&& git ls-files -o --directory | LC_ALL=C sort > {STATE}/ignored "
                       f"&& (cd /tmp && ls -A | LC_ALL=C sort) > {STATE}/tmp")
    if r.exit_code != 0:
        raise SetupError(f"could not record the repository state:\n{r.output[-2000:]}")


async def _reset(box) -> None:
    """Back to the state `_setup` recorded, without restarting the sandbox."""
    workdir = shlex.quote(box.config.workdir)
    r = await box.exec(
        f"cd {workdir} && git reset -q --hard && git clean -qffd "
        f"&& git ls-files -o --directory | LC_ALL=C sort | LC_ALL=C comm -13 {STATE}/ignored - "
        f"| while IFS= read -r p; do rm -rf -- \"$p\"; done "
        f"&& (cd /tmp && ls -A | LC_ALL=C sort | LC_ALL=C comm -13 {STATE}/tmp - | grep -vx .verl_swe_curate "
        f"| while IFS= read -r p; do rm -rf -- \"/tmp/$p\"; done); cd {workdir}", timeout=600)
    if r.exit_code != 0:
        raise SandboxError(f"resetting the repository between runs failed: {r.output[-1000:]}")


async def _run_once(box, task: Task, command: str, timeout_s: float) -> RunOutcome:
    r = await box.exec(f"{command} > {OUTPUT} 2>&1", timeout=timeout_s)
    if r.timed_out:
        return RunOutcome(timed_out=True)
    await box.exec(f"truncate -s \"<{MAX_LOG_BYTES}\" {OUTPUT}")
    output = (await box.read_bytes(OUTPUT, timeout=300)).decode(errors="replace")
    spec = make_test_spec(task)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "test_output.txt"
        write_swebench_log(log, output, r.exit_code, eval_script=bool(spec.eval_script))
        resolved, status = grade_log(task, spec, log)
    if status is None:
        return RunOutcome(has_results=False)
    failing = sorted(t for k in ("FAIL_TO_PASS", "PASS_TO_PASS") for t in status[k]["failure"])
    return RunOutcome(resolved=resolved, failing=tuple(failing))


async def repeat_tests(task: Task, sandbox_config, runs: int, *, timeout_s: float = 1800.0,
                       stop_at_first_difference: bool = True) -> RepeatResult:
    """Run the task's tests `runs` times with the gold patch in one sandbox, reset between runs.
    Raises SetupError when the patches do not apply and SandboxError when the sandbox fails."""
    result = RepeatResult()
    command = _run_command(task)
    async with open_sandbox(sandbox_config) as box:
        await _setup(box, task)
        for i in range(runs):
            if i:
                start = time.monotonic()
                await _reset(box)
                result.resets_s.append(round(time.monotonic() - start, 3))
            start = time.monotonic()
            outcome = await _run_once(box, task, command, timeout_s)
            result.runs.append(outcome)
            result.durations_s.append(round(time.monotonic() - start, 3))
            if stop_at_first_difference and outcome != result.runs[0]:
                break
    return result
