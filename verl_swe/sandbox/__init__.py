"""Sandboxes: isolated machines with a persistent shell, behind one async interface.

    async with open_sandbox(DockerSandboxConfig(image=...)) as sb:
        result = await sb.exec("pytest -x", timeout=60)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from typing import AsyncIterator, Awaitable, Callable, Iterator

from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import (
    BASE_IMAGE,
    DockerSandboxConfig,
    Limits,
    LocalSandboxConfig,
    SandboxConfig,
    parse_sandbox_config,
)
from verl_swe.sandbox.shell import SandboxDied, SandboxError, SandboxStartError
from verl_swe.types import ExecResult

__all__ = [
    "BASE_IMAGE", "DockerSandboxConfig", "ExecResult", "Limits", "LocalSandboxConfig", "Sandbox",
    "SandboxConfig", "SandboxDied", "SandboxError", "SandboxStartError", "create_sandbox", "open_sandbox",
    "parse_sandbox_config", "sandboxes_opened_by",
]

Opener = Callable[[DockerSandboxConfig | LocalSandboxConfig], Awaitable[Sandbox]]
_opener: contextvars.ContextVar[Opener | None] = contextvars.ContextVar("verl_swe_sandbox_opener", default=None)


def create_sandbox(config: DockerSandboxConfig | LocalSandboxConfig) -> Sandbox:
    """An unstarted sandbox for `config` (backends are imported lazily)."""
    if isinstance(config, DockerSandboxConfig):
        from verl_swe.sandbox.docker import DockerSandbox

        return DockerSandbox(config)
    if isinstance(config, LocalSandboxConfig):
        from verl_swe.sandbox.local import LocalSandbox

        return LocalSandbox(config)
    raise TypeError(f"not a sandbox config: {config!r}")


@contextlib.contextmanager
def sandboxes_opened_by(opener: Opener) -> Iterator[None]:
    """Inside this block (this task and the tasks it starts), `open_sandbox` gets its started sandbox from
    `opener`: how an episode's placement hands the grader a warm sandbox of the task's image, labelled
    with the run, without the grader knowing about placement."""
    token = _opener.set(opener)
    try:
        yield
    finally:
        _opener.reset(token)


@contextlib.asynccontextmanager
async def open_sandbox(config: DockerSandboxConfig | LocalSandboxConfig | dict) -> AsyncIterator[Sandbox]:
    """Start a sandbox and close it on exit, on error and on cancellation alike."""
    if isinstance(config, dict):
        config = parse_sandbox_config(config)
    opener = _opener.get()
    if opener is not None:
        sandbox = await opener(config)
    else:
        sandbox = create_sandbox(config)
        await sandbox.start()  # cleans up after itself if it fails or is cancelled
    try:
        yield sandbox
    finally:
        await asyncio.shield(sandbox.close())
