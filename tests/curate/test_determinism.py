"""Repeated test runs in one sandbox (rule 4), on both backends: the reset between runs removes what the
tests wrote, and a test that depends on state outside the sandbox's reset is caught."""

from __future__ import annotations

from tests.curate.variants import PAGER, external_state, writes_state
from verl_swe.curate.determinism import repeat_tests


async def test_a_reset_between_runs_keeps_a_test_that_writes_files_deterministic(mini_tasks, task_envs):
    task = writes_state(mini_tasks[PAGER])  # fails if a file from an earlier run survived
    result = await repeat_tests(task, await task_envs.prepare(task), 3, timeout_s=120)
    assert [r.describe() for r in result.runs] == ["resolved"] * 3 and result.consistent


async def test_a_test_that_depends_on_outside_state_is_flaky(mini_tasks, task_envs):
    task = external_state(mini_tasks[PAGER])
    result = await repeat_tests(task, await task_envs.prepare(task), 3, timeout_s=120, stop_at_first_difference=False)
    assert not result.consistent
    assert [r.resolved for r in result.runs] == [True, False, False]
    tests = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    assert result.flipped_tests(tests) == {"tests/test_service.py::test_service_answers_once": 1}
    assert result.summary(tests) == ("run 2 of 3 not resolved (1 tests failing), run 1 resolved: "
                                     "tests/test_service.py::test_service_answers_once passed 1/3")
