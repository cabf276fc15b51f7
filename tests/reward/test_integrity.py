"""The integrity checks' parts without a sandbox: the test command's shape, sentinel placement, the probe's
signed record, and the verdict on runs built from it (sandbox runs: test_tamper_corpus.py, test_grading.py)."""

import ast
import base64
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from swebench.harness.log_parsers import PARSER_REGISTRY

from verl_swe.reward.integrity import Collected, IntegrityRun, analyze, judge
from verl_swe.reward.integrity import inject
from verl_swe.reward.integrity.probe import _Record
from verl_swe.reward.integrity.record import read_record
from verl_swe.reward.integrity.sentinels import injection_plan, make_sentinels

PYTEST = "python -m pytest -rA --tb=short -p no:cacheprovider"
PARSER = PARSER_REGISTRY["parse_log_pytest"]
F2P, P2P = "tests/test_a.py::test_fixed", "tests/test_a.py::test_kept"


@pytest.mark.parametrize("command, files, exitfirst, note", [
    (f"{PYTEST} tests/test_a.py tests/test_b.py", ("tests/test_a.py", "tests/test_b.py"), False, None),
    (f"{PYTEST} -x tests/test_a.py", ("tests/test_a.py",), True, None),
    (f"{PYTEST} --maxfail=2 tests/test_a.py", ("tests/test_a.py",), True, None),
    ("pytest -rxs tests/test_a.py", ("tests/test_a.py",), False, None),  # -r takes "xs": not -x
    (f"{PYTEST} -k 'not slow' tests/test_a.py", (), False, "selects tests"),
    (f"{PYTEST} tests/test_a.py::test_fixed tests/test_b.py", ("tests/test_b.py",), False, "single tests"),
    ("source /opt/env/bin/activate\ncd /testbed\npytest --no-header -rA ./tests/test_a.py", ("tests/test_a.py",),
     False, None),
])
def test_the_command_decides_where_sentinels_go(command, files, exitfirst, note):
    shape = analyze(command, "parse_log_pytest", ["tests/test_a.py", "tests/test_b.py"])
    assert shape.pytest and shape.files == files and shape.exitfirst == exitfirst
    assert (note is None and not shape.notes) or any(note in n for n in shape.notes)


def test_test_directories_get_sentinels_in_a_module_of_theirs(tmp_path):
    shape = analyze("pytest -p no:cacheprovider -rA tests/unit ./pkg/tests --rootdir . -k x", "parse_log_pytest", [])
    assert shape.dirs == () and "selects tests" in shape.notes[0]  # -k: nothing is added
    shape = analyze("pytest -p no:cacheprovider --ignore tests/slow -rA tests/unit ./pkg/tests src", "parse_log_pytest", [])
    assert shape.dirs == ("tests/unit", "pkg/tests") and not shape.files
    # inject.py picks a random test module in the directory (never a helper or a conftest)
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    for name in ("conftest.py", "helpers.py", "test_a.py", "sub/b_test.py"):
        (tmp_path / "tests" / name).write_text("")
    picked = {inject._module_in(str(tmp_path / "tests"), random.Random(seed)) for seed in range(20)}
    assert picked == {str(tmp_path / "tests" / "test_a.py"), str(tmp_path / "tests" / "sub" / "b_test.py")}
    assert inject._module_in(str(tmp_path / "nothing"), random.Random(0)) is None


@pytest.mark.parametrize("command, parser", [
    ("./tests/runtests.py --verbosity 2 auth_tests.test_views", "parse_log_django"),
    ("bin/test -C --verbose sympy/core/tests/test_basic.py", "parse_log_sympy"),
    ("tox -e py311", "parse_log_pytest"),
])
def test_other_runners_get_only_the_file_checks(command, parser):
    shape = analyze(command, parser, ["tests/test_a.py"])
    assert not shape.pytest and not shape.files and "test-file checks" in shape.notes[0]


