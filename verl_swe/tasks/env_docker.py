"""Docker environments: the task's published image, or images built offline on the base image.

Two cached layers: `verl-swe/env:<key>` holds the virtualenv at /opt/venv (one per environment key),
`verl-swe/task:<key>` adds the task's one-commit repository at /testbed (one per task). A published or harbor
image gets `verl-swe/one-commit:<key>`: its repository re-created as one commit (no history beyond it).
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tempfile
from pathlib import Path

from verl_swe.files import write_text_atomic
from verl_swe.sandbox.config import BASE_IMAGE, LABEL, DockerSandboxConfig
from verl_swe.sandbox.docker import docker_client
from verl_swe.tasks.env_build import build_offline, fetch_all
from verl_swe.tasks.env_plan import EnvBuildError, needs_repo, plan_env
from verl_swe.tasks.repos import RepoStore, file_lock
from verl_swe.tasks.schema import Task
from verl_swe.tasks.snapshot import ONE_COMMIT_SH
from verl_swe.tasks.target import PROBE, Target

logger = logging.getLogger(__name__)
VENV = "/opt/venv"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# SWE-bench's published images keep the environment in a conda env named "testbed".
SWEBENCH_IMAGE_PATH = f"/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/bin:{DEFAULT_PATH}"


def swebench_image(instance_id: str) -> str:
    """The published SWE-bench image of an instance (swebench's ImageSpec naming, namespace `swebench`)."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


def _image_exists(client, name: str) -> bool:
    import docker

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def image_target(base_image: str, docker_host: str | None, cache_dir: Path) -> tuple[Target, str]:
    """(the interpreter and platform of the base image, image id), to fetch what fits it; cached per image id."""
    client = docker_client(docker_host)
    image_id = client.images.get(base_image).id
    known = cache_dir / "image-target" / image_id.replace(":", "_")
    if not known.exists():
        out = client.containers.run(base_image, ["python3", "-c", PROBE], remove=True, network_mode="none")
        # atomic: a concurrent prepare of the same image must never read a half-written file
        write_text_atomic(known, out.decode())
    return Target.from_probe(known.read_text()), image_id


def _build_log(chunks) -> str:
    text = "".join(x.get("stream", "") or x.get("error", "") for x in chunks if isinstance(x, dict))
    return re.sub(r"\x1b\[[0-9;]*m", "", text)  # the classic builder colours a step's stderr


def _try_build(client, context: Path, tag: str, labels: dict[str, str]) -> tuple[bool, str]:
    import docker

    try:
        _, chunks = client.images.build(path=str(context), tag=tag, network_mode="none", rm=True, forcerm=True,
                                        labels={LABEL: "env", **labels})
        return True, _build_log(chunks)
    except docker.errors.BuildError as e:
        return False, _build_log(e.build_log) + f"\n{e.msg}\n"


def _build(client, context: Path, tag: str, labels: dict[str, str]) -> None:
    ok, log = _try_build(client, context, tag, labels)
    if not ok:
        raise EnvBuildError(f"building {tag} failed: {log.strip().splitlines()[-1]}\n{log[-2500:]}")


def prepare_docker(task: Task, store: RepoStore, template: DockerSandboxConfig) -> DockerSandboxConfig:
    """Blocking: make sure the task's image exists; returns the sandbox config that runs it."""
    import docker

    try:
        return _prepare(task, store, template)
    except docker.errors.DockerException as e:
        raise EnvBuildError(f"{task.instance_id}: docker engine error: {e}") from None


def _prepare(task: Task, store: RepoStore, template: DockerSandboxConfig) -> DockerSandboxConfig:
    client = docker_client(template.docker_host)
    if task.meta.get("harbor"):
        return _prepare_harbor(client, task, task.meta["harbor"], store, template)
    image = task.image or (swebench_image(task.instance_id) if task.install_config is None else None)
    if image and (_image_exists(client, image) or _try_pull(client, image)):
        # Other images keep the PATH their own ENV sets.
        env = {"PATH": SWEBENCH_IMAGE_PATH} if "sweb.eval" in image else {}
        one = one_commit_image(client, image, template.workdir, store.cache_dir, task.instance_id)
        return template.model_copy(update={"image": one, "env": {**env, **template.env}})
    if task.install_config is None:
        raise EnvBuildError(f"{task.instance_id}: image {image} is not available and cannot be pulled here, "
                            "and the task has no install_config to build one from")
    base = template.image if template.image else BASE_IMAGE
    if not _image_exists(client, base):
        raise EnvBuildError(f"base image {base} is missing: run envs/base/build.sh")
    target, base_id = image_target(base, template.docker_host, store.cache_dir)
    setup_repo = store.snapshot(task, task.setup_commit) if needs_repo(task) else None
    plan = plan_env(task, target, base_id, setup_repo)
    env_tag = f"verl-swe/env:{plan.key}"
    with file_lock(store.cache_dir / "locks" / f"docker-env-{plan.key}.lock"):
        if not _image_exists(client, env_tag):
            with tempfile.TemporaryDirectory(prefix="verl-swe-build-") as ctx:
                ctx = Path(ctx)
                if plan.needs_repo:
                    shutil.copytree(setup_repo, ctx / "repo", symlinks=True)
                else:
                    (ctx / "repo").mkdir()
                fetcher = fetch_all(plan, target, ctx / "wheels", ctx / "repo" if plan.needs_repo else None,
                                    task.instance_id)
                (ctx / "build.sh").write_text(plan.script)
                env_lines = "".join(f"ENV {k}={_quote(v)}\n" for k, v in plan.env_vars.items())
                (ctx / "Dockerfile").write_text(
                    f"FROM {base}\nCOPY wheels /tmp/wheels\nCOPY repo /testbed\nCOPY build.sh /tmp/build.sh\n"
                    f"WORKDIR /testbed\nRUN VENV={VENV} WHEELS=/tmp/wheels bash /tmp/build.sh"
                    " && rm -rf /tmp/wheels /tmp/build.sh\n"
                    f"ENV PATH={VENV}/bin:{DEFAULT_PATH} VIRTUAL_ENV={VENV}\n{env_lines}"
                )
                logger.info("building %s for %s", env_tag, task.instance_id)
                build_offline(plan, fetcher, lambda: _try_build(client, ctx, env_tag, {"verl-swe.env-key": plan.key}),
                              store.cache_dir / "build-logs" / f"docker-{plan.key}.log", task.instance_id, "docker")
    task_key = hashlib.sha256(f"{plan.key}/{task.repo}@{task.base_commit}".encode()).hexdigest()[:16]
    task_tag = f"verl-swe/task:{task_key}"
    with file_lock(store.cache_dir / "locks" / f"docker-task-{task_key}.lock"):
        if not _image_exists(client, task_tag):
            with tempfile.TemporaryDirectory(prefix="verl-swe-build-") as ctx:
                ctx = Path(ctx)
                shutil.copytree(store.snapshot(task, task.base_commit), ctx / "repo", symlinks=True)
                # The repository replaces the install-time copy; editable installs point at /testbed.
                (ctx / "Dockerfile").write_text(f"FROM {env_tag}\nRUN rm -rf /testbed\nCOPY repo /testbed\n")
                _build(client, ctx, task_tag, {"verl-swe.instance": task.instance_id})
    return template.model_copy(update={"image": task_tag})


def one_commit_image(client, image: str, workdir: str, cache_dir: Path, instance_id: str) -> str:
    """`image` with the repository in `workdir` re-created as one commit (snapshot.ONE_COMMIT_SH): a published
    image keeps its project's whole .git, later commits (the fix) and tags included. Cached per image id."""
    digest = hashlib.sha256(f"{image}/{client.images.get(image).id}/{workdir}".encode()).hexdigest()[:16]
    tag = f"verl-swe/one-commit:{digest}"
    with file_lock(cache_dir / "locks" / f"one-commit-{digest}.lock"):
        if not _image_exists(client, tag):
            with tempfile.TemporaryDirectory(prefix="verl-swe-build-") as ctx:
                (Path(ctx) / "one_commit.sh").write_text(ONE_COMMIT_SH)
                (Path(ctx) / "Dockerfile").write_text(
                    f"FROM {image}\nCOPY one_commit.sh /tmp/verl_swe_one_commit.sh\n"
                    f"RUN sh /tmp/verl_swe_one_commit.sh {_quote(workdir)} && rm /tmp/verl_swe_one_commit.sh\n")
                ok, log = _try_build(client, Path(ctx), tag, {"verl-swe.instance": instance_id})
                if not ok:
                    raise EnvBuildError(f"{instance_id}: re-creating {workdir} of {image} as one commit failed "
                                        f"(does the image have git?):\n{log.strip()[-1000:]}")
    return tag


def _prepare_harbor(client, task: Task, harbor: dict, store: RepoStore,
                    template: DockerSandboxConfig) -> DockerSandboxConfig:
    """A harbor task's image: its task.toml docker_image when present here, else its environment/Dockerfile
    built with no network; then the working directory as a one-commit repository."""
    env_dir = Path(harbor["dir"]) / "environment"
    image = harbor.get("docker_image")
    if not (image and _image_exists(client, image)):
        image = f"verl-swe/harbor-env:{harbor['environment_hash']}"
        with file_lock(store.cache_dir / "locks" / f"harbor-{harbor['environment_hash']}.lock"):
            if not _image_exists(client, image):
                ok, log = _try_build(client, env_dir, image, {"verl-swe.instance": task.instance_id})
                if not ok:
                    last = log.strip().splitlines()[-1] if log.strip() else "no output"
                    raise EnvBuildError(f"{task.instance_id}: building the harbor environment {env_dir}/Dockerfile "
                                        f"failed: {last[:300]}. Builds here have no network and pull nothing: "
                                        f"FROM an image present locally (e.g. {BASE_IMAGE})\n{log[-2500:]}")
    workdir = client.images.get(image).attrs["Config"].get("WorkingDir") or "/"
    if workdir == "/":
        raise EnvBuildError(f"{task.instance_id}: {env_dir}/Dockerfile sets no WORKDIR: the agent's working "
                            "directory (and its patch) would be the whole filesystem")
    # The agent's changes are a `git diff` of its working directory, so that directory becomes one commit.
    tag = one_commit_image(client, image, workdir, store.cache_dir, task.instance_id)
    return template.model_copy(update={"image": tag, "workdir": workdir})


def _quote(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _try_pull(client, image: str) -> bool:
    try:
        client.images.pull(image)
        return True
    except Exception as e:  # no registry here, or no such image: fall back to building
        logger.info("pulling %s failed (%s); building from install_config", image, str(e)[:200])
        return False


