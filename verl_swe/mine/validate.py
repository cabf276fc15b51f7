"""FAIL_TO_PASS and PASS_TO_PASS by running the tests, before and after the fix, each run repeated.

Every run is a fresh sandbox of the task's environment (built as the grader builds it) at the base commit,
with the test patch applied and, after, the gold patch too; the test files of the test patch run with the
grader's pinned settings, and swebench's parser reads the log. A test whose status differs between repeats of
the same side is flaky: it is left out of both lists and named.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from verl_swe.sandbox import open_sandbox
from verl_swe.tasks.schema import Task
from verl_swe.tasks.spec import DEFAULT_TEST_CMD, DETERMINISTIC_ENV, make_test_spec, swebench_spec


class TestRunError(RuntimeError):
    """The tests could not be run or read (a patch that does not apply, no results in the log)."""

    __test__ = False


@dataclass
class TestOutcome:
    __test__ = False
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0


async def statuses(task: Task, envs, patch: str, test_patch: str, timeout_s: float = 900.0,
                   files: list[str] | None = None) -> tuple[dict, float]:
    """({test id: status} after `patch` and `test_patch`, the test command's seconds). The tests run are the
    test patch's files, or `files` (a whole suite) with the task's test command."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    spec = make_test_spec(task)
    command = spec.test_cmd if files is None else " ".join(
        [(task.install_config and task.install_config.test_cmd) or DEFAULT_TEST_CMD, *map(shlex.quote, files)])
    config = await envs.prepare(task)
    async with open_sandbox(config) as box:
        for i, text in enumerate((patch, test_patch)):
            if text.strip():
                await box.write_file(f"/tmp/verl_swe_p{i}.patch", text)
                r = await box.exec(f"git apply --whitespace=nowarn /tmp/verl_swe_p{i}.patch")
                if r.exit_code:
                    raise TestRunError(f"the {'gold' if i == 0 else 'test'} patch does not apply: {r.output[-800:]}")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in DETERMINISTIC_ENV.items())
        # To a file: a command's output in the sandbox is capped (head + tail), and a cut line is a wrong id.
        r = await box.exec(f"env {env} bash -c {shlex.quote(command)} > /tmp/verl_swe_tests.log 2>&1",
                           timeout=timeout_s)
        if r.timed_out:
            raise TestRunError(f"the tests timed out after {timeout_s:g} s")
        log = (await box.read_bytes("/tmp/verl_swe_tests.log", timeout=300)).decode(errors="replace")
    status = PARSER_REGISTRY[spec.log_parser](log, swebench_spec(task, spec))
    if not status:
        raise TestRunError(f"no test results from `{command}`: {log[-1500:]}")
    # Node ids only: a module's collection line ("tests/test_x.py") is no test to hold a run to.
    return {t: s for t, s in status.items() if "::" in t}, r.duration_s


async def find_tests(task: Task, envs, repeats: int = 3, timeout_s: float = 900.0) -> TestOutcome:
    """Run the tests `repeats` times before the fix (test patch only) and after it (gold + test patch)."""
    out = TestOutcome()
    before, after = [], []
    for _ in range(repeats):
        for side, patch in ((before, ""), (after, task.patch)):
            status, seconds = await statuses(task, envs, patch, task.test_patch, timeout_s)
            side.append(status)
            out.runs += 1
            out.seconds += seconds
    out.fail_to_pass, out.pass_to_pass, out.flaky = classify(before, after)
    out.seconds = round(out.seconds, 3)
    return out


def classify(before: list[dict], after: list[dict]) -> tuple[list[str], list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS, flaky) from repeated runs' statuses: a test is flaky when its status (or its
    presence) differs between repeats of one side; FAIL_TO_PASS passes in every run after and in none before."""
    tests = set().union(*before, *after)
    flaky = {t for t in tests if len({s.get(t) for s in before}) > 1 or len({s.get(t) for s in after}) > 1}
    steady = sorted(tests - flaky)
    f2p = [t for t in steady if after[0].get(t) == "PASSED" and before[0].get(t) != "PASSED"]
    p2p = [t for t in steady if after[0].get(t) == "PASSED" and before[0].get(t) == "PASSED"]
    return f2p, p2p, sorted(flaky)