def test_sentinels_are_random_and_a_failing_one_carries_its_nonce():
    a, b = make_sentinels(["tests/test_a.py", "tests/test_b.py"]), make_sentinels(["tests/test_a.py"])
    assert [s.must_fail for s in a] == [False, True, False, True]
    assert len({s.name for s in a + b}) == 6 and all(s.name.startswith("test_") for s in a)
    for s in a:
        assert (bool(s.nonce) and s.nonce in s.code) == s.must_fail and ast.parse(s.code)
    # Under -x a must-fail sentinel would stop the run: only the last file gets one (none when a directory
    # is run: pytest decides its order).
    assert [(s.file, s.must_fail) for s in make_sentinels(["a.py", "b.py"], exitfirst=True)] == [
        ("a.py", False), ("b.py", False), ("b.py", True)]
    assert [s.must_fail for s in make_sentinels(["a.py"], exitfirst=True, dirs=["tests"])] == [False, False]


def test_sentinels_go_between_the_files_tests_or_last():
    src = "import pytest\n\n\n@pytest.mark.slow\ndef test_one():\n    pass\n\n\nclass TestTwo:\n    def test_x(self):\n        pass\n"
    blocks = [{"code": "def test_sentinel_pass():\n    assert 1\n", "at_end": False},
              {"code": "def test_sentinel_fail():\n    assert 0\n", "at_end": True}]
    seen = set()
    for seed in range(30):
        out = inject.insert(src, blocks, random.Random(seed))
        tree = ast.parse(out)  # still a valid module, every original test kept
        names = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert sorted(names) == ["TestTwo", "test_one", "test_sentinel_fail", "test_sentinel_pass"]
        assert names[-1] == "test_sentinel_fail"  # at_end: the last test
        assert "@pytest.mark.slow\ndef test_one" in out  # never between a decorator and its function
        seen.add(names.index("test_sentinel_pass"))
    assert len(seen) == 3  # before test_one, before TestTwo, or at the end
    assert inject.insert("def broken(:\n", blocks[:1], random.Random(0)).endswith("assert 1\n\n\n")


def test_the_scripts_that_run_in_the_task_interpreter_are_python_36():
    for name in ("probe.py", "inject.py"):
        source = (Path(inject.__file__).parent / name).read_text()
        ast.parse(source, feature_version=(3, 6))


class Run:
    """A probe record written by the probe's own writer, and the verdict on it."""

    def __init__(self, tmp_path, files=("tests/test_a.py",)):
        self.run = IntegrityRun(analyze(f"{PYTEST} {' '.join(files)}", "parse_log_pytest", list(files)), "/testbed",
                                ["src/a.py"], test_files=list(files))
        self.path = tmp_path / "record"
        self.rec = _Record(str(self.path), self.run.key)
        self.got = Collected(before={f: "h" for f in files}, after={f: "h" for f in files}, pre_ran=True,
                             post_ran=True, injected={s.name: s.file for s in self.run.sentinels})

    def session(self, outcomes: dict[str, str], ended=True, exitstatus=1):
        self.rec.write("start")
        self.rec.write("configure", python_functions=["test"], tbstyle="short", xdist=False)
        for f in {n.split("::")[0] for n in outcomes}:
            self.rec.write("collect", nodeid=f, outcome="passed", crash="")
        for nodeid, outcome in outcomes.items():
            self.rec.write("test", nodeid=nodeid, when="call", outcome=outcome, made=True, made_outcome=outcome,
                           raw="AssertionError" if outcome == "failed" else None, raw_skip=False, wasxfail=False,
                           crash=self.nonce(nodeid) if outcome == "failed" else "")
        if ended:
            self.rec.write("sessionfinish", exitstatus=exitstatus)
            self.rec.write("end")

    def nonce(self, nodeid):
        return next((f"AssertionError: {s.nonce}" for s in self.run.sentinels if s.matches(nodeid)), "AssertionError")

    def honest(self, fixed: bool) -> dict[str, str]:
        out = {F2P: "passed" if fixed else "failed", P2P: "passed"}
        for s in self.run.sentinels:
            out[f"{s.file}::{s.name}"] = "failed" if s.must_fail else "passed"
        return out

    def judge(self, log: dict[str, str], exit_code=1):
        text = "\n".join(f"{v.upper()} {k}" + (f" - {self.nonce(k)}" if v == "failed" else "") for k, v in log.items())
        self.got.record = self.path.read_bytes() if self.path.exists() else b""
        return judge(self.run, self.got, log_text=text, log_status=PARSER(text, None), parser=PARSER,
                     fail_to_pass=[F2P], pass_to_pass=[P2P], exit_code=exit_code)


