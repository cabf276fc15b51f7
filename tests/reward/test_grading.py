"""Grading in real sandboxes on the bundled mini tasks: gold resolves, empty does not, tricks fail,
and every failure is a reported value. Runs on docker and on local (bubblewrap)."""

import asyncio
import py_compile
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from verl_swe.reward.grading import grade
from verl_swe.tasks import Task
from verl_swe.tasks.patches import touched_files

PAGER = "verl-swe-mini__pager-1"


async def test_gold_resolves_and_empty_does_not_for_every_mini_task(mini_tasks, task_envs):
    async def both(task):
        return await asyncio.gather(grade(task, task.patch, task_envs), grade(task, "", task_envs))

    async def everything():
        return await asyncio.gather(*(both(t) for t in mini_tasks.values()))

    assert len(mini_tasks) >= 8
    for (gold, empty), task in zip(await everything(), mini_tasks.values()):
        assert gold.error is None and gold.resolved, (task.instance_id, gold)
        assert sorted(gold.tests_status["FAIL_TO_PASS"]["success"]) == sorted(task.FAIL_TO_PASS)
        assert gold.tests_status["PASS_TO_PASS"]["failure"] == []
        assert empty.error is None and not empty.resolved, (task.instance_id, empty)
        assert sorted(empty.tests_status["FAIL_TO_PASS"]["failure"]) == sorted(task.FAIL_TO_PASS)
        # The integrity checks ran in full and found nothing, for a fix and for an honest failure alike.
        for res in (gold, empty):
            assert not res.tampered and res.integrity["reasons"] == [] and res.static_flags == [], (task.instance_id, res)
            assert {"probe", "sentinels", "files"} <= set(res.integrity["checks"]), res.integrity
            assert len(res.integrity["sentinels"]) >= 2


@pytest.mark.docker
@pytest.mark.local
async def test_both_backends_agree_test_by_test(mini_tasks, tmp_path_factory):
    # The same patch must get the same grade, test by test, in a container and in bubblewrap.
    from verl_swe.tasks import Environments

    cache = tmp_path_factory.getbasetemp() / "verl-swe-cache"  # the session's: environments built once
    docker = Environments("docker", cache_dir=cache)
    local = Environments("local", cache_dir=cache,
                         sandbox={"state_dir": str(tmp_path_factory.getbasetemp() / "sandboxes")})
    try:
        for task in mini_tasks.values():  # one task at a time: 2 cores, 4 sandboxes at once
            a_gold, b_gold, a_empty, b_empty = await asyncio.gather(
                *(grade(task, patch, envs) for patch in (task.patch, "") for envs in (docker, local)))
            for a, b in ((a_gold, b_gold), (a_empty, b_empty)):
                assert (a.resolved, a.tests_status, a.error) == (b.resolved, b.tests_status, b.error), (a, b)
            assert a_gold.resolved and not a_empty.resolved
    finally:
        docker.close()
        local.close()


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"


# A pytest hook that reports every test as passed: the payload of the config and conftest tricks.
FORCE_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
PLUGIN = new_file("pager/forcepass.py", FORCE_PASS)
# A fake `pytest` module that prints a passing summary for every F2P and P2P test and exits 0.
FAKE_PYTEST = """import sys

for name in ["test_exact_multiple_has_no_trailing_empty_page", "test_page_after_last_full_page_raises",
             "test_pages_of_a_partial_last_page", "test_page_navigation_flags", "test_start_and_end_index",
             "test_empty_list_has_one_empty_page", "test_empty_list_without_empty_first_page",
             "test_out_of_range_pages_raise", "test_per_page_must_be_positive"]:
    print("PASSED tests/test_paginator.py::" + name)
sys.exit(0)
"""


def new_binary_file(path: str, data: bytes) -> str:
    """A `git diff --binary` adding one file: `git apply` in the grader creates it byte for byte."""
    with tempfile.TemporaryDirectory() as repo:
        (Path(repo) / path).write_bytes(data)
        subprocess.run(["git", "init", "-q", repo], check=True)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        return subprocess.run(["git", "diff", "--cached", "--binary"], cwd=repo, check=True, capture_output=True,
                              text=True).stdout


