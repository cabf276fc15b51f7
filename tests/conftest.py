"""Shared fixtures: which sandbox backends this machine can run.

A backend that cannot run here is skipped with the reason, except under CI
(VERL_SWE_REQUIRE_BACKENDS=1), where a missing engine is a failure, not a skip.
"""

from __future__ import annotations

import functools
import os
import shutil

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@functools.lru_cache(maxsize=None)
def docker_problem() -> str | None:
    try:
        import docker

        client = docker.from_env()
        client.ping()
        client.images.get("verl-swe/base:bookworm")
    except Exception as e:  # noqa: BLE001 - any failure means the backend is unusable here
        return f"docker backend unavailable: {e} (start dockerd and run envs/base/build.sh)"
    return None


@functools.lru_cache(maxsize=None)
def local_problem() -> str | None:
    if shutil.which("bwrap") is None:
        return "local backend unavailable: bubblewrap is not installed"
    return None


def require(problem: str | None) -> None:
    if problem is None:
        return
    if os.environ.get("VERL_SWE_REQUIRE_BACKENDS") == "1":
        pytest.fail(problem)
    pytest.skip(problem)


@pytest.fixture(params=["docker", "local"])
def backend(request) -> str:
    require(docker_problem() if request.param == "docker" else local_problem())
    return request.param


@pytest.fixture
def make_config(backend, tmp_path):
    """Build a config for the current backend; local sandboxes keep their state under tmp_path."""
    from verl_swe.sandbox import DockerSandboxConfig, LocalSandboxConfig

    def make(**kw):
        if backend == "docker":
            return DockerSandboxConfig(**kw)
        kw.setdefault("state_dir", tmp_path / "sandboxes")
        return LocalSandboxConfig(**kw)

    return make


@pytest.fixture(scope="session")
def mini_tasks():
    """The bundled envs/mini suite, by instance id."""
    from verl_swe.tasks import load_tasks
    from verl_swe.tasks.repos import mini_dir

    return {t.instance_id: t for t in load_tasks(mini_dir() / "tasks.jsonl")}


@pytest.fixture(scope="session", params=["docker", "local"])
def session_backend(request) -> str:
    require(docker_problem() if request.param == "docker" else local_problem())
    return request.param


@pytest.fixture(scope="session")
def task_envs(session_backend, tmp_path_factory):
    """`Environments` for the backend, with one cache for the whole session (each env builds once)."""
    from verl_swe.tasks import Environments

    cache = tmp_path_factory.getbasetemp() / "verl-swe-cache"
    sandbox = {"state_dir": str(tmp_path_factory.getbasetemp() / "sandboxes")} if session_backend == "local" else {}
    envs = Environments(session_backend, cache_dir=cache, sandbox=sandbox)
    yield envs
    envs.close()


def pytest_collection_modifyitems(config, items):
    # Backend-parametrized tests carry their backend's marker, so `-m docker` / `-m local` select them.
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        backend = params.get("backend") or params.get("session_backend")
        if backend:
            item.add_marker(getattr(pytest.mark, backend))


def pytest_runtest_setup(item):
    if item.get_closest_marker("docker"):
        require(docker_problem())
    if item.get_closest_marker("local"):
        require(local_problem())