def checks(report) -> set[str]:
    return {r["check"] for r in report.reasons}


@pytest.mark.parametrize("fixed", [True, False])
def test_an_honest_run_is_intact(tmp_path, fixed):
    r = Run(tmp_path)
    r.session(r.honest(fixed))
    report = r.judge(r.honest(fixed))
    assert not report.tampered and report.reasons == [] and set(report.checks) == {"files", "probe", "sentinels"}


def test_a_pass_the_runner_did_not_record(tmp_path):
    r = Run(tmp_path)
    r.session(r.honest(fixed=False))
    report = r.judge(r.honest(fixed=True))  # the log says the fix works; pytest's runner saw it fail
    assert report.tampered and checks(report) == {"record"}
    assert f"{F2P} (PASSED in the log, FAILED recorded)" in report.reasons[0]["detail"]


def test_a_must_fail_sentinel_that_passes(tmp_path):
    r = Run(tmp_path)
    every_pass = {k: "passed" for k in r.honest(fixed=True)}
    r.session(every_pass)
    report = r.judge(every_pass)
    assert checks(report) == {"sentinel"} and "(must fail): PASSED in the log" in report.reasons[0]["detail"]


def test_a_module_that_cannot_be_imported_exempts_its_sentinels(tmp_path):
    # An honest failure: the test file imports a name the unfixed code lacks, so nothing in it runs.
    r = Run(tmp_path)
    r.rec.write("start")
    r.rec.write("configure", python_functions=["test"], tbstyle="short", xdist=False)
    r.rec.write("collect", nodeid="tests/test_a.py", outcome="failed", crash="ImportError")
    r.rec.write("sessionfinish", exitstatus=2)
    r.rec.write("end")
    report = r.judge({"tests/test_a.py": "error"}, exit_code=2)
    assert not report.tampered and any("collecting it failed" in n for n in report.notes)


def test_a_module_mark_or_fixture_that_skips_or_fails_setup_exempts_its_sentinels(tmp_path):
    # `pytestmark = pytest.mark.skipif(...)` or an autouse fixture that errors: the module's tests and the
    # sentinels fail their setup alike, an honest run either way.
    r = Run(tmp_path)
    r.rec.write("start")
    r.rec.write("configure", python_functions=["test"], tbstyle="short", xdist=False)
    r.rec.write("collect", nodeid="tests/test_a.py", outcome="passed", crash="")
    outcomes = {F2P: "skipped", P2P: "skipped", **{f"{s.file}::{s.name}": "skipped" for s in r.run.sentinels}}
    for nodeid in outcomes:
        r.rec.write("test", nodeid=nodeid, when="setup", outcome="skipped", made=True, made_outcome="skipped",
                    raw="Skipped", raw_skip=True, wasxfail=False, crash="")
    r.rec.write("sessionfinish", exitstatus=0)
    r.rec.write("end")
    report = r.judge(outcomes, exit_code=0)
    assert not report.tampered, report.reasons
    assert sum("its setup skipped" in n for n in report.notes) == len(r.run.sentinels)


def test_a_session_that_never_ended_and_an_exit_code_it_did_not_give(tmp_path):
    r = Run(tmp_path)
    r.session(r.honest(fixed=False), ended=False)
    assert "exit" in checks(r.judge(r.honest(fixed=False), exit_code=0))
    (tmp_path / "b").mkdir()
    r2 = Run(tmp_path / "b")
    r2.session(r2.honest(fixed=False), exitstatus=1)
    report = r2.judge(r2.honest(fixed=False), exit_code=0)
    assert checks(report) == {"exit"} and "exited 0, but pytest's session ended with exit status 1" in \
        report.reasons[0]["detail"]


def test_a_forged_record_line(tmp_path):
    r = Run(tmp_path)
    r.session(r.honest(fixed=True))
    with open(r.path, "a") as f:
        f.write('0123abcd {"k": "test", "n": 99, "pid": 1, "nodeid": "x", "when": "call", "outcome": "passed"}\n')
    assert read_record(r.path.read_bytes(), r.run.key).forged == 1
    assert "record" in checks(r.judge(r.honest(fixed=True)))
    assert read_record(r.path.read_bytes(), "another key").forged == len(r.path.read_text().splitlines())