def sourceless_pyc(source: str) -> bytes:
    # Compiled by the Python running the tests; the sandboxes' Python is the same minor version (3.11),
    # which the unguarded half of the test checks: a mismatch would make the trick fail loudly there.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "m.py").write_text(source)
        return Path(py_compile.compile(str(Path(tmp) / "m.py"), cfile=str(Path(tmp) / "m.pyc"))).read_bytes()


# Each trick makes the failing pager task "pass" when nothing stops it.
EFFECTIVE_TRICKS = {
    "conftest": new_file("conftest.py", FORCE_PASS),
    "pytest.ini": PLUGIN + new_file("pytest.ini", "[pytest]\naddopts = -p pager.forcepass"),
    "tox.ini": PLUGIN + new_file("tox.ini", "[pytest]\naddopts = -p pager.forcepass"),
    "setup.cfg": PLUGIN + new_file("setup.cfg", "[tool:pytest]\naddopts = -p pager.forcepass"),
    "pyproject": PLUGIN + new_file("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-p pager.forcepass"'),
    "shadow-pytest": new_file("pytest.py", FAKE_PYTEST),
    # The same fake as bytecode: `python -m pytest` imports a sourceless pytest.pyc from the repository root.
    "shadow-pytest-pyc": new_binary_file("pytest.pyc", sourceless_pyc(FAKE_PYTEST)),
}
# Tricks that other layers stop too (restored test files, paths outside the repository, a test
# process that dies before reporting); the guard must still leave them unresolved.
OTHER_TRICKS = {
    "edit-tests": "diff --git a/tests/test_paginator.py b/tests/test_paginator.py\n--- a/tests/test_paginator.py\n"
                  "+++ b/tests/test_paginator.py\n@@ -1,1 +1,2 @@\n+import pytest; pytest.skip('x', allow_module_level=True)\n"
                  " import pytest\n",
    "sitecustomize": new_file("sitecustomize.py", FORCE_PASS),
    "pth-outside": new_file("../opt/venv/lib/python3.11/site-packages/hack.pth", "import os"),
    "exit-early": "diff --git a/pager/__init__.py b/pager/__init__.py\n--- a/pager/__init__.py\n+++ b/pager/__init__.py\n"
                  "@@ -1,1 +1,2 @@\n+import os; os.write(1, b'PASSED tests/test_paginator.py::test_page_after_last_full_page_raises\\n'); os._exit(0)\n",
}



@pytest.mark.parametrize("trick", sorted(EFFECTIVE_TRICKS))
async def test_tricks_that_work_unguarded_do_not_resolve(trick, mini_tasks, task_envs):
    task = mini_tasks[PAGER]
    patch = EFFECTIVE_TRICKS[trick]
    guarded, unguarded = await asyncio.gather(grade(task, patch, task_envs),
                                            grade(task, patch, task_envs, guard=False, integrity=False))
    assert unguarded.resolved, f"the {trick} trick no longer works unguarded, so this test proves nothing: {unguarded}"
    assert not guarded.resolved and guarded.dropped_files, guarded
    assert guarded.error is None  # dropped files, then an ordinary failing run


@pytest.mark.parametrize("trick", sorted(OTHER_TRICKS))
async def test_other_tricks_do_not_resolve(trick, mini_tasks, task_envs):
    task = mini_tasks[PAGER]
    patch = OTHER_TRICKS[trick]
    guarded, unguarded = await asyncio.gather(grade(task, patch, task_envs),
                                            grade(task, patch, task_envs, guard=False, integrity=False))
    assert not guarded.resolved and not unguarded.resolved, (guarded, unguarded)


async def test_a_fix_plus_a_trick_is_graded_on_the_fix(mini_tasks, task_envs):
    task = mini_tasks[PAGER]
    res = await grade(task, task.patch + EFFECTIVE_TRICKS["conftest"], task_envs)
    assert res.resolved and res.dropped_files == {"conftest.py": "a test file"}


async def test_failures_are_values(mini_tasks, task_envs):
    task = mini_tasks[PAGER]
    hang = ("diff --git a/pager/__init__.py b/pager/__init__.py\n--- a/pager/__init__.py\n+++ b/pager/__init__.py\n"
            "@@ -1,1 +1,2 @@\n+import time; time.sleep(600)\n")
    broken_env = Task.model_validate({**task.model_dump(), "instance_id": "broken-env", "install_config": {
        **task.install_config.model_dump(), "pip_packages": ["verl-swe-no-such-package==0.0.1"]}})
    not_applying, timeout, env_error, gold = await asyncio.gather(
        grade(task, "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n", task_envs),
        grade(task, hang, task_envs, timeout_s=3),
        grade(broken_env, broken_env.patch, task_envs),
        grade(task, task.patch, task_envs),
    )
    assert not not_applying.resolved and not_applying.error.startswith("patch does not apply")
    assert not timeout.resolved and timeout.error == "tests timed out after 3 s"
    assert not env_error.resolved and "verl-swe-no-such-package" in env_error.error
    assert gold.resolved  # the others' failures cost nothing here


def with_eval_script(task: Task) -> Task:
    """The task as a swebench>=5 row: its eval script restores the test files, applies test_patch, runs the
    tests between the markers and restores the files again (the layout of swebench's own scripts)."""
    files = " ".join(touched_files(task.test_patch))
    script = (f"#!/bin/bash\nset -uxo pipefail\ncd /testbed\ngit checkout {task.base_commit} -- {files}\n"
              f"git apply -v - <<'EOF_114329324912'\n{task.test_patch}EOF_114329324912\n"
              f": '>>>>> Start Test Output'\npython -m pytest -rA -p no:cacheprovider {files}\n"
              f": '>>>>> End Test Output'\ngit checkout {task.base_commit} -- {files}\n")
    return Task.model_validate({**task.model_dump(), "eval_script": script})


async def test_rows_with_an_eval_script(mini_tasks, task_envs, tmp_path):
    from swebench.harness.constants import END_TEST_OUTPUT, TEST_EXIT_CODE

    task = with_eval_script(mini_tasks[PAGER])
    gold, empty, trick = await asyncio.gather(
        grade(task, task.patch, task_envs, log_dir=tmp_path / "gold"), grade(task, "", task_envs),
        grade(task, EFFECTIVE_TRICKS["conftest"], task_envs))
    assert gold.resolved and gold.error is None, gold
    assert sorted(gold.tests_status["FAIL_TO_PASS"]["success"]) == sorted(task.FAIL_TO_PASS)
    log = (tmp_path / "gold" / PAGER / "test_output.txt").read_text()
    # swebench's exit-code line follows the end marker, as its harness writes it (1: the grader's must-fail
    # sentinel test, integrity/sentinels.py, and its canaries, inject.py, are the run's only failures);
    # base_commit resolved
    assert f"{TEST_EXIT_CODE}: 1" in log.split(END_TEST_OUTPUT)[-1] and "fatal" not in log, log
    failed = [line.split()[1].split("::")[1] for line in log.splitlines() if line.startswith("FAILED ")]
    canaries = gold.integrity["canaries"]
    assert len(failed) == 1 + len(canaries) and set(canaries) <= set(failed) and canaries
    assert set(failed) - set(canaries) <= set(gold.integrity["sentinels"])
    assert not empty.resolved and empty.tests_status["FAIL_TO_PASS"]["failure"]
    assert not trick.resolved and trick.dropped_files == {"conftest.py": "a test file"}


async def test_tests_run_with_pinned_settings(mini_tasks, task_envs, tmp_path):
    # The settings SWE-bench should have pinned reach the test process: one hash order, one time zone.
    report = ('import os; raise RuntimeError("SETTINGS %s %s %s %s" % (os.environ.get("PYTHONHASHSEED"), '
              'os.environ.get("TZ"), os.environ.get("LC_ALL"), hash("verl-swe")))')
    patch = ("diff --git a/pager/__init__.py b/pager/__init__.py\n--- a/pager/__init__.py\n+++ b/pager/__init__.py\n"
             f"@@ -1,1 +1,2 @@\n+{report}\n \"\"\"Tiny pagination helpers for lists and query results.\"\"\"\n")
    await grade(mini_tasks[PAGER], patch, task_envs, log_dir=tmp_path)
    seeded = subprocess.run([sys.executable, "-c", "print(hash('verl-swe'))"], capture_output=True, text=True,
                            env={"PYTHONHASHSEED": "0"}, check=True).stdout.strip()
    assert f"SETTINGS 0 UTC C.UTF-8 {seeded}" in (tmp_path / PAGER / "test_output.txt").read_text()
