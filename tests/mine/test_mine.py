"""`verl-swe mine` on a real git history: candidates split into patch and test_patch, environments built as
the grader builds them, FAIL_TO_PASS found by running the tests before and after, every drop with its reason,
a rerun that resumes, and rows the grader resolves with their gold patch and not with an empty one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from verl_swe.mine.history import commit_candidates, is_library_source, is_test_path
from verl_swe.mine.statement import leaks, problem_statement
from verl_swe.mine.validate import classify


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(textwrap.dedent(text))
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-q",
                    "-m", message], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


CALC = """
    def add(a, b):
        return a - b


    def neg(a):
        return a
"""


@pytest.fixture
def history(tmp_path) -> tuple[Path, dict[str, str]]:
    """A small project's history: a docs commit, a real fix, a change whose tests pass before it too, and a fix
    whose message names the test that checks it."""
    repo = tmp_path / "calc"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shas = {"base": commit(repo, "calc: add and neg", {
        "pyproject.toml": """
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "calc"
            version = "0.1.0"
            """,
        "calc/__init__.py": CALC,
        "tests/test_calc.py": """
            import calc


            def test_add_zero():
                assert calc.add(0, 0) == 0
            """})}
    shas["docs"] = commit(repo, "docs: a README", {"README.md": "calc\n"})
    shas["fix"] = commit(repo, "add() returns the difference\n\nadd(2, 3) gives -1 instead of 5.", {
        "calc/__init__.py": CALC.replace("return a - b", "return a + b"),
        "tests/test_calc.py": """
            import calc


            def test_add_zero():
                assert calc.add(0, 0) == 0


            def test_add_positive():
                assert calc.add(2, 3) == 5
            """})
    shas["refactor"] = commit(repo, "neg: a docstring", {
        "calc/__init__.py": CALC.replace("return a - b", "return a + b").replace("def neg(a):\n",
                                                                                  "def neg(a):\n        '''-a'''\n"),
        "tests/test_more.py": """
            import calc


            def test_add_again():
                assert calc.add(1, 1) == 2
            """})
    shas["leaky"] = commit(repo, "Make test_neg_flips_the_sign pass", {
        "calc/__init__.py": CALC.replace("return a - b", "return a + b").replace("return a\n", "return -a\n"),
        "tests/test_neg.py": """
            import calc


            def test_neg_flips_the_sign():
                assert calc.neg(2) == -2
            """})
    return repo, shas


def test_test_files_are_told_from_library_code_by_convention():
    assert is_test_path("tests/test_calc.py") and is_test_path("src/pkg/tests/helpers.py")
    assert is_test_path("pkg/conftest.py") and is_test_path("testing/utils.py")
    # a test/ or testing/ package inside the library is library code (django/test/, sphinx/testing/)
    assert not is_test_path("django/test/testcases.py") and is_library_source("django/test/testcases.py")
    assert not is_library_source("setup.py") and not is_library_source("docs/conf.py")


def test_candidates_are_fixes_that_change_code_and_tests(history):
    repo, shas = history
    found, looked_at = commit_candidates(repo)
    assert looked_at == 5
    assert [c.commit for c in found] == [shas["leaky"], shas["refactor"], shas["fix"]]  # newest first, no docs
    fix = found[-1]
    patch, test_patch = fix.patches(repo)
    assert "calc/__init__.py" in patch and "tests/" not in patch
    assert "+def test_add_positive" in test_patch and "calc/__init__.py" not in test_patch


def test_statements_come_from_the_issue_then_the_pr_then_the_commit_and_must_not_leak():
    assert problem_statement("s", "b", {"issue_title": "Crash", "issue_body": "on empty", "title": "x"}) == \
        ("Crash\n\non empty", "issue")
    assert problem_statement("s", "", {"title": "PR title"}) == ("PR title", "pr")
    assert problem_statement("fix add", "it subtracted", None) == ("fix add\n\nit subtracted", "commit_message")
    test_patch = "+++ b/tests/test_x.py\n+def test_handles_empty():\n+    pass\n"
    assert leaks("It crashes on empty input.", "+    return []\n", test_patch) == []
    assert any("names the test" in r for r in leaks("make test_handles_empty pass", "", test_patch))
    assert any("diff hunk" in r for r in leaks("see\n@@ -1,2 +1,2 @@\n-x\n+y", "", ""))
    added = "+        return sorted(items, key=len)\n"
    assert any("quotes" in r for r in leaks("Use: return sorted(items, key=len)", added, ""))


def test_repeats_that_disagree_make_a_test_flaky_and_it_is_never_kept():
    before = [{"t::a": "FAILED", "t::b": "PASSED", "t::c": "FAILED"}] * 3
    after = [{"t::a": "PASSED", "t::b": "PASSED", "t::c": "PASSED"},
             {"t::a": "PASSED", "t::b": "PASSED", "t::c": "FAILED"},
             {"t::a": "PASSED", "t::b": "PASSED"}]
    assert classify(before, after) == (["t::a"], ["t::b"], ["t::c"])


@pytest.mark.local
def test_mining_a_history_keeps_the_real_fix_says_why_the_rest_went_and_resumes(history, tmp_path):
    repo, shas = history
    out = tmp_path / "mined"
    cmd = [sys.executable, "-m", "verl_swe.cli", "mine", "--repo", str(repo), "--out", str(out), "--backend", "local",
           "--name", "example/calc", "--cache-dir", str(tmp_path / "cache"), "--repeats", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    funnel = json.loads((out / "funnel.json").read_text())
    assert (funnel["commits_looked_at"], funnel["candidates"], funnel["environment_built"]) == (5, 3, 3)
    assert (funnel["fail_to_pass_found"], funnel["statement_kept"], funnel["kept"]) == (2, 1, 1)
    reasons = {d["commit"]: (d["stage"], d["reason"]) for d in funnel["drops"]}
    assert reasons[shas["refactor"]] == ("fail_to_pass_found", "no test goes from failing to passing")
    assert reasons[shas["leaky"]][0] == "statement_kept" and "test_neg_flips_the_sign" in reasons[shas["leaky"]][1]

    from verl_swe.tasks import load_tasks

    [task] = load_tasks(out / "tasks.jsonl")
    assert task.instance_id == f"example__calc-{shas['fix'][:12]}" and task.base_commit == shas["docs"]  # its parent
    assert task.FAIL_TO_PASS == ["tests/test_calc.py::test_add_positive"]
    assert task.PASS_TO_PASS == ["tests/test_calc.py::test_add_zero"]
    assert task.meta["problem_statement_source"] == "commit_message" and "gives -1" in task.problem_statement

    # A rerun resumes: every candidate's outcome is read back, nothing runs again.
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads((out / "funnel.json").read_text())["kept"] == 1

    # The grader (integrity checks on) resolves the row with its gold patch, and not with an empty patch.
    import asyncio

    from verl_swe.reward.grading import grade
    from verl_swe.tasks import Environments

    envs = Environments("local", repos_dir=out / "repos", cache_dir=tmp_path / "cache",
                        sandbox={"state_dir": str(tmp_path / "sandboxes")})
    try:
        gold = asyncio.run(grade(task, task.patch, envs))
        empty = asyncio.run(grade(task, "", envs))
    finally:
        envs.close()
    assert gold.resolved and not gold.tampered, gold
    assert not empty.resolved
