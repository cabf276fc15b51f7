"""Grading integrity against an optimizing policy: a graded test run that code from the patch, running inside
the test process, manipulated is unresolved, and says why.

Layers (each catches what the others may miss; verdict.py combines them):
- sentinels.py: random must-pass / must-fail (with a nonce) tests inserted among the task's own tests;
- probe.py: a pytest plugin loaded before any repository code, recording what pytest's runner did, and
  checking that pytest's machinery (reports, hooks, runner, terminal, assertion rewriting, unittest,
  builtins) was not replaced or extended by the code under test;
- harness.py: test files hashed before and after the run, files written during the run listed (by inode
  change time), stray processes killed before anything is read back;
- the exit code against pytest's own session status.
What applies to runners other than pytest (Django's, SymPy's): the file checks only (command.py says so).
"""

from __future__ import annotations

from pathlib import Path

from verl_swe.reward.integrity.command import RunShape, analyze
from verl_swe.reward.integrity.harness import Collected, IntegrityRun
from verl_swe.reward.integrity.verdict import IntegrityReport, judge

__all__ = ["Collected", "IntegrityReport", "IntegrityRun", "RunShape", "analyze", "judge", "log_status"]


def log_status(task, spec, log: Path):
    """(swebench's status map of the written log, the task's parser, the exit code the log records)."""
    from swebench.harness.grading import get_logs_eval, parse_test_exit_code
    from swebench.harness.log_parsers import PARSER_REGISTRY

    from verl_swe.tasks.spec import swebench_spec

    status, _ = get_logs_eval(swebench_spec(task, spec), str(log))
    return status, PARSER_REGISTRY[spec.log_parser], parse_test_exit_code(log.read_text(errors="replace"))
