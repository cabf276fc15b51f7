"""The patch guard keeps source changes and drops every file that could game the tests."""

import pytest

from verl_swe.reward.patch_guard import guard_patch
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
    ("setup.cfg", False, "test-runner configuration"),
    ("tox.ini", False, "test-runner configuration"),
    ("pyproject.toml", False, "test-runner configuration"),
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
            "test_path_writes": "writes test files", "packaging_plugins": "registers plugins in packaging metadata"}
    assert set(told) == {*PY_RULES, "test_path_writes", "packaging_plugins"}
    for rule, named in told.items():
        assert named in GRADING_RULES, rule
    assert "graded unresolved" in GRADING_RULES and "may be discarded" in GRADING_RULES


def test_reject_drops_the_named_files_with_their_reason():
    g = guard_patch(SOURCE + file_diff("calc/hack.py", new=True), TEST_PATCH,
                    reject={"calc/hack.py": "tamper signature: atexit"})
    assert g.patch == SOURCE and g.dropped == {"calc/hack.py": "tamper signature: atexit"}