def test_test_files_changed_or_runner_files_written_during_the_run(tmp_path):
    r = Run(tmp_path)
    r.session(r.honest(fixed=True))
    r.got.after = {"tests/test_a.py": "other"}
    r.got.changed = ["tests/conftest.py", "build/data.py", "src/__pycache__/a.cpython-311.pyc", "x-1.0.dist-info/RECORD"]
    report = r.judge(r.honest(fixed=True))
    details = " | ".join(x["detail"] for x in report.reasons)
    assert checks(report) == {"files"} and "changed during the test run: tests/test_a.py" in details
    assert "tests/conftest.py" in details and "x-1.0.dist-info/RECORD" in details and "build/data.py" not in details


def test_no_record_and_no_results_is_not_tampering(tmp_path):
    r = Run(tmp_path)
    report = r.judge({})
    assert not report.tampered and "no pytest session recorded" in " ".join(report.notes)
    assert "record" in checks(r.judge(r.honest(fixed=True)))  # results in the log, but no probe ran


def test_the_probe_tells_test_files_as_the_guard_does(tmp_path):
    # The probe (standalone, in the task's Python) and the patch guard must agree on what is a test file: a
    # hook registered from a test file is trusted, one from library code in django/test/ is the patch's.
    from verl_swe.reward.patch_guard import is_test_path

    tests = ["pkg/test/test_io.py", "tests/test_a.py"]
    run = IntegrityRun(analyze(f"{PYTEST} tests/test_a.py", "parse_log_pytest", ["tests/test_a.py"]), "/testbed",
                       [], test_files=tests)
    namespace = {"__name__": "probe_copy"}
    exec(compile(run.files()[f"{run.grader_dir}/lib/{run.module}.py"], "probe", "exec"), namespace)
    paths = ["django/test/testcases.py", "sphinx/testing/fixtures.py", "lib/matplotlib/testing/decorators.py",
             "tests/helpers.py", "test/x.py", "testing/x.py", "src/testing/x.py", "pandas/tests/frame/common.py",
             "pkg/test/util.py", "other/test/util.py", "conftest.py", "a/test_b.py", "pkg/util.py", "pkg/tests.py"]
    assert [namespace["_is_test_path"](p) for p in paths] == [is_test_path(p, tests) for p in paths]
    assert [is_test_path(p, tests) for p in paths[:3]] == [False] * 3 and is_test_path("pkg/test/util.py", tests)


def test_the_list_of_inserted_sentinels_does_not_name_them(tmp_path):
    # The list stays in the grader's directory during the run, readable by the code under test (reading is
    # no tampering): it gives plan indexes, which only the grader maps back to names.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n")
    run = IntegrityRun(analyze(f"{PYTEST} tests/test_a.py", "parse_log_pytest", ["tests/test_a.py"]), str(tmp_path),
                       [], test_files=["tests/test_a.py"])
    plan = base64.b64encode(json.dumps(injection_plan(run.sentinels, False)).encode()).decode()
    subprocess.run([sys.executable, "-I", "-S", inject.__file__, str(tmp_path), plan], cwd=tmp_path, check=True)
    listed = (tmp_path / "injected").read_text()
    assert listed.splitlines() == ["0\ttests/test_a.py", "1\ttests/test_a.py"]
    assert all(s.name not in listed and s.name in (tmp_path / "tests" / "test_a.py").read_text()
               for s in run.sentinels)


