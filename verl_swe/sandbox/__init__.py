"""Sandboxes: isolated machines with a persistent shell, behind one async interface.

    async with open_sandbox(DockerSandboxConfig(image=...)) as sb:
        result = await sb.exec("pytest -x", timeout=60)
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import (
    BASE_IMAGE,
    DockerSandboxConfig,
    Limits,
    LocalSandboxConfig,
    SandboxConfig,
    parse_sandbox_config,
)
from verl_swe.sandbox.shell import SandboxDied, SandboxError
from verl_swe.types import ExecResult

__all__ = [
    "BASE_IMAGE", "DockerSandboxConfig", "ExecResult", "Limits", "LocalSandboxConfig", "Sandbox",
    "SandboxConfig", "SandboxDied", "SandboxError", "create_sandbox", "open_sandbox", "parse_sandbox_config",
]


def create_sandbox(config: DockerSandboxConfig | LocalSandboxConfig) -> Sandbox:
    """An unstarted sandbox for `config` (backends are imported lazily)."""
    if isinstance(config, DockerSandboxConfig):
        from verl_swe.sandbox.docker import DockerSandbox

        return DockerSandbox(config)
    if isinstance(config, LocalSandboxConfig):
        from verl_swe.sandbox.local import LocalSandbox

        return LocalSandbox(config)
    raise TypeError(f"not a sandbox config: {config!r}")


@contextlib.asynccontextmanager
async def open_sandbox(config: DockerSandboxConfig | LocalSandboxConfig | dict) -> AsyncIterator[Sandbox]:
    """Start a sandbox and close it on exit, on error and on cancellation alike."""
    if isinstance(config, dict):
        config = parse_sandbox_config(config)
    sandbox = create_sandbox(config)
    await sandbox.start()  # cleans up after itself if it fails or is cancelled
    try:
        yield sandbox
    finally:
        await asyncio.shield(sandbox.close())
