"""Gold patches of projects laid out as real ones are, graded in real sandboxes with the integrity checks on:
resolved, and nothing flagged. pytest's rootdir away from the checkout (a pytest.ini in tests/, `--rootdir` in
pyproject.toml), tests inside the package, classes, unittest cases, parametrized ids with spaces, brackets,
unicode and `::`, `--import-mode=importlib`; tests that read the source of loaded modules, the grader's probe
included (inspect.getsource, linecache, open); a fix in a package's `testing/` helpers and in pyproject.toml
metadata, while a pyproject.toml change to pytest's configuration is still undone; an xfail raised from the
package is no pass."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from verl_swe.reward.grading import grade
from verl_swe.tasks import Environments, Task
from verl_swe.tasks.snapshot import git

INSTALL = {"python": "3.11", "pip_packages": ["pytest"], "install": "",  # the envs/mini environment: built once
           "test_cmd": "python -m pytest -rA --tb=short -p no:cacheprovider", "log_parser": "parse_log_pytest"}

# Project "calc": pytest.ini in tests/, so pytest's rootdir is tests/ and its node ids lack the `tests/`; the
# terminal (the log) and the task's ids are relative to the checkout.
CALC = {
    "calc/__init__.py": "def add(a, b):\n    return a - b\n\n\ndef label(s):\n    return '<%s>' % s\n",
    "tests/pytest.ini": "[pytest]\naddopts = -ra\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
}
CALC_FIX = {"calc/__init__.py": CALC["calc/__init__.py"].replace("a - b", "a + b")}
CALC_TESTS = {"tests/test_calc.py": CALC["tests/test_calc.py"] + '''

import inspect
import linecache
import os
import sys
import unittest

import pytest

import calc
from calc import label


class TestAdd:
    def test_positive(self):
        assert add(2, 3) == 5

    @pytest.mark.parametrize("a, b", [(1, 2), (-1, -2)])
    def test_pairs(self, a, b):
        assert add(a, b) == a + b


@pytest.mark.parametrize("s", ["a b", "x[1]", "\\u00e9t\\u00e9", "a::b", "p/q"])
def test_label(s):
    assert label(s) == "<" + s + ">" and add(1, 1) == 2


class TestUnit(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(1, 2), 3)


def test_sources_of_loaded_modules(request):
    # What projects' own tests do (inspect.getsource, linecache, tokenize, plain reads): here on every loaded
    # module outside site-packages, the grader's probe among them.
    assert "a + b" in inspect.getsource(calc.add)
    read = 0
    for plugin in request.config.pluginmanager.get_plugins():
        path = getattr(plugin, "__file__", None)
        if isinstance(plugin, type(sys)) and path and "site-packages" not in path and path.endswith(".py"):
            assert inspect.getsource(plugin) and linecache.getlines(path)
            with open(path) as f:
                assert f.read()
            assert os.listdir(os.path.dirname(path))
            read += 1
    assert read >= 1  # the grader's probe: the one plugin module outside site-packages here
''', "tests/test_other.py": "from calc import add\n\n\ndef test_other():\n    assert add(2, 2) == 4\n"}
CALC_F2P = ["tests/test_calc.py::TestAdd::test_positive", "tests/test_calc.py::TestAdd::test_pairs[1-2]",
            "tests/test_calc.py::TestAdd::test_pairs[-1--2]", "tests/test_calc.py::TestUnit::test_add",
            # swebench's parser cuts an id at its first space, so the datasets' ids are cut there too
            "tests/test_calc.py::test_label[a", "tests/test_calc.py::test_label[x[1]]",
            "tests/test_calc.py::test_label[\\xe9t\\xe9]", "tests/test_calc.py::test_label[a::b]",
            "tests/test_calc.py::test_label[p/q]", "tests/test_calc.py::test_sources_of_loaded_modules",
            "tests/test_other.py::test_other"]

# Project "shapes": --rootdir=src and importlib imports from pyproject.toml; tests inside the package; the
# fix is in the package's own `testing/` helpers (library code) and bumps the version in pyproject.toml.
PYPROJECT = ('[project]\nname = "shapes"\nversion = "1.0"\n\n[tool.pytest.ini_options]\n'
             'addopts = "--rootdir=src --import-mode=importlib"\npythonpath = ["src"]\n')
SHAPES = {
    "pyproject.toml": PYPROJECT,
    "src/shapes/__init__.py": "from shapes.testing.compare import close\n\n\ndef area(w, h):\n    return w * h\n",
    "src/shapes/testing/__init__.py": "",
    "src/shapes/testing/compare.py": "def close(a, b, tol=1e-9):\n    return abs(a - b) > tol\n",
    "src/shapes/tests/__init__.py": "",
    "src/shapes/tests/test_area.py": "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
}
SHAPES_FIX = {"src/shapes/testing/compare.py": "def close(a, b, tol=1e-9):\n    return abs(a - b) <= tol\n",
              "pyproject.toml": PYPROJECT.replace('version = "1.0"', 'version = "1.0.1"')}
SHAPES_TESTS = {"src/shapes/tests/test_area.py": SHAPES["src/shapes/tests/test_area.py"] + '''

import pytest

from shapes import area, close


class TestClose:
    @pytest.mark.parametrize("w", [0.1, 0.2])
    def test_close(self, w):
        assert close(area(w, 3), w * 3)
'''}
SHAPES_F2P = ["src/shapes/tests/test_area.py::TestClose::test_close[0.1]",
              "src/shapes/tests/test_area.py::TestClose::test_close[0.2]"]

# Project "units": [tool:pytest] in tests/unit/setup.cfg, so pytest's rootdir is two levels down.
UNITS = {"units/__init__.py": "def km(m):\n    return m * 1000\n",
         "tests/unit/setup.cfg": "[tool:pytest]\npython_classes = Check\n",
         "tests/unit/test_km.py": "from units import km\n\n\ndef test_zero():\n    assert km(0) == 0\n"}
UNITS_FIX = {"units/__init__.py": "def km(m):\n    return m / 1000\n"}
UNITS_TESTS = {"tests/unit/test_km.py": UNITS["tests/unit/test_km.py"] + (
    "\n\nclass CheckKm:\n    def test_km(self):\n        assert km(1500) == 1.5\n")}

# Project "plug": test support shipped in the package as a pytest plugin (like sphinx/testing/fixtures.py),
# loaded by the root conftest; the fix is in that plugin's fixture and its pytest_configure.
PLUGIN = ('import pytest\n\n\ndef pytest_configure(config):\n    config.addinivalue_line("markers", "slow: slow")\n'
          '\n\n@pytest.fixture\ndef unit():\n    return "m"\n')
PLUG = {"plug/__init__.py": "def scale(x, unit):\n    return x * {'m': 1, 'km': 1000}[unit]\n",
        "plug/testing/__init__.py": "", "plug/testing/plugin.py": PLUGIN,
        "conftest.py": 'pytest_plugins = ["plug.testing.plugin"]\n',
        "tests/test_scale.py": ("from plug import scale\n\n\ndef test_m(unit):\n"
                                "    assert scale(2, unit) in (2, 2000)\n")}
PLUG_FIX = {"plug/testing/plugin.py": PLUGIN.replace('"slow: slow"', '"slow: a slow test"').replace('"m"', '"km"')}
PLUG_TESTS = {"tests/test_scale.py": PLUG["tests/test_scale.py"] + (
    "\n\ndef test_km(unit):\n    assert scale(2, unit) == 2000\n")}


def diff(repo: Path, files: dict[str, str]) -> str:
    """The git diff that writes `files` over the repository's HEAD (new files included); the tree is reset."""
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git("add", "-N", ".", cwd=repo)
    out = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True, check=True).stdout
    git("reset", "-q", "--hard", cwd=repo)
    git("clean", "-qfd", cwd=repo)
    return out