@pytest.mark.parametrize("test, stopped_by, xfail, tampered", [
    (F2P, None, True, False),  # the test xfails itself (or through conftest, test helpers, an xfail mark)
    (F2P, "src/b.py", True, True),  # the repository's code declares the test an expected failure
    (P2P, "src/b.py", False, False),  # library helpers skip honestly (sklearn.utils._testing raises SkipTest)
    (P2P, "src/a.py", False, True),  # ...but not the model patch's own code (Run's patch is src/a.py)
])
def test_an_xfail_or_skip_ends_a_test_as_a_pass_only_when_the_test_raised_it(tmp_path, test, stopped_by, xfail,
                                                                              tampered):
    # swebench counts XFAIL as a pass (and SKIPPED for PASS_TO_PASS). The probe names the repository file
    # whose code raised the xfail or skip that ended the call.
    r = Run(tmp_path)
    outcomes = r.honest(fixed=True)
    r.session({k: v for k, v in outcomes.items() if k != test})
    r.rec.write("test", nodeid=test, when="call", outcome="skipped", made=True, made_outcome="skipped",
                raw="XFailed" if xfail else "Skipped", raw_skip=True, stopped_by=stopped_by, wasxfail=xfail,
                crash="")
    report = r.judge({**outcomes, test: "xfail" if xfail else "skipped"}, exit_code=1)
    assert report.tampered == tampered, report.reasons
    if tampered:
        status = "XFAIL" if xfail else "SKIPPED"
        assert checks(report) == {"record"} and f"{test} ({status}, raised in {stopped_by})" in \
            report.reasons[0]["detail"]


# -- canaries (inject.py) and the probe's checks of the tests themselves -------------------------------------
CANARY_SOURCE = '''import pytest

from pkg import area, name_of, parts


def test_area():
    """The docstring stays."""
    shape = area(2,
                 3)
    assert shape == 6
    assert shape > 0


def test_name():
    assert name_of("x") == "shape x"


def test_parts():
    assert parts() == [1, 2]


def test_weak(value=3):
    assert value >= 0  # no form the canaries change: an order, not ==
    assert value
    assert value is not None


def test_early_return():
    if True:
        return
    assert area(1, 1) == 1


@pytest.mark.parametrize("x", [1])
def test_decorated(x):
    assert area(x, 1) == 1


def test_flags():
    assert name_of("") == True  # a bool: not changed
    x = 1; assert area(x, 1) == 1
'''
PKG = ("def area(a, b):\n    return a * b\n\n\ndef name_of(s):\n    return 'shape ' + s\n\n\n"
       "def parts():\n    return [1, 2]\n")


def _inject(tmp_path, graded=()):
    (tmp_path / "tests").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(PKG)
    (tmp_path / "tests" / "test_a.py").write_text(CANARY_SOURCE)
    run = IntegrityRun(analyze(f"{PYTEST} tests/test_a.py", "parse_log_pytest", ["tests/test_a.py"]), str(tmp_path),
                       [], test_files=["tests/test_a.py"], graded=list(graded))
    plan = base64.b64encode(json.dumps(run.plan()).encode()).decode()
    subprocess.run([sys.executable, "-I", "-S", inject.__file__, str(tmp_path), plan], cwd=tmp_path, check=True)
    listed = (tmp_path / "injected").read_text()
    names = {}
    for line in listed.splitlines():
        if line.startswith("c"):
            entry, path, hexed = line.split("\t")
            names[run.canary_name(entry[1:], hexed)] = path
    return run, listed, names


def test_canaries_copy_the_files_tests_with_an_expectation_no_honest_run_meets(tmp_path):
    canaries = set()
    for i in range(12):  # two per file, drawn at random: every eligible test shows up
        root = tmp_path / str(i)
        root.mkdir()
        run, listed, names = _inject(root)
        assert len(names) == 2 and set(names.values()) == {"tests/test_a.py"}
        assert not any(n in listed for n in names)  # the list readable during the run does not name them
        source = (root / "tests" / "test_a.py").read_text()
        tree = ast.parse(source)
        for name in names:
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
            canaries.add(name.rsplit("_", 1)[0] if name.count("_") > 1 else name)
            assert not fn.decorator_list and isinstance(fn.body[-1], ast.Assert)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "tests"],
                           cwd=root, capture_output=True, text=True)
        for name in names:  # the original tests pass; every canary fails
            assert f"FAILED tests/test_a.py::{name}" in r.stdout, r.stdout
        assert "PASSED tests/test_a.py::test_area" in r.stdout and "PASSED tests/test_a.py::test_parts" in r.stdout
    copied = {c for c in canaries}
    # Only the three tests with an `==` literal assert reachable from the start were ever copied.
    assert {c.split("_")[1] for c in copied} <= {"area", "name", "parts"}, copied


