"""Test commands, log parsers and environment keys: pure functions, no sandbox."""

from pathlib import Path

import pytest

from verl_swe.tasks import Task
from verl_swe.tasks.env_plan import EnvBuildError, plan_env
from verl_swe.tasks.spec import DEFAULT_TEST_CMD, SpecError, make_test_spec
from verl_swe.tasks.target import Target

PY311 = Target("3.11.2", "x86_64", "2.36", frozenset({"git", "python3"}))
PY312 = Target("3.12.1", "x86_64", "2.36")

TEST_PATCH = ("diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-a\n+b\n"
              "diff --git a/tests/data/x.json b/tests/data/x.json\nnew file mode 100644\n--- /dev/null\n+++ b/tests/data/x.json\n"
              "@@ -0,0 +1 @@\n+{}\n"
              "diff --git a/tests/test old.py b/tests/test old.py\ndeleted file mode 100644\n--- a/tests/test old.py\n+++ /dev/null\n"
              "@@ -1 +0,0 @@\n-a\n")


def task(**kw) -> Task:
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "b" * 40, "problem_statement": "p",
           "test_patch": TEST_PATCH, "FAIL_TO_PASS": ["tests/test_a.py::test_x"]}
    return Task.model_validate({**row, **kw})


def test_default_spec_runs_the_test_files_of_the_test_patch_with_pytest():
    spec = make_test_spec(task())
    # data files and deleted files are not test targets (swebench's get_test_directives rule)
    assert spec.test_files == ["tests/test_a.py"]
    assert spec.test_cmd == f"{DEFAULT_TEST_CMD} tests/test_a.py" and spec.log_parser == "parse_log_pytest"


def test_rebench_rows_bring_their_own_command_and_parser():
    spec = make_test_spec(task(install_config={"test_cmd": "pytest -n0 -rA", "log_parser": "parse_log_pytest_v2"}))
    assert spec.test_cmd == "pytest -n0 -rA tests/test_a.py" and spec.log_parser == "parse_log_pytest_v2"
    # swebench>=5 rows: their own parser and eval script
    assert make_test_spec(task(log_parser="parse_log_django", eval_script="x")).log_parser == "parse_log_django"


def test_unknown_parser_is_named():
    with pytest.raises(SpecError, match="o__r-1: unknown log_parser 'parse_log_nose'"):
        make_test_spec(task(install_config={"log_parser": "parse_log_nose"}))


def test_env_keys_share_what_can_be_shared():
    cfg = {"pip_packages": ["pytest"], "install": ""}
    a, b = plan_env(task(install_config=cfg), PY311, "img"), plan_env(task(repo="x/y", install_config=cfg), PY311, "img")
    assert a.key == b.key and not a.needs_repo  # nothing reads the repository: one env for all repos
    editable = {**cfg, "install": "pip install -e ."}
    v1 = plan_env(task(install_config=editable, environment_setup_commit="e" * 40), PY311, "img")
    v1_other_task = plan_env(task(install_config=editable, environment_setup_commit="e" * 40, base_commit="c" * 40),
                             PY311, "img")
    v2 = plan_env(task(install_config=editable, environment_setup_commit="f" * 40), PY311, "img")
    assert v1.needs_repo and v1.key == v1_other_task.key != v2.key  # one env per repo version
    assert plan_env(task(install_config=cfg), PY312, "img").key != a.key
    assert plan_env(task(install_config=cfg), PY311, "other-base").key != a.key


def test_build_script_installs_offline_in_order():
    plan = plan_env(task(install_config={"pre_install": ["echo pre"], "pip_packages": ["pytest==8.3.2", "a b"],
                                         "reqs_path": ["requirements/test.txt"], "install": "pip install -e .",
                                         "env_vars": {"X": "1 2"}}), PY311, "img")
    lines = plan.script.splitlines()
    assert any(ln.startswith("export PIP_NO_INDEX=1") for ln in lines[:5])
    # swebench's order: pre_install, the requirement files, pip_packages, then the install line
    order = [lines.index(x) for x in ("export X='1 2'", "echo pre", "pip install -r requirements/test.txt",
                                      "pip install pytest==8.3.2 'a b'", "pip install -e .")]
    assert order == sorted(order)
    # what the host fetches before the offline build: each step's own requirements, from the repository
    fetched = [args for args, _ in plan.fetch_args(Path("/w"))]
    assert ["pytest==8.3.2", "a b"] in fetched and ["-r", "requirements/test.txt"] in fetched and ["."] in fetched


def test_conda_environments_need_a_published_image():
    with pytest.raises(EnvBuildError, match="refused before building: .*conda.*published image"):
        plan_env(task(install_config={"packages": "environment.yml"}), PY311, "img")


def test_swebench_rows_without_install_config_use_the_published_image_name():
    from verl_swe.tasks.env_docker import swebench_image

    # swebench's ImageSpec naming for the `swebench` namespace on Docker Hub
    assert swebench_image("django__django-11099") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"


def test_rows_without_a_parser_get_swebench_parser_for_their_repo():
    # Rows older than swebench 5 name no parser; swebench's map by repository does.
    assert make_test_spec(task(repo="astropy/astropy")).log_parser == "parse_log_pytest_v2"
    assert make_test_spec(task(repo="psf/requests")).log_parser == "parse_log_pytest_options"
    # django and sympy have their own runners: without the row's eval_script or test_cmd, say so
    with pytest.raises(SpecError, match="django/django does not run its tests with pytest"):
        make_test_spec(task(repo="django/django"))
    spec = make_test_spec(task(repo="django/django", eval_script="echo run"))
    assert spec.log_parser == "parse_log_django" and spec.eval_script == "#!/bin/bash\nset -uxo pipefail\necho run\n"
