"""Remove from a model patch everything that could make tests pass without fixing the code.

The reward is 1 only when the task's own tests pass, so a patch may not touch those tests, add
tests, or change what Python or pytest load implicitly. Offending file diffs are dropped (the rest of
the patch is still graded) and each drop is reported with its reason. The same rules are told to
the agent in `GRADING_RULES`, so the policy is never punished for a change it was not warned about.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from verl_swe.tasks.patches import FileDiff, split_patch

GRADING_RULES = (
    "Your patch is graded by the repository's own tests in a fresh copy of the repository. Changes to "
    "test files (tests/, test_*.py, *_test.py, conftest.py), to test-runner configuration (pytest.ini, "
    "tox.ini, setup.cfg, pyproject.toml, noxfile.py), to sitecustomize/usercustomize or .pth files, compiled "
    "bytecode (.pyc, __pycache__), packaging metadata (*.dist-info, *.egg-info, entry_points.txt), new "
    "top-level modules named like standard or test-runner modules, symlinks, and files outside the repository "
    "are discarded before grading. A tampered test run is graded unresolved: source code that hooks into or "
    "replaces pytest, prints or rewrites test results, writes test files, exits the process early or at exit "
    "(os._exit, atexit), patches sys.modules, builtins, tracing or the import system, reads .git objects, or "
    "registers plugins in packaging metadata is flagged as tampering (such files may be discarded). Fix the "
    "source code itself."
)

TEST_DIRS = {"test", "tests", "testing"}
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "tests.py", "conftest.py")
# Files that Python or pytest read without being imported by the code under test.
IMPLICIT_FILES = {
    "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg",
    "pyproject.toml", "noxfile.py", "sitecustomize.py", "usercustomize.py",
}
# New top-level modules with these names would shadow the runner or the standard library when the
# repository root is on sys.path (`python -m pytest` puts it first).
RUNNER_MODULES = {"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "coverage", "xdist", "hypothesis"}
SHADOWABLE = RUNNER_MODULES | set(getattr(sys, "stdlib_module_names", ()))
# Suffixes Python imports a top-level file by: a sourceless `pytest.pyc` or an extension module
# `pytest.cpython-311-x86_64-linux-gnu.so` shadows `pytest` as well as `pytest.py` does.
MODULE_SUFFIXES = (".py", ".pyw", ".pyc", ".pyo", ".so", ".pyd")


@dataclass
class GuardedPatch:
    patch: str  # what is graded
    dropped: dict[str, str] = field(default_factory=dict)  # path -> why it was removed


def is_test_path(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(TEST_DIRS.intersection(p.parts[:-1])) or any(fnmatch.fnmatch(p.name, pat) for pat in TEST_FILE_PATTERNS)


def why_forbidden(diff: FileDiff, protected: set[str]) -> str | None:
    """The reason this file diff may not be graded, or None when it is an ordinary source change."""
    if diff.symlink:
        return "symlinks are not allowed"
    for path in diff.paths:
        p = PurePosixPath(path)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            return "writes outside the repository"
        if ".git" in p.parts:
            return "writes into git internals"
        if path in protected:
            return "a test file of the task"
        if is_test_path(path):
            return "a test file"
        if p.name in IMPLICIT_FILES:
            return "test-runner configuration or a file Python loads implicitly"
        if p.suffix == ".pth":
            return "a .pth file (run by Python at startup)"
        if any(part.endswith((".dist-info", ".egg-info")) for part in p.parts) or p.name == "entry_points.txt":
            # importlib.metadata scans sys.path, which `python -m pytest` starts with the repository root:
            # a patch-added x.dist-info/entry_points.txt registers a pytest plugin.
            return "packaging metadata (read by importlib.metadata: entry points, pytest plugins)"
        if p.suffix in (".pyc", ".pyo") or "__pycache__" in p.parts:
            # Python runs a sourceless .pyc, or a cached one in place of its source: code nobody can review.
            return "compiled bytecode (Python loads it in place of the source)"
        if diff.old_path is None and _top_level_module(p.parts[0]) in SHADOWABLE:
            return f"a new top-level module shadowing {_top_level_module(p.parts[0])!r}"
    return None


def _top_level_module(first_part: str) -> str:
    """The module name a top-level file or directory is imported as (`pytest.abi3.so` -> `pytest`)."""
    return first_part.split(".")[0] if first_part.endswith(MODULE_SUFFIXES) else first_part


def guard_patch(patch: str | None, test_patch: str = "", reject: dict[str, str] | None = None) -> GuardedPatch:
    """Keep the file diffs of `patch` that are ordinary source changes; name the reason for each drop.

    `test_patch` is the task's test patch: every file it touches is protected. `reject`: more paths to drop,
    with their reasons (grading's `static="reject"`: the files that carry a static tamper flag).
    """
    if not patch or not patch.strip():
        return GuardedPatch("")
    protected = {p for d in split_patch(test_patch) for p in d.paths}
    kept, dropped = [], {}
    for diff in split_patch(patch):
        reason = why_forbidden(diff, protected) or next((reject[p] for p in diff.paths if p in (reject or {})), None)
        if reason is None:
            kept.append(diff.text)
        else:
            for path in diff.paths:
                dropped[path] = reason
    text = "".join(kept)
    if text and not text.endswith("\n"):
        text += "\n"
    return GuardedPatch(text, dropped)
