"""The one sandbox interface the agent, the grader, curation and RFT use, whatever the backend."""

from __future__ import annotations

import abc
import asyncio
import logging
import posixpath
import shlex
import time
import uuid

from verl_swe.sandbox.admission import START_ADMISSION
from verl_swe.sandbox.config import DockerSandboxConfig, LocalSandboxConfig
from verl_swe.sandbox.shell import PersistentShell, SandboxDied, SandboxError, SandboxFileError, SandboxStartError
from verl_swe.sandbox.usage import SandboxUsage, record_usage
from verl_swe.types import ExecResult

logger = logging.getLogger(__name__)


class Sandbox(abc.ABC):
    """An isolated machine with a persistent shell. Use through `open_sandbox(config)`."""

    _shell: PersistentShell | None = None

    def __init__(self, config: DockerSandboxConfig | LocalSandboxConfig):
        self.config = config
        self._id = f"verl-swe-{uuid.uuid4().hex[:12]}"  # also the container / state-dir name
        self._closed = False
        self._started_at: float | None = None
        self.usage: SandboxUsage | None = None  # set by close()

    async def start(self) -> None:
        """Start the sandbox; on failure, timeout or cancellation, whatever was made is removed.
        Starts pass through the process's admission control (verl_swe/sandbox/admission.py); a failed start
        raises SandboxStartError (the engine's or the host's failure, worth a retry)."""
        try:
            async with START_ADMISSION.slot():
                await asyncio.wait_for(self._start(), self.config.start_timeout_s)
            self._started_at = time.monotonic()
        except BaseException as e:
            await asyncio.shield(self.close())
            if isinstance(e, SandboxStartError) or not isinstance(e, Exception):
                raise
            if isinstance(e, TimeoutError):
                raise SandboxStartError(f"sandbox {self._id} did not start within {self.config.start_timeout_s:g} s") \
                    from e
            raise SandboxStartError(str(e) if isinstance(e, SandboxError) else
                                    f"sandbox {self._id} did not start: {type(e).__name__}: {e}") from e

    @property
    def id(self) -> str:
        return self._id

    @property
    def alive(self) -> bool:
        return self._shell is not None and not self._shell.dead

    async def exec(self, cmd: str, timeout: float | None = None) -> ExecResult:
        """Run `cmd` in the sandbox's shell; cwd and exported variables persist between calls."""
        c = self.config
        try:
            return await self._require_shell().run(
                cmd,
                timeout=c.default_timeout_s if timeout is None else timeout,
                head_bytes=c.output_head_bytes,
                tail_bytes=c.output_tail_bytes,
                kill_after_bytes=c.kill_after_output_bytes,
            )
        except SandboxDied as e:
            raise await self._diagnosed(e) from None

    async def read_file(self, path: str, timeout: float = 60.0) -> str:
        """The file's text (UTF-8, invalid bytes replaced); relative paths start at the shell's cwd."""
        data = await self.read_bytes(path, timeout)
        return data.decode("utf-8", errors="replace")

    async def read_bytes(self, path: str, timeout: float = 60.0) -> bytes:
        q = shlex.quote(path)
        try:
            code, data = await self._require_shell().run_bytes(
                f"if [ -d {q} ]; then echo {q}: is a directory; (exit 21); elif [ ! -e {q} ]; then (exit 2); "
                f"else cat -- {q}; fi",
                timeout,
            )
        except SandboxDied as e:
            raise await self._diagnosed(e) from None
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
        try:
            res = await self._require_shell().run(
                cmd, timeout=timeout, head_bytes=4096, tail_bytes=0, kill_after_bytes=1 << 20, stdin=data
            )
        except SandboxDied as e:
            raise await self._diagnosed(e) from None
        if res.exit_code != 0:
            reason = res.output.strip()
            raise SandboxFileError(f"write_file {path} in sandbox {self.id} failed: {reason}", reason)

    def _require_shell(self) -> PersistentShell:
        if self._shell is None:
            raise SandboxError(f"sandbox {getattr(self, '_id', '?')} is not started")
        if self._shell.dead:
            raise SandboxDied(f"sandbox {self._id} is dead")
        return self._shell

    async def _diagnosed(self, e: SandboxDied) -> SandboxDied:
        """`e` with its cause, as the backend can tell from what is left of the sandbox."""
        if e.cause == "unknown":
            try:
                e.cause = await asyncio.wait_for(self._death_cause(), 10.0)
            except Exception as err:  # noqa: BLE001 - the diagnosis is best effort; "unknown" stays the agent's
                logger.warning("could not tell why sandbox %s died: %s", self._id, err)
            e.args = (f"{e.args[0]} [cause: {e.cause}]",)
        return e

    async def _death_cause(self) -> str:
        """One of shell.AGENT_CAUSES / INFRA_CAUSES; backends look at their container or process."""
        return "unknown"

    async def _cpu_seconds(self) -> float | None:
        """CPU time the sandbox's processes used so far (read before teardown), None if unknown."""
        return None

    async def _record_usage(self) -> None:
        """Called by close() before anything is removed: measure once and report to the open meters."""
        if self.usage is not None or self._started_at is None:
            return
        try:
            cpu = await asyncio.wait_for(self._cpu_seconds(), 5.0)
        except Exception as err:  # noqa: BLE001 - accounting must never fail a close
            logger.debug("no CPU time for sandbox %s: %s", self._id, err)
            cpu = None
        self.usage = SandboxUsage(cpu, round(time.monotonic() - self._started_at, 3))
        record_usage(self.usage)

    @abc.abstractmethod
    async def _start(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None:
        """Kill and remove everything the sandbox holds; idempotent, safe after a failed start."""
