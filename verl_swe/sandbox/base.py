"""The one sandbox interface the agent, the grader, curation and RFT use, whatever the backend."""

from __future__ import annotations

import abc
import asyncio
import posixpath
import shlex
import uuid

from verl_swe.sandbox.config import DockerSandboxConfig, LocalSandboxConfig
from verl_swe.sandbox.shell import PersistentShell, SandboxDied, SandboxError, SandboxFileError
from verl_swe.types import ExecResult


class Sandbox(abc.ABC):
    """An isolated machine with a persistent shell. Use through `open_sandbox(config)`."""

    _shell: PersistentShell | None = None

    def __init__(self, config: DockerSandboxConfig | LocalSandboxConfig):
        self.config = config
        self._id = f"verl-swe-{uuid.uuid4().hex[:12]}"  # also the container / state-dir name
        self._closed = False

    async def start(self) -> None:
        """Start the sandbox; on failure, timeout or cancellation, whatever was made is removed."""
        try:
            await asyncio.wait_for(self._start(), self.config.start_timeout_s)
        except BaseException:
            await asyncio.shield(self.close())
            raise

    @property
    def id(self) -> str:
        return self._id

    @property
    def alive(self) -> bool:
        return self._shell is not None and not self._shell.dead

    async def exec(self, cmd: str, timeout: float | None = None) -> ExecResult:
        """Run `cmd` in the sandbox's shell; cwd and exported variables persist between calls."""
        c = self.config
        return await self._require_shell().run(
            cmd,
            timeout=c.default_timeout_s if timeout is None else timeout,
            head_bytes=c.output_head_bytes,
            tail_bytes=c.output_tail_bytes,
            kill_after_bytes=c.kill_after_output_bytes,
        )

    async def read_file(self, path: str, timeout: float = 60.0) -> str:
        """The file's text (UTF-8, invalid bytes replaced); relative paths start at the shell's cwd."""
        data = await self.read_bytes(path, timeout)
        return data.decode("utf-8", errors="replace")

    async def read_bytes(self, path: str, timeout: float = 60.0) -> bytes:
        q = shlex.quote(path)
        code, data = await self._require_shell().run_bytes(
            f"if [ -d {q} ]; then echo {q}: is a directory; (exit 21); elif [ ! -e {q} ]; then (exit 2); "
            f"else cat -- {q}; fi",
            timeout,
        )
        if code == 2:
            raise FileNotFoundError(f"{path}: no such file in sandbox {self.id}")
        if code != 0:
            reason = data[-500:].decode(errors="replace").strip()
            raise SandboxFileError(f"read_file {path} in sandbox {self.id} failed: {reason}", reason)
        return data

    async def write_file(self, path: str, content: str | bytes, timeout: float = 60.0) -> None:
        """Create or replace a file (parents created); binary-safe, streamed through the shell."""
        data = content.encode() if isinstance(content, str) else content
        parent = posixpath.dirname(path) or "."
        cmd = f"mkdir -p -- {shlex.quote(parent)} && head -c {len(data)} > {shlex.quote(path)}"
        res = await self._require_shell().run(
            cmd, timeout=timeout, head_bytes=4096, tail_bytes=0, kill_after_bytes=1 << 20, stdin=data
        )
        if res.exit_code != 0:
            reason = res.output.strip()
            raise SandboxFileError(f"write_file {path} in sandbox {self.id} failed: {reason}", reason)

    def _require_shell(self) -> PersistentShell:
        if self._shell is None:
            raise SandboxError(f"sandbox {getattr(self, '_id', '?')} is not started")
        if self._shell.dead:
            raise SandboxDied(f"sandbox {self._id} is dead")
        return self._shell

    @abc.abstractmethod
    async def _start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None:
        """Kill and remove everything the sandbox holds; idempotent, safe after a failed start."""
