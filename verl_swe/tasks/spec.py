"""How a task's tests are run and read: the test command and swebench's log parsers and grading."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from verl_swe.tasks.patches import split_patch
from verl_swe.tasks.schema import Task

DEFAULT_TEST_CMD = "python -m pytest -rA --tb=short -p no:cacheprovider"
DEFAULT_LOG_PARSER = "parse_log_pytest"
# Settings SWE-bench runs should have pinned: hash order, time zone, locale, no stray bytecode or
# user site-packages, no pytest options from the environment.
DETERMINISTIC_ENV = {
    "PYTHONHASHSEED": "0",
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTEST_ADDOPTS": "",
}


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class TestSpec:
    """What grading runs for one task."""

    __test__ = False  # not a pytest class
    test_cmd: str  # the full command, test files included
    log_parser: str
    test_files: list[str]
    eval_script: str | None = None  # swebench>=5 rows: run as is instead of test_cmd


def test_files(task: Task) -> list[str]:
    """The files of `test_patch` that hold tests, as swebench's get_test_directives picks them."""
    from swebench.harness.constants import NON_TEST_EXTS

    files = [d.new_path for d in split_patch(task.test_patch) if d.new_path]
    return [f for f in files if not f.endswith(tuple(NON_TEST_EXTS))]


# SWE-bench repositories whose tests run under their own runner, not pytest: without the row's eval_script
# or test_cmd, the default pytest command would grade them wrongly.
OWN_RUNNER_PARSERS = {"parse_log_django", "parse_log_sympy"}


def _repo_parser(repo: str) -> str | None:
    """swebench's parser for a SWE-bench repository (rows older than swebench 5 do not name one)."""
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    fn = MAP_REPO_TO_PARSER_PY.get(repo)
    return fn.__name__ if fn else None


def make_test_spec(task: Task) -> TestSpec:
    from swebench.harness.log_parsers import PARSER_REGISTRY

    cfg = task.install_config
    test_cmd = cfg.test_cmd if cfg and cfg.test_cmd else None
    parser = (cfg.log_parser if cfg else None) or task.log_parser or _repo_parser(task.repo) or DEFAULT_LOG_PARSER
    if parser not in PARSER_REGISTRY:
        raise SpecError(f"{task.instance_id}: unknown log_parser {parser!r} (swebench has {len(PARSER_REGISTRY)}, "
                        f"e.g. parse_log_pytest, parse_log_django, parse_log_sympy)")
    if parser in OWN_RUNNER_PARSERS and not (test_cmd or task.eval_script):
        raise SpecError(f"{task.instance_id}: {task.repo} does not run its tests with pytest, and the row has "
                        "neither an eval_script (SWE-bench rows of swebench>=5) nor an install_config.test_cmd")
    files = test_files(task)
    base = test_cmd or DEFAULT_TEST_CMD
    cmd = " ".join([base, *map(shlex.quote, files)])
    return TestSpec(test_cmd=cmd, log_parser=parser, test_files=files, eval_script=_eval_script(task))


def _eval_script(task: Task) -> str | None:
    """A row's eval script as swebench runs it: with the test command's own exit code recorded after the
    end marker, so grading can tell a log that prints PASSED lines from a run that really passed."""
    if not task.eval_script:
        return None
    from swebench.harness.utils import parse_eval_script, record_test_exit_code

    # The scripts restore test files with `git checkout <base_commit> -- FILES`; a sandbox holds base_commit's
    # files as its one commit (HEAD) under another hash, so that history stays unreachable.
    script = task.eval_script.replace(task.base_commit, "HEAD")
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", *record_test_exit_code(parse_eval_script(script))]) + "\n"


def swebench_spec(task: Task, spec: TestSpec):
    """swebench's own TestSpec for its parsers and grading functions."""
    from swebench.harness.constants import FAIL_ONLY_REPOS, EvalType
    from swebench.types import TestSpec as SwebenchTestSpec

    eval_type = EvalType.FAIL_ONLY if task.repo in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL
    return SwebenchTestSpec(
        instance_id=task.instance_id, image=task.image or "", eval_script_list=[], repo=task.repo,
        version=task.version or "", FAIL_TO_PASS=list(task.FAIL_TO_PASS), PASS_TO_PASS=list(task.PASS_TO_PASS),
        log_parser=spec.log_parser, eval_type=eval_type.value,
    )


def write_swebench_log(path: Path, output: str, exit_code: int | None, eval_script: bool) -> None:
    """Write a test run in the log format swebench's `get_logs_eval` reads (markers + exit code)."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE

    path.parent.mkdir(parents=True, exist_ok=True)
    if eval_script:  # the row's eval script prints its own markers and exit code
        path.write_text(output)
    else:
        code = f"{TEST_EXIT_CODE}: {exit_code}\n" if exit_code is not None else ""
        path.write_text(f"{START_TEST_OUTPUT}\n{output}\n{END_TEST_OUTPUT}\n{code}")


def grade_log(task: Task, spec: TestSpec, log_path: Path) -> tuple[bool, dict | None]:
    """(resolved, tests_status) from a written log with swebench's functions; tests_status is None
    when the log holds no test results (tests never ran, or the run contradicts its exit code)."""
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, EvalType, ResolvedStatus
    from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status

    sb_spec = swebench_spec(task, spec)
    status_map, found = get_logs_eval(sb_spec, str(log_path))
    if not found:
        return False, None
    gold = {"instance_id": task.instance_id, FAIL_TO_PASS: sb_spec.FAIL_TO_PASS, PASS_TO_PASS: sb_spec.PASS_TO_PASS}
    report = get_eval_tests_report(status_map, gold, eval_type=EvalType(sb_spec.eval_type))
    tests_status = {k: report[k] for k in (FAIL_TO_PASS, PASS_TO_PASS)}
    return get_resolution_status(report) == ResolvedStatus.FULL.value, tests_status
