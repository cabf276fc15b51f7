"""Environments built from install_config for a repository in --repos-dir, on both backends."""

import pytest

from verl_swe.reward.grading import grade
from verl_swe.sandbox import open_sandbox
from verl_swe.tasks import Environments, Task
from verl_swe.tasks.snapshot import git

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "widget"
version = "0.1"
"""
BUGGY = "def double(x):\n    return x + x if x > 0 else x\n"
FIXED = "def double(x):\n    return x + x\n"
TESTS = "from widget import double\n\n\ndef test_positive():\n    assert double(2) == 4\n"
NEW_TEST = "\n\ndef test_negative():\n    assert double(-3) == -6\n"


def commit(repo, files: dict[str, str], msg: str) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", msg, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def diff(repo, path: str, new_text: str) -> str:
    old = (repo / path).read_text()
    (repo / path).write_text(new_text)
    out = git("diff", "--", path, cwd=repo) + "\n"
    (repo / path).write_text(old)
    return out


@pytest.fixture(scope="module")
def widget(tmp_path_factory):
    repos = tmp_path_factory.mktemp("repos")
    repo = repos / "acme__widget"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    setup = commit(repo, {"pyproject.toml": PYPROJECT, "widget/__init__.py": "from widget.core import double\n",
                          "widget/core.py": "def double(x):\n    return 2 * x\n", "tests/__init__.py": "",
                          "tests/test_core.py": TESTS}, "setup")
    base = commit(repo, {"widget/core.py": BUGGY}, "a regression")
    row = {"instance_id": "acme__widget-2", "repo": "acme/widget", "base_commit": base,
           "environment_setup_commit": setup, "problem_statement": "double(-3) is -3",
           "patch": diff(repo, "widget/core.py", FIXED),
           "test_patch": diff(repo, "tests/test_core.py", TESTS + NEW_TEST),
           "FAIL_TO_PASS": ["tests/test_core.py::test_negative"], "PASS_TO_PASS": ["tests/test_core.py::test_positive"],
           "install_config": {"pip_packages": ["pytest"], "install": "pip install -e ."}}
    future = commit(repo, {"widget/core.py": FIXED}, "the fix, later in history")
    return repos, Task.model_validate(row), future


async def test_editable_install_from_repos_dir_grades_and_hides_history(widget, session_backend, tmp_path_factory):
    repos, task, future = widget
    cache = tmp_path_factory.getbasetemp() / "verl-swe-cache"
    sandbox = {"state_dir": str(tmp_path_factory.getbasetemp() / "sandboxes")} if session_backend == "local" else {}
    envs = Environments(session_backend, repos_dir=repos, cache_dir=cache, sandbox=sandbox)
    try:
        config = await envs.prepare(task)
        async with open_sandbox(config) as box:
            where = await box.exec("python -c 'import widget; print(widget.__file__)'")
            assert where.output.strip() == "/testbed/widget/__init__.py"  # the editable install follows /testbed
            assert (await box.read_file("widget/core.py")) == BUGGY  # base_commit, not the setup commit
            history = await box.exec(f"git log --oneline --all | wc -l; git cat-file -e {future} || echo hidden; "
                                     "git status --porcelain")
            assert history.output.split() == ["1", "hidden"]
        gold = await grade(task, task.patch, envs)
        empty = await grade(task, "", envs)
        assert gold.resolved and gold.error is None, gold
        assert not empty.resolved and empty.tests_status["FAIL_TO_PASS"]["failure"] == task.FAIL_TO_PASS
    finally:
        envs.close()


async def test_missing_repository_is_an_error_naming_where_it_looked(widget, tmp_path, monkeypatch):
    repos, task, _ = widget
    monkeypatch.setenv("VERL_SWE_GIT_URL", f"file://{tmp_path}/mirror/{{repo}}.git")  # no network in tests
    envs = Environments("local", repos_dir=repos, cache_dir=tmp_path)
    ghost = Task.model_validate({**task.model_dump(), "repo": "acme/ghost", "instance_id": "acme__ghost-1"})
    result = await grade(ghost, ghost.patch, envs)
    envs.close()
    assert not result.resolved
    assert f"not in --repos-dir {repos}" in result.error and f"cloning file://{tmp_path}/mirror/acme/ghost.git failed" in result.error


@pytest.mark.docker
async def test_a_task_with_a_published_image_runs_in_it(mini_tasks, tmp_path_factory):
    pager = mini_tasks["verl-swe-mini__pager-1"]
    envs = Environments("docker", cache_dir=tmp_path_factory.getbasetemp() / "verl-swe-cache")
    try:
        image = (await envs.prepare(pager)).image  # stands in for a registry image, present locally
        published = Task.model_validate({**pager.model_dump(), "install_config": None, "docker_image": image})
        config = await envs.prepare(published)
        # the published image with its repository re-created as one commit (tests/tasks/test_one_commit.py)
        assert config.image.startswith("verl-swe/one-commit:") and config.image != image
        assert (await grade(published, published.patch, envs)).resolved
        missing = Task.model_validate({**published.model_dump(), "image": "verl-swe/no-such-image:1"})
        result = await grade(missing, missing.patch, envs)
        assert "verl-swe/no-such-image:1 is not available" in result.error and "no install_config" in result.error
    finally:
        envs.close()


@pytest.mark.local
async def test_a_requirement_only_the_offline_build_names_is_fetched_and_the_build_rerun(tmp_path, caplog):
    # setup_requires in setup.py is a dynamic build requirement: no static reading finds it, the offline
    # pip asks for it, and the host fetches it before the build runs again.
    repos = tmp_path / "repos"
    repo = repos / "acme__legacy"
    repo.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo)
    setup = ("from setuptools import setup\nsetup(name='legacy', version='1.0', py_modules=['legacy'], "
             "setup_requires=['six'])\n")  # nothing else here needs six
    base = commit(repo, {"setup.py": setup, "legacy.py": "X = 1\n", "test_legacy.py": "def test_x():\n    pass\n"},
                  "base")
    task = Task.model_validate({
        "instance_id": "acme__legacy-1", "repo": "acme/legacy", "base_commit": base, "problem_statement": "p",
        "test_patch": "", "FAIL_TO_PASS": ["test_legacy.py::test_x"],
        "install_config": {"pip_packages": ["pytest"], "install": "pip install -e ."}})
    envs = Environments("local", repos_dir=repos, cache_dir=tmp_path / "cache",
                        sandbox={"state_dir": str(tmp_path / "sandboxes")})
    caplog.set_level("INFO", logger="verl_swe.tasks.env_build")
    try:
        config = await envs.prepare(task)
        async with open_sandbox(config) as box:
            assert (await box.exec("python -c 'import legacy; print(legacy.X)'")).output.strip() == "1"
        assert "the offline build asked for ['six']" in caplog.text
    finally:
        envs.close()
    logs = list((tmp_path / "cache" / "build-logs").glob("local-*.log"))
    assert len(logs) == 1 and "Successfully installed legacy" in logs[0].read_text()