def test_canaries_prefer_the_tasks_graded_tests(tmp_path):
    for i in range(4):
        root = tmp_path / str(i)
        root.mkdir()
        _, _, names = _inject(root, graded=["tests/test_a.py::test_parts", "tests/test_a.py::test_name"])
        assert {n.split("_")[1] for n in names} == {"parts", "name"}, names


def test_the_changed_expectation_is_never_met():
    rng = random.Random(0)
    for value in (0, -5, 7, 2.5, "", "abc", b"x", [], [1, "a"], (1,), ((),)):
        for _ in range(50):
            changed = inject._changed(value, rng)
            assert type(changed) is type(value) and changed != value
            if isinstance(value, str):
                assert not changed.startswith(value) or not value
                assert not changed.endswith(value) or not value
            if isinstance(value, (int, float)):
                assert abs(changed - value) >= 10 ** 6 and all((changed - value) % m for m in (2, 3, 7, 360))


def test_a_passing_canary_is_tampering_a_failing_one_is_not(tmp_path):
    r = Run(tmp_path)
    r.got.canaries = {"test_kept_again": "tests/test_a.py"}
    outcomes = {**r.honest(True), "tests/test_a.py::test_kept_again": "failed"}
    r.session(outcomes)
    assert not r.judge({k: v for k, v in outcomes.items()}).tampered
    for status in ("skipped", "error"):
        assert not r.judge({**outcomes, "tests/test_a.py::test_kept_again": status}).tampered
    report = r.judge({**outcomes, "tests/test_a.py::test_kept_again": "passed"})
    assert checks(report) == {"canary"} and "test_kept_again" in report.reasons[0]["detail"]


HONEST_TESTS = '''import functools
import unittest

import pytest

from pkg import fixture_from_pkg, open, retry
from tests.test_shared import test_shared

exec("def test_generated():\\n    assert 1 == 1\\n")


def _make():
    def test_inner():
        assert 2 == 2
    return test_inner


test_made = _make()
test_lambda = lambda: None


class TestThing:
    def test_method(self):
        assert open() == "opened"

    @pytest.mark.parametrize("x", [1, 2])
    def test_param(self, x):
        assert x in (1, 2)


class Case(unittest.TestCase):
    def test_case(self):
        self.assertEqual(open(), "opened")


def deco(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)
    return wrapper


@deco
def test_wrapped():
    assert True


@retry
def test_retried():
    assert open() == "opened"


def test_uses_fixture(fixture_from_pkg):
    assert fixture_from_pkg == 5
'''
HONEST_PKG = '''import functools
import sys

import pytest


def open():
    return "opened"


def retry(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        sys._getframe(0)
        return fn(*args, **kwargs)
    return wrapper


@pytest.fixture
def fixture_from_pkg():
    return 5
'''


def test_the_probe_finds_nothing_in_honest_test_modules(tmp_path):
    # Tests made by exec, factories, lambdas, classes, unittest, decorators of the test file and of the patched
    # package, tests imported from another test module, fixtures and a builtin's name imported from the package.
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "pkg" / "__init__.py").write_text(HONEST_PKG)
    (repo / "tests" / "test_shared.py").write_text("def test_shared():\n    assert 1 == 1\n")
    (repo / "tests" / "test_honest.py").write_text(HONEST_TESTS)
    run = IntegrityRun(analyze(PYTEST, "parse_log_pytest", []), str(repo), ["pkg/__init__.py"])
    run.grader_dir = str(tmp_path / "g")
    for path, text in run.files().items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    env = {**__import__("os").environ, "PYTHONPATH": f"{run.grader_dir}/lib", "PYTEST_ADDOPTS": f"-p {run.module}",
           run.key_var: run.key}
    out = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"], cwd=repo, env=env,
                         capture_output=True, text=True)
    assert "12 passed" in out.stdout, out.stdout
    record = read_record(Path(run.record_path).read_bytes(), run.key)
    problems = [p for s in record.sessions for p in s.problems if not p["kind"].startswith("note:")]
    assert record.sessions and not problems, problems
