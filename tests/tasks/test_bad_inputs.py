"""Bad input gets a named reason per task, and the other tasks are still built and graded: a repository
that does not build, a dependency that does not exist for the sandbox's Python, broken install_configs,
tasks that cannot be built offline (another Python, apt packages, network, conda)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verl_swe.reward.evaluate import evaluate
from verl_swe.tasks import Environments, Task, read_tasks
from verl_swe.tasks.env_plan import EnvBuildError, plan_env
from verl_swe.tasks.snapshot import git
from verl_swe.tasks.target import Target

PYPROJECT = ('[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
             '[project]\nname = "widget"\nversion = "0.1"\nrequires-python = ">=3.8"\n')
TEST = "from widget import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
TEST_PATCH = ("diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n--- /dev/null\n"
              "+++ b/tests/test_new.py\n@@ -0,0 +1,5 @@\n+from widget import double\n+\n+\n+def test_negative():\n"
              "+    assert double(-3) == -6\n")
GOLD = ("diff --git a/widget/__init__.py b/widget/__init__.py\n--- a/widget/__init__.py\n+++ b/widget/__init__.py\n"
        "@@ -1,2 +1,2 @@\n def double(x):\n-    return x + x if x > 0 else x\n+    return x + x\n")
SELF_CHECK = "python -c 'import sys; sys.exit(\"widget self-check: no config file found\")'"
PY311 = Target("3.11.2", "x86_64", "2.36", frozenset({"git", "python3"}))


def _repo(root, name, files):
    repo = root / f"acme__{name}"
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def row(name, commit, repo="widget", **install):
    return {"instance_id": f"acme__{name}-1", "repo": f"acme/{repo}", "base_commit": commit,
            "problem_statement": "double(-3) is -3", "patch": GOLD, "test_patch": TEST_PATCH,
            "FAIL_TO_PASS": ["tests/test_new.py::test_negative"], "PASS_TO_PASS": [],
            "install_config": {"pip_packages": ["pytest"], "install": "pip install -e .", **install}}


@pytest.fixture(scope="module")
def bad_batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    repos = root / "repos"
    widget = _repo(repos, "widget", {"pyproject.toml": PYPROJECT, "tests/test_core.py": TEST,
                                     "widget/__init__.py": "def double(x):\n    return x + x if x > 0 else x\n"})
    broken = _repo(repos, "broken", {"setup.py": "raise RuntimeError('setup.py: this project does not build')\n"})
    rows = [
        row("good", widget),
        row("nobuild", broken, repo="broken"),
        row("failstep", widget, install=f"pip install -e . && {SELF_CHECK}"),
        row("nowheel", widget, pip_packages=["pytest", "dataclasses==0.8"]),  # Python < 3.7 only
        row("noreqs", widget, reqs_path=["requirements/missing.txt"]),
        row("oldpython", widget, python="3.9"),
        # a SWE-rebench row as published: its pip freeze, conda leftovers set to None, the project's own -e line
        {**row("rebench", widget, packages="requirements.txt", reqs_path=["requirements.txt"], pre_install=None,
               env_vars=None, env_yml_path=None, no_use_env=None, python="3.11", pip_packages=["pytest"]),
         "requirements": "iniconfig==2.0.0\npytest==8.3.5\n-e git+https://github.com/acme/widget@abc#egg=widget\n",
         "environment": None},
        {**row("badconfig", widget), "install_config": {"install": {"not": "a command"}}},
    ]
    (root / "cache").mkdir()  # one cache for the module's tests: each environment builds once per backend
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = root / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": r["instance_id"], "model_patch": GOLD}) + "\n" for r in rows))
    return root, repos, path, preds


async def test_a_failing_offline_step_is_named_and_the_good_task_graded(bad_batch, session_backend, tmp_path):
    root, repos, tasks_file, _ = bad_batch
    tasks = {t.instance_id: t for t in read_tasks(tasks_file)[0]}
    sandbox = {"state_dir": str(tmp_path / "sandboxes")} if session_backend == "local" else {}
    envs = Environments(session_backend, repos_dir=repos, cache_dir=root / "cache", sandbox=sandbox)
    try:
        errors = await envs.build([tasks["acme__good-1"], tasks["acme__failstep-1"]], workers=2)
        assert errors["acme__good-1"] is None
        headline = errors["acme__failstep-1"].splitlines()[0]
        assert f"`{SELF_CHECK}` (install_config.install) exited 1: widget self-check: no config file found" in headline
        assert f"environment build failed ({session_backend})" in headline
    finally:
        envs.close()


@pytest.mark.local
async def test_each_bad_task_gets_its_reason_and_the_good_one_is_graded(bad_batch, tmp_path):
    root, repos, tasks_file, preds = bad_batch
    envs = Environments("local", repos_dir=repos, cache_dir=root / "cache",
                        sandbox={"state_dir": str(tmp_path / "sandboxes")})
    try:
        report = await evaluate(tasks_file, preds, envs, workers=2, log_dir=tmp_path / "logs")
    finally:
        envs.close()
    got = {k: (v["resolved"], v["error"] or "") for k, v in report.instances.items()}
    assert got["acme__good-1"] == (True, "") and got["acme__rebench-1"] == (True, ""), report.instances
    first = {k: err.splitlines()[0] for k, (_, err) in got.items() if err}
    assert "could not read the metadata of ." in first["acme__nobuild-1"]
    assert "this project does not build" in got["acme__nobuild-1"][1]
    # the offline step that failed, and its own last words, not the head of the build log
    assert f"`{SELF_CHECK}` (install_config.install) exited 1: widget self-check: no config file found" \
        in first["acme__failstep-1"]
    assert "--- full build log: " in got["acme__failstep-1"][1]
    assert "could not fetch pytest dataclasses==0.8 (install_config.pip_packages" in first["acme__nowheel-1"]
    assert "for the sandbox's Python 3.11" in first["acme__nowheel-1"]
    assert "requirements/missing.txt" in first["acme__noreqs-1"] and "install_config.reqs_path" in first["acme__noreqs-1"]
    assert "refused before building: the task needs Python 3.9 (install_config.python)" in first["acme__oldpython-1"]
    assert "published image" in first["acme__oldpython-1"]
    assert len(report.invalid_rows) == 1 and "install_config.install" in report.invalid_rows[0]


@pytest.mark.local
def test_the_cli_table_and_curation_name_the_failing_command(bad_batch, tmp_path):
    from verl_swe.cli import app

    root, repos, tasks_file, preds = bad_batch
    out = tmp_path / "report.json"
    args = ["--instances", str(tasks_file), "--backend", "local", "--repos-dir", str(repos),
            "--cache-dir", str(root / "cache")]
    r = CliRunner().invoke(app, ["evaluate", *args, "--predictions", str(preds), "--output", str(out)],
                           env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    assert "exited 1: widget self-check: no config file found" in r.output
    report = json.loads(out.read_text())["instances"]
    assert "widget self-check: no config file found" in report["acme__failstep-1"]["error"]
    # envs build: exit 1, every failure named, the good task still built
    r = CliRunner().invoke(app, ["envs", "build", *args])
    assert r.exit_code == 1 and "acme__failstep-1" in r.output and "2/7 environments ready" in r.output


@pytest.mark.local
async def test_curation_reason_names_the_failing_step(bad_batch, tmp_path):
    from verl_swe.curate.checks import check_task
    from verl_swe.curate.config import load_config

    root, repos, tasks_file, _ = bad_batch
    tasks = {t.instance_id: t for t in read_tasks(tasks_file)[0]}
    envs = Environments("local", repos_dir=repos, cache_dir=root / "cache",
                        sandbox={"state_dir": str(tmp_path / "sandboxes")})
    try:
        result = await check_task(tasks["acme__failstep-1"], envs, load_config(None), tmp_path / "logs")
    finally:
        envs.close()
    assert result.rule == "environment"
    assert "exited 1: widget self-check: no config file found" in result.reason


def _task(**install) -> Task:
    return Task.model_validate(row("x", "b" * 40, **install))


@pytest.mark.parametrize("install, reason", [
    ({"pre_install": ["apt-get update && apt-get install -y libgdal-dev git"]},
     "Debian packages the sandbox image does not have and cannot fetch offline: libgdal-dev (install_config.pre_install[0])"),
    ({"pre_install": ["curl -sSL https://example.invalid/setup.sh | bash"]}, "needs the network"),
    ({"pre_install": ["conda install -y gdal"]}, "needs conda"),
    ({"packages": "environment.yml"}, "a conda environment needs conda"),
    ({"python": "3.12"}, "needs Python 3.12 (install_config.python); the sandbox has Python 3.11.2"),
])
def test_what_cannot_be_built_offline_is_refused_before_building(install, reason):
    with pytest.raises(EnvBuildError, match="refused before building") as e:
        plan_env(_task(**install), PY311, "img")
    assert reason in str(e.value)


def test_apt_steps_for_packages_the_image_has_are_satisfied_and_the_rest_runs():
    plan = plan_env(_task(pre_install=["apt-get update && apt-get install -y git && echo configured"]), PY311, "img")
    assert [s.command for s in plan.steps][:1] == ["echo configured"]


def test_the_row_freeze_is_installed_without_the_project_itself(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    task = Task.model_validate({**row("x", "b" * 40, packages="requirements.txt"),
                                "requirements": "attrs==23.1.0\n-e git+https://x/acme/widget#egg=widget\n"
                                                "widget @ file:///testbed\nWidget==0.1\n"})
    plan = plan_env(task, PY311, "img", tmp_path)
    assert plan.row_requirements == "attrs==23.1.0\n"  # the project (named in pyproject.toml) is the repository
    assert plan.steps[0].command == 'pip install -r "$WHEELS/row-requirements.txt"'
    assert (["-r", "/w/row-requirements.txt"], "the row's requirements: " + plan.steps[0].command) \
        in plan.fetch_args(__import__("pathlib").Path("/w"))


def test_a_host_without_the_index_names_what_it_could_not_fetch(tmp_path, monkeypatch):
    from verl_swe.tasks.fetch import Fetcher, FetchError

    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # none of this machine's mirrors
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(FetchError) as e:
        Fetcher(PY311, tmp_path).fetch(["attrs==23.1.0"], "install_config.pip_packages", tmp_path)
    assert "could not fetch attrs==23.1.0 (install_config.pip_packages): the host cannot reach the package index" \
        in str(e.value)


def test_requires_python_of_the_repository_is_checked(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace(">=3.8", ">=3.12"))
    with pytest.raises(EnvBuildError, match=r"the project needs Python >=3.12 \(requires-python in ./pyproject.toml\)"):
        plan_env(_task(), PY311, "img", tmp_path)
