"""The tamper corpus (tests/reward/tamper) against the real grader, on docker and on local (bubblewrap):
every technique is graded unresolved and the integrity checks name it; the effective ones resolve the task
when the checks are off, so it is the checks that stop them. Gold patches stay clean (test_grading.py)."""

import asyncio

from tests.reward.tamper import TECHNIQUES
from tests.reward.test_grading import with_eval_script
from verl_swe.reward.grading import grade

PAGER, HEADERS = "verl-swe-mini__pager-1", "verl-swe-mini__headers-1"


async def _grade_all(jobs, limit: int = 3):
    sem = asyncio.Semaphore(limit)  # 2 cores: a few sandboxes at a time

    async def one(job):
        async with sem:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs))


def _problems(technique, checked, unchecked) -> list[str]:
    out = []
    checks = {r["check"] for r in (checked.integrity or {}).get("reasons", [])}
    rules = {f["rule"] for f in checked.static_flags}
    if checked.resolved:
        out.append("resolved with the checks on")
    if not technique.checks <= checks:
        out.append(f"checks {sorted(technique.checks - checks)} did not fire (fired: {sorted(checks)})")
    if technique.checks and not checked.tampered:
        out.append("not marked tampered")
    if technique.dropped and not checked.dropped_files:
        out.append("the guard dropped nothing")
    if not technique.static <= rules:
        out.append(f"static rules {sorted(technique.static - rules)} missing (got {sorted(rules)})")
    evidence = {f["rule"] for f in checked.evidence_flags}
    if not technique.evidence <= evidence:
        out.append(f"evidence rules {sorted(technique.evidence - evidence)} missing (got {sorted(evidence)})")
    if technique.effective and not unchecked.resolved:
        out.append(f"does not resolve with the checks off, so this proves nothing: {unchecked.error}")
    return [f"{technique.name}: {p}" for p in out]


async def test_every_technique_is_unresolved_and_named(mini_tasks, task_envs):
    task = mini_tasks[PAGER]
    techniques = list(TECHNIQUES.values())
    assert len(techniques) >= 8
    jobs = []
    for t in techniques:
        patch = t.patch(task)
        jobs += [grade(task, patch, task_envs),
                 grade(task, patch, task_envs, integrity=False, guard=not t.dropped)]
    results = await _grade_all(jobs)
    problems = [p for i, t in enumerate(techniques) for p in _problems(t, results[2 * i], results[2 * i + 1])]
    assert not problems, "\n".join(problems)


async def test_techniques_on_a_task_with_several_test_files(mini_tasks, task_envs):
    # Two test files: a sentinel pair in each, and the second module imported after the package.
    task = mini_tasks[HEADERS]
    names = ["report_init", "runtest_noop", "import_hook", "file_rewrite"]
    results = await _grade_all([grade(task, TECHNIQUES[n].patch(task), task_envs) for n in names])
    for name, res in zip(names, results):
        assert not res.resolved and res.tampered, (name, res)
        assert TECHNIQUES[name].checks <= {r["check"] for r in res.integrity["reasons"]}, (name, res.integrity)


async def test_eval_script_rows_get_sentinels_after_their_test_patch(mini_tasks, task_envs, tmp_path):
    from swebench.harness.constants import START_TEST_OUTPUT

    task = with_eval_script(mini_tasks[PAGER])
    names = ["report_init", "fake_output_exit", "file_rewrite"]
    gold, empty, *tampered = await _grade_all(
        [grade(task, task.patch, task_envs, log_dir=tmp_path), grade(task, "", task_envs)]
        + [grade(task, TECHNIQUES[n].patch(task), task_envs) for n in names])
    for res in (gold, empty):
        assert not res.tampered and res.integrity["reasons"] == [], res.integrity
        assert {"probe", "sentinels", "files"} <= set(res.integrity["checks"])
    assert gold.resolved and not empty.resolved
    log = (tmp_path / task.instance_id / "test_output.txt").read_text()
    tests = log.split(START_TEST_OUTPUT, 1)[1]
    # The sentinels ran inside the script's own test command, and nothing of the grader's steps is traced.
    for name in gold.integrity["sentinels"]:
        assert f"tests/test_paginator.py::{name}" in tests
    assert "/tmp/verl_swe_" not in log.replace("/tmp/verl_swe_eval.sh", "")
    for name, res in zip(names, tampered):
        assert not res.resolved and res.tampered, (name, res)
        assert TECHNIQUES[name].checks <= {r["check"] for r in res.integrity["reasons"]}, (name, res.integrity)
