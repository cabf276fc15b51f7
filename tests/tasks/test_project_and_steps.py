"""Static facts of a project, install lines as steps, and the sandbox's platform tags: pure functions."""

import io
import tarfile

import pytest
from packaging.tags import Tag

from verl_swe.tasks import Task
from verl_swe.tasks.project import ProjectError, read_project, read_sdist, scm_pretend_var
from verl_swe.tasks.steps import pip_install_args, plan_steps
from verl_swe.tasks.target import Target

PY311 = Target("3.11.2", "x86_64", "2.36")


def test_build_requirements_by_backend(tmp_path):
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(python_requires='>=3.7')\n")
    legacy = read_project(tmp_path)
    assert legacy.all_build_requires() == ["setuptools>=40.8.0", "wheel"] and legacy.requires_python == ">=3.7"
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = my.pkg\n[options]\nsetup_requires =\n  setuptools_scm>=6\n")
    cfg = read_project(tmp_path)
    assert cfg.name == "my.pkg" and cfg.uses_scm_version and "setuptools_scm>=6" in cfg.all_build_requires()
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["hatchling", "hatch-vcs"]\n'
                                             'build-backend = "hatchling.build"\n[project]\nname = "x"\n')
    hatch = read_project(tmp_path)
    assert hatch.all_build_requires() == ["hatchling", "hatch-vcs", "setuptools_scm>=6"] and hatch.uses_scm_version
    (tmp_path / "pyproject.toml").write_text('[tool.poetry]\nname = "p"\n[tool.poetry.dependencies]\npython = "^3.8"\n'
                                             '[build-system]\nrequires = ["poetry-core"]\n'
                                             'build-backend = "poetry.core.masonry.api"\n')
    poetry = read_project(tmp_path)
    assert poetry.requires_python == ">=3.8,<4" and "wheel" not in poetry.all_build_requires()
    (tmp_path / "pyproject.toml").write_text("[build-system\n")
    with pytest.raises(ProjectError, match="pyproject.toml is not valid TOML"):
        read_project(tmp_path)
    assert read_project(tmp_path / "nothing-here") is None
    assert scm_pretend_var("my.pkg-name") == "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_MY_PKG_NAME"


def test_sdist_build_requirements(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        data = b'[build-system]\nrequires = ["flit_core>=3.2,<4"]\nbuild-backend = "flit_core.buildapi"\n'
        info = tarfile.TarInfo("pkg-1.0/pyproject.toml")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    (tmp_path / "pkg-1.0.tar.gz").write_bytes(buf.getvalue())
    assert read_sdist(tmp_path / "pkg-1.0.tar.gz").all_build_requires() == ["flit_core>=3.2,<4"]


@pytest.mark.parametrize("line, args", [
    ('pip install -e ".[test,docs]"', [".[test,docs]"]),
    ("python -m pip install --upgrade -r requirements/dev.txt -c constraints.txt --no-deps .", [
        "-r", "requirements/dev.txt", "-c", "constraints.txt", "--no-deps", "."]),
    ("pip3 install --target=/tmp/x --index-url https://mirror/simple 'foo>=1'", [
        "--index-url", "https://mirror/simple", "foo>=1"]),
    ("pip uninstall -y foo", None),
    ("make install", None),
])
def test_pip_install_lines(line, args):
    import shlex

    assert pip_install_args(shlex.split(line)) == args


def test_install_line_as_steps():
    task = Task.model_validate({
        "instance_id": "o__r-1", "repo": "o/r", "base_commit": "b" * 40, "problem_statement": "p", "test_patch": "",
        "FAIL_TO_PASS": ["t"], "install_config": {
            "pre_install": ["apt-get update", "sed -i s/a/b/ setup.cfg && pip install cython"],
            "install": "pip install -r req.txt && pip install -e '.[test]'; python setup.py develop"}})
    plan = plan_steps(task)
    assert [(s.command, s.fetch, s.local_projects) for s in plan.steps] == [
        ("sed -i s/a/b/ setup.cfg", (), ()),
        ("pip install cython", ("cython",), ()),
        ("pip install -r req.txt", ("-r", "req.txt"), ()),
        ("pip install -e '.[test]'", (".[test]",), (".",)),
        # setup.py develop would fetch with easy_install: pip installs the project and its dependencies first
        ("pip install .", (".",), (".",)),
        ("python setup.py develop", (), ()),
    ]
    assert plan.notes == ["install_config.pre_install[0]: `apt-get update` skipped (nothing to do without a network)"]


def test_sandbox_platform_tags():
    assert PY311.platforms()[0] == "manylinux_2_36_x86_64" and "manylinux2014_x86_64" in PY311.platforms()
    tags = PY311.supported_tags()
    assert Tag("cp311", "cp311", "manylinux_2_17_x86_64") in tags and Tag("py3", "none", "any") in tags
    assert Tag("cp312", "cp312", "manylinux_2_17_x86_64") not in tags
    assert Tag("cp311", "cp311", "manylinux_2_39_x86_64") not in tags  # newer glibc than the sandbox's
    assert PY311.python_problem(">=3.8,<3.11", "requires-python").startswith("needs Python >=3.8,<3.11")
    assert PY311.python_problem("3.11", "install_config.python") is None
