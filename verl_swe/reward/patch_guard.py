"""Remove from a model patch everything that could make tests pass without fixing the code.

The reward is 1 only when the task's own tests pass, so a patch may not touch those tests, add
tests, or change what Python or pytest load implicitly. Offending file diffs are dropped (the rest of
the patch is still graded) and each drop is reported with its reason. The same rules are told to
the agent in `GRADING_RULES`, so the policy is never punished for a change it was not warned about.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from verl_swe.tasks.patches import FileDiff, split_patch

GRADING_RULES = (
    "Your patch is graded by the repository's own tests in a fresh copy of the repository. Changes to "
    "test files (the task's tests, tests/ directories, test_*.py, *_test.py, conftest.py), to test-runner "
    "configuration (pytest.ini, tox.ini, noxfile.py, the pytest sections of setup.cfg and pyproject.toml), to "
    "sitecustomize/usercustomize or .pth files, compiled "
    "bytecode (.pyc, __pycache__), packaging metadata (*.dist-info, *.egg-info, entry_points.txt), new "
    "top-level modules named like standard or test-runner modules, symlinks, and files outside the repository "
    "are discarded before grading. A tampered test run is graded unresolved: source code that hooks into or "
    "replaces pytest, prints or rewrites test results, writes test files, exits the process early or at exit "
    "(os._exit, atexit), patches sys.modules, builtins, tracing, function code (__code__) or the import "
    "system, reads .git objects, or registers plugins in packaging metadata is flagged as tampering (such "
    "files may be discarded). Fix the source code itself."
)

TEST_DIRS = {"test", "tests", "testing"}
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "tests.py", "conftest.py")
# Files that Python or pytest read without being imported by the code under test. setup.cfg and pyproject.toml
# are kept (real fixes edit their metadata and tool settings) unless their pytest sections change
# (`pytest_config_changed`, checked once the patch is applied).
IMPLICIT_FILES = {
    "conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "noxfile.py",
    "sitecustomize.py", "usercustomize.py",
}
CHECKED_CONFIG = {"setup.cfg", "pyproject.toml"}
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
    # setup.cfg / pyproject.toml files the patch keeps: once it is applied, each is restored if its pytest
    # sections changed (`pytest_config_changed`)
    checked: list[str] = field(default_factory=list)


def task_test_files(test_patch: str = "", test_ids: Iterable[str] = ()) -> frozenset[str]:
    """The task's own test files: those its test_patch touches and those its FAIL_TO_PASS / PASS_TO_PASS pytest
    ids name (`path.py::test`; Django's and SymPy's ids name no file)."""
    files = {p for d in split_patch(test_patch) for p in d.paths} if test_patch else set()
    for t in test_ids:
        path = t.split("::", 1)[0]
        if path.endswith(".py") and " " not in path:
            files.add(path.removeprefix("./"))
    return frozenset(files)


def is_test_path(path: str, task_tests: Collection[str] = ()) -> bool:
    """A test file, by the task's own test files (`task_test_files`) and by test-file patterns, not by a
    directory's name alone: `tests/` holds tests wherever it is (pandas/tests, sklearn/utils/tests), but
    `test/` and `testing/` inside a package are often library code the project ships and real fixes edit
    (django/test/testcases.py, sphinx/testing/fixtures.py, lib/matplotlib/testing/decorators.py), so they are
    test directories only at the top (or under src/), or when they hold one of the task's test files."""
    p = PurePosixPath(path)
    if path in task_tests or any(fnmatch.fnmatch(p.name, pat) for pat in TEST_FILE_PATTERNS):
        return True
    dirs = p.parts[:-1]
    top = dirs[1:2] if dirs[:1] == ("src",) else dirs[:1]
    if "tests" in dirs or (top and top[0] in TEST_DIRS):
        return True
    test_dirs = {PurePosixPath(t).parent for t in task_tests}
    return any(d.name in TEST_DIRS and (p.parent == d or d in p.parents) for d in test_dirs)


def why_forbidden(diff: FileDiff, protected: Collection[str]) -> str | None:
    """The reason this file diff may not be graded, or None when it is an ordinary source change.
    `protected`: the task's test files (`task_test_files`)."""
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
        if is_test_path(path, protected):
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


def guard_patch(patch: str | None, test_patch: str = "", reject: dict[str, str] | None = None,
                test_ids: Iterable[str] = ()) -> GuardedPatch:
    """Keep the file diffs of `patch` that are ordinary source changes; name the reason for each drop.

    `test_patch` is the task's test patch and `test_ids` its FAIL_TO_PASS and PASS_TO_PASS ids: the files they
    name are protected. `reject`: more paths to drop, with their reasons (grading's `static="reject"`: the files
    that carry a static tamper flag).
    """
    if not patch or not patch.strip():
        return GuardedPatch("")
    protected = task_test_files(test_patch, test_ids)
    kept, dropped, checked = [], {}, []
    for diff in split_patch(patch):
        reason = why_forbidden(diff, protected) or next((reject[p] for p in diff.paths if p in (reject or {})), None)
        if reason is None:
            kept.append(diff.text)
            checked += [p for p in diff.paths if PurePosixPath(p).name in CHECKED_CONFIG and p not in checked]
        else:
            for path in diff.paths:
                dropped[path] = reason
    text = "".join(kept)
    if text and not text.endswith("\n"):
        text += "\n"
    return GuardedPatch(text, dropped, checked)


def pytest_config_changed(path: str, before: str | None, after: str | None) -> str | None:
    """Why the patched `path` (a setup.cfg or pyproject.toml; None: absent) may not be graded, or None when
    its pytest sections ([tool:pytest], [tool.pytest...]) are what they were. The rest of such a file (metadata,
    other tools' settings) is the project's business and cannot change what pytest runs; the pytest sections
    can (addopts = -p plugin, python_files, testpaths, filterwarnings)."""
    try:
        same = _pytest_sections(path, before) == _pytest_sections(path, after)
    except ValueError as e:
        return f"test-runner configuration that does not parse: {e}"
    section = "[tool.pytest...]" if path.endswith(".toml") else "[tool:pytest]"
    return None if same else f"changes pytest's configuration ({section} in {PurePosixPath(path).name})"


def _pytest_sections(path: str, text: str | None) -> object:
    if not text:
        return None
    if path.endswith(".toml"):
        import tomllib

        try:
            return tomllib.loads(text).get("tool", {}).get("pytest")
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: {e}") from None
    import configparser

    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as e:
        raise ValueError(f"{path}: {str(e).splitlines()[0]}") from None
    # pytest reads [tool:pytest] from setup.cfg (and rejects a [pytest] section there: changing it matters too)
    return {name: dict(parser[name]) for name in ("tool:pytest", "pytest") if parser.has_section(name)}
