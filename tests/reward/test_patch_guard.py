"""The patch guard keeps source changes and drops every file that could game the tests."""

import pytest

from verl_swe.reward.patch_guard import guard_patch, pytest_config_changed
from verl_swe.tasks.patches import split_patch


def file_diff(path: str, new: bool = False, body: str = "+x = 1\n", mode: str = "100644", old: str | None = None) -> str:
    old = old or path
    head = f"diff --git a/{old} b/{path}\n"
    if new:
        return head + f"new file mode {mode}\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n{body}"
    return head + f"--- a/{old}\n+++ b/{path}\n@@ -1 +1 @@\n-x = 0\n{body}"


SOURCE = file_diff("calc/core.py")
TEST_PATCH = file_diff("tests/test_core.py")


@pytest.mark.parametrize("path,new,reason", [
    ("tests/test_core.py", False, "a test file of the task"),
    ("tests/test_extra.py", True, "a test file"),
    ("calc/test_helpers.py", True, "a test file"),
    ("calc/helpers_test.py", True, "a test file"),
    ("conftest.py", True, "a test file"),
    ("calc/conftest.py", True, "a test file"),
    ("pytest.ini", True, "test-runner configuration"),
    ("tests/pytest.ini", True, "a test file"),
    ("tox.ini", False, "test-runner configuration"),
    ("noxfile.py", False, "test-runner configuration"),
    ("tests/data/expected.json", False, "a test file"),
    ("pkg/tests/helpers.py", False, "a test file"),  # tests/ holds tests wherever it is
    ("pandas/tests/frame/common.py", False, "a test file"),
    ("test/helpers.py", False, "a test file"),  # test/ and testing/ at the top (pytest's own testing/)
    ("testing/helpers.py", False, "a test file"),
    ("src/testing/helpers.py", False, "a test file"),
    ("sitecustomize.py", True, "test-runner configuration or a file Python loads implicitly"),
    ("usercustomize.py", True, "loads implicitly"),
    ("calc/evil.pth", True, "a .pth file"),
    ("pytest.py", True, "shadowing 'pytest'"),
    ("pytest.cpython-311-x86_64-linux-gnu.so", True, "shadowing 'pytest'"),  # extension modules shadow too
    ("pytest.pyc", True, "compiled bytecode"),  # a sourceless .pyc is imported like a module
    ("calc/__pycache__/core.cpython-311.pyc", True, "compiled bytecode"),
    ("_pytest/__init__.py", True, "shadowing '_pytest'"),
    ("json.py", True, "shadowing 'json'"),
    ("../outside.py", True, "outside the repository"),
    ("/usr/lib/python3/dist-packages/x.pth", True, "outside the repository"),
    (".git/hooks/pre-commit", True, "git internals"),
    # importlib.metadata reads these from the repository root on sys.path: entry points, pytest11 plugins.
    ("calc_tamper-1.0.dist-info/entry_points.txt", True, "packaging metadata"),
    ("calc_tamper-1.0.dist-info/METADATA", True, "packaging metadata"),
    ("src/calc.egg-info/entry_points.txt", True, "packaging metadata"),
    ("calc/entry_points.txt", True, "packaging metadata"),
])
def test_forbidden_files_are_dropped_with_the_reason(path, new, reason):
    g = guard_patch(SOURCE + file_diff(path, new=new), TEST_PATCH)
    assert g.patch == SOURCE
    assert reason in g.dropped[path]


def test_source_changes_are_kept_byte_for_byte():
    patch = SOURCE + file_diff("calc/new_module.py", new=True) + file_diff("README.md")
    g = guard_patch(patch, TEST_PATCH)
    assert g.patch == patch and g.dropped == {}


def test_symlinks_and_renames_into_tests_are_dropped():
    link = ("diff --git a/calc/link.py b/calc/link.py\nnew file mode 120000\n--- /dev/null\n+++ b/calc/link.py\n"
            "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n")
    rename = "diff --git a/calc/util.py b/tests/util.py\nsimilarity index 100%\nrename from calc/util.py\nrename to tests/util.py\n"
    g = guard_patch(SOURCE + link + rename, TEST_PATCH)
    assert g.patch == SOURCE
    assert g.dropped == {"calc/link.py": "symlinks are not allowed", "calc/util.py": "a test file",
                         "tests/util.py": "a test file"}


def test_plain_unified_diff_and_empty_patches():
    plain = "--- a/calc/core.py\n+++ b/calc/core.py\n@@ -1 +1 @@\n-x\n+y\n--- a/conftest.py\n+++ b/conftest.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert [d.new_path for d in split_patch(plain)] == ["calc/core.py", "conftest.py"]
    assert guard_patch(plain).patch == "--- a/calc/core.py\n+++ b/calc/core.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert guard_patch("").patch == "" and guard_patch(None).patch == "" and guard_patch("  \n").dropped == {}


def test_modifying_an_existing_module_named_like_stdlib_is_allowed():
    # Only *new* top-level modules can shadow; editing the project's own `types.py` is ordinary work.
    g = guard_patch(file_diff("types.py"), TEST_PATCH)
    assert g.dropped == {}


