"""Typed sandbox configs: one per backend, chosen by the `backend` field."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

BASE_IMAGE = "verl-swe/base:bookworm"  # built offline by envs/base/build.sh
LABEL = "verl-swe"  # every container carries it, so `verl-swe sandbox gc` finds them


def owner_id() -> str:
    """Who owns a sandbox: host and driver pid, so `gc` can tell orphans from live sandboxes."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Limits(BaseModel):
    """Per-sandbox resources. Defaults follow the paper's pods: 0.5 CPU and 2 GiB per agent (App. D)."""

    model_config = ConfigDict(extra="forbid")
    cpus: float = Field(0.5, gt=0)
    memory_mb: int = Field(2048, ge=16)
    pids: int = Field(512, ge=8)


class _SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workdir: str = "/testbed"  # where commands start; SWE-bench images keep the repository here
    env: dict[str, str] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    network: bool = False  # no network unless asked for
    default_timeout_s: float = Field(120.0, gt=0)
    # Output kept per command: head and tail, the middle cut with a note (paper: length limits are a gap).
    output_head_bytes: int = Field(16_000, ge=0)
    output_tail_bytes: int = Field(16_000, ge=0)
    # A command printing more than this is killed as a flood (`yes`), reported as truncated.
    kill_after_output_bytes: int = Field(64 << 20, ge=1)
    start_timeout_s: float = Field(120.0, gt=0)
    # The training run (or job) the sandbox belongs to: a docker label / local state field that
    # `verl-swe sandbox gc --run RUN` and a restarted run's sandbox hosts find it by.
    run: str | None = None


class DockerSandboxConfig(_SandboxConfig):
    backend: Literal["docker"] = "docker"
    image: str = BASE_IMAGE
    docker_host: str | None = None  # else DOCKER_HOST or the default socket
    labels: dict[str, str] = Field(default_factory=dict)


class LocalSandboxConfig(_SandboxConfig):
    """A bubblewrap sandbox for machines with no container engine.

    `source_dir` (optional) is copied into a private working copy mounted at `workdir`. The host's
    system directories are mounted read-only; everything else on the host (home, /root, /work, other
    sandboxes) is invisible. `ro_binds` adds host paths (e.g. a task's cached virtualenv) read-only at
    the same path inside.
    """

    backend: Literal["local"] = "local"
    source_dir: Path | None = None
    ro_binds: list[Path] = Field(default_factory=list)
    rw_binds: list[Path] = Field(default_factory=list)
    state_dir: Path = Path("/tmp/verl-swe-sandboxes")


SandboxConfig = Annotated[Union[DockerSandboxConfig, LocalSandboxConfig], Field(discriminator="backend")]
_adapter: TypeAdapter = TypeAdapter(SandboxConfig)


def parse_sandbox_config(data: dict) -> DockerSandboxConfig | LocalSandboxConfig:
    """Build a typed config from a plain mapping (YAML, CLI); errors name the offending key."""
    return _adapter.validate_python(data)