def make_task(repos: Path, name: str, files, fix, tests, f2p, p2p) -> Task:
    repo = repos / f"acme__{name}"
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    return Task.model_validate({
        "instance_id": f"acme__{name}-1", "repo": f"acme/{name}", "base_commit": git("rev-parse", "HEAD", cwd=repo),
        "problem_statement": "a bug", "patch": diff(repo, fix), "test_patch": diff(repo, tests),
        "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "install_config": INSTALL})


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    repos = tmp_path_factory.mktemp("layouts")
    return repos, {
        "calc": make_task(repos, "calc", CALC, CALC_FIX, CALC_TESTS, CALC_F2P, ["tests/test_calc.py::test_zero"]),
        "shapes": make_task(repos, "shapes", SHAPES, SHAPES_FIX, SHAPES_TESTS, SHAPES_F2P,
                            ["src/shapes/tests/test_area.py::test_area"]),
        "plug": make_task(repos, "plug", PLUG, PLUG_FIX, PLUG_TESTS, ["tests/test_scale.py::test_km"],
                          ["tests/test_scale.py::test_m"]),
        "units": make_task(repos, "units", UNITS, UNITS_FIX, UNITS_TESTS, ["tests/unit/test_km.py::CheckKm::test_km"],
                           ["tests/unit/test_km.py::test_zero"]),
    }


@pytest.fixture
def envs(layouts, session_backend, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    sandbox = {"state_dir": str(base / "sandboxes")} if session_backend == "local" else {}
    envs = Environments(session_backend, repos_dir=layouts[0], cache_dir=base / "verl-swe-cache", sandbox=sandbox)
    yield envs
    envs.close()


async def test_gold_resolves_unflagged_whatever_the_layout(layouts, envs, tmp_path):
    tasks = layouts[1]
    results = await asyncio.gather(*(grade(t, patch, envs, log_dir=tmp_path)
                                     for t in tasks.values() for patch in (t.patch, "")))
    for (gold, empty), task in zip(zip(results[::2], results[1::2]), tasks.values()):
        assert gold.error is None and gold.resolved, (task.instance_id, gold)
        assert not gold.tampered and gold.integrity["reasons"] == [], (task.instance_id, gold.integrity)
        assert {"probe", "sentinels", "files"} <= set(gold.integrity["checks"]), gold.integrity
        assert gold.dropped_files == {}  # testing/ helpers and pyproject.toml metadata are the fix's to change
        assert sorted(gold.tests_status["FAIL_TO_PASS"]["success"]) == sorted(task.FAIL_TO_PASS)
        assert not empty.resolved and not empty.tampered and empty.integrity["reasons"] == [], empty.integrity
    log = (tmp_path / "acme__calc-1" / "test_output.txt").read_text()
    assert "rootdir: /" in log and "tests" in log.split("rootdir: ", 1)[1].splitlines()[0]  # pytest.ini in tests/


FORCE_PASS = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
              "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")


async def test_a_pytest_config_change_in_pyproject_is_undone(layouts, envs):
    # The fix, plus an addopts that loads a plugin passing every test: the pyproject.toml change is restored
    # (the version bump with it), the rest is graded.
    repos, tasks = layouts
    task = tasks["shapes"]
    config = SHAPES_FIX["pyproject.toml"].replace('importlib"', 'importlib -p shapes.forcepass"')
    patch = diff(repos / "acme__shapes", {**SHAPES_FIX, "pyproject.toml": config,
                                           "src/shapes/forcepass.py": FORCE_PASS})
    trick = diff(repos / "acme__shapes", {"pyproject.toml": config, "src/shapes/forcepass.py": FORCE_PASS})
    fixed, tricked = await asyncio.gather(grade(task, patch, envs), grade(task, trick, envs))
    why = {"pyproject.toml": "changes pytest's configuration ([tool.pytest...] in pyproject.toml)"}
    assert fixed.dropped_files == why and fixed.resolved and not fixed.tampered, fixed
    assert tricked.dropped_files == why and not tricked.resolved, tricked


async def test_an_xfail_raised_from_the_package_is_not_a_pass(layouts, envs):
    # swebench counts XFAIL as a pass; here the package itself declares the failing tests expected failures.
    repos, tasks = layouts
    task = tasks["shapes"]
    xfail = ("def close(a, b, tol=1e-9):\n    import pytest\n\n    pytest.xfail('flaky on this platform')\n")
    patch = diff(repos / "acme__shapes", {"src/shapes/testing/compare.py": xfail})
    checked, unchecked = await asyncio.gather(grade(task, patch, envs), grade(task, patch, envs, integrity=False))
    assert unchecked.resolved, f"the trick no longer works unchecked, so this proves nothing: {unchecked}"
    assert not checked.resolved and checked.tampered, checked
    [reason] = checked.integrity["reasons"]
    assert "ended with a skip or xfail" in reason["detail"] and "src/shapes/testing/compare.py" in reason["detail"]


async def test_a_hook_added_to_shipped_test_support_is_still_tampering(layouts, envs):
    # The guard keeps plug/testing/plugin.py (library code, a fix may edit it: the gold patch does, hooks and
    # all, unflagged); a hook there that rewrites reports is the code under test hooking into pytest.
    repos, tasks = layouts
    task = tasks["plug"]
    hook = ("\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
    patch = diff(repos / "acme__plug", {"plug/testing/plugin.py": PLUGIN + hook})
    checked, unchecked = await asyncio.gather(grade(task, patch, envs), grade(task, patch, envs, integrity=False))
    assert unchecked.resolved and not unchecked.dropped_files, unchecked
    assert not checked.resolved and checked.tampered, checked
    assert "machinery" in {r["check"] for r in checked.integrity["reasons"]}, checked.integrity