def test_the_agent_is_told_the_rules():
    # The policy must not be punished for a change it was never told is discarded.
    from verl_swe.agent.prompts import system_prompt
    from verl_swe.reward.patch_guard import GRADING_RULES

    prompt = system_prompt("")
    assert GRADING_RULES in prompt and "Do not modify or add tests" in prompt
    for named in ("conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize",
                  "usercustomize", ".pth", ".pyc", "outside the repository", ".dist-info", ".egg-info",
                  "entry_points.txt"):
        assert named in GRADING_RULES, named
    # ...that a test run tampered with from the source is graded unresolved (the integrity checks), and every
    # static tamper rule (static_flags.py: what a `static="reject"` grading discards).
    from verl_swe.reward.static_flags import PY_RULES

    told = {"pytest_internals": "hooks into or replaces pytest", "process_exit": "os._exit",
            "exit_at_import": "exits the process early", "atexit": "atexit", "sys_modules": "sys.modules",
            "builtins": "builtins", "import_hooks": "the import system", "tracing": "tracing",
            "git_objects": "reads .git objects", "fd_output": "prints or rewrites test results",
            "test_path_writes": "writes test files", "packaging_plugins": "registers plugins in packaging metadata",
            "code_swap": "function code (__code__)"}
    assert set(told) == {*PY_RULES, "test_path_writes", "packaging_plugins"}
    for rule, named in told.items():
        assert named in GRADING_RULES, rule
    assert "graded unresolved" in GRADING_RULES and "may be discarded" in GRADING_RULES


def test_reject_drops_the_named_files_with_their_reason():
    g = guard_patch(SOURCE + file_diff("calc/hack.py", new=True), TEST_PATCH,
                    reject={"calc/hack.py": "tamper signature: atexit"})
    assert g.patch == SOURCE and g.dropped == {"calc/hack.py": "tamper signature: atexit"}


LIBRARY_IN_TEST_NAMED_DIRS = ["django/test/testcases.py", "sphinx/testing/fixtures.py",
                              "lib/matplotlib/testing/decorators.py", "numpy/testing/_private/utils.py"]


@pytest.mark.parametrize("path", LIBRARY_IN_TEST_NAMED_DIRS)
def test_library_code_in_a_test_or_testing_package_is_kept(path):
    # Real fixes edit these (Django's TestCase, Sphinx's and Matplotlib's test support the projects ship).
    g = guard_patch(SOURCE + file_diff(path), TEST_PATCH, test_ids=["tests/test_core.py::test_it"])
    assert g.dropped == {} and g.patch == SOURCE + file_diff(path)


def test_the_tasks_own_test_files_decide_too():
    # A nested test/ directory is a test directory when the task's tests live there (FAIL_TO_PASS ids name
    # files the test_patch may not touch); its helpers and data go with it. Elsewhere such names are code.
    ids = ["pkg/test/test_io.py::TestRead::test_it[a b]", "pkg/test/test_io.py::test_other"]
    for path in ("pkg/test/test_io.py", "pkg/test/util.py", "pkg/test/data/x.txt"):
        assert guard_patch(SOURCE + file_diff(path), test_ids=ids).dropped == {path: (
            "a test file of the task" if path == "pkg/test/test_io.py" else "a test file")}, path
    assert guard_patch(file_diff("pkg/test/util.py")).dropped == {}
    assert guard_patch(file_diff("other/test/util.py"), test_ids=ids).dropped == {}


PYPROJECT = """[project]
name = "calc"
version = "1.0"
dependencies = ["attrs"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra"

[tool.ruff]
line-length = 100
"""
SETUP_CFG = "[metadata]\nname = calc\nversion = 1.0\n\n[tool:pytest]\ntestpaths = tests\n\n[flake8]\nmax-line-length = 100\n"


def test_setup_cfg_and_pyproject_are_kept_unless_their_pytest_sections_change():
    # The guard keeps their diffs, to be checked once applied (grading restores a file whose pytest
    # sections changed); metadata and other tools' settings are the project's business.
    g = guard_patch(SOURCE + file_diff("pyproject.toml") + file_diff("setup.cfg") + file_diff("tox.ini"))
    assert g.checked == ["pyproject.toml", "setup.cfg"] and set(g.dropped) == {"tox.ini"}
    for path, text in (("pyproject.toml", PYPROJECT), ("setup.cfg", SETUP_CFG)):
        assert pytest_config_changed(path, text, text.replace("1.0", "1.1").replace("100", "120")) is None
        assert pytest_config_changed(path, None, None) is None
    for path, before, after in [
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace('"-ra"', '"-ra -p calc.forcepass"')),
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace('testpaths = ["tests"]', 'testpaths = ["calc"]')),
        ("pyproject.toml", None, '[tool.pytest.ini_options]\naddopts = "-p calc.forcepass"\n'),  # a new one
        ("calc/pyproject.toml", None, '[tool.pytest]\naddopts = ["-p", "calc.forcepass"]\n'),  # pytest 9 native
        ("setup.cfg", SETUP_CFG, SETUP_CFG.replace("testpaths = tests", "addopts = -p calc.forcepass")),
        ("setup.cfg", SETUP_CFG, SETUP_CFG.replace("[tool:pytest]\ntestpaths = tests\n", "")),
        ("src/setup.cfg", None, "[tool:pytest]\naddopts = -p calc.forcepass\n"),
    ]:
        why = pytest_config_changed(path, before, after)
        assert why is not None and why.startswith("changes pytest's configuration"), (path, after)
    assert "does not parse" in pytest_config_changed("pyproject.toml", PYPROJECT, PYPROJECT + "[broken\n")
