"""The persistent shell protocol shared by every sandbox backend.

A supervisor inside the sandbox keeps one bash alive and restarts it when it exits; the host writes
commands to bash's stdin and reads one byte stream back. Every command is wrapped as
`__vs_cmd='<cmd>'; __vs_eval </dev/null; printf '<nonce>C<n> %d\\n' $?` (__vs_eval evals it), so cwd and environment persist like in a
terminal, nothing can read the protocol stream as its input (interactive programs see EOF), and the
end of the output is a marker no well-behaved program prints. No process is forked per call on the
fast path, which is what makes a round trip cost well under a millisecond.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import shlex
import time
from dataclasses import dataclass
from importlib import resources
from typing import Awaitable, Callable, Protocol

from verl_swe.types import ExecResult

logger = logging.getLogger(__name__)

# Run inside a sandbox's pid namespace to kill what a command started (each backend enters it its own way).
KILLTREE = resources.files("verl_swe.sandbox").joinpath("killtree.sh").read_text()

# Grace given to the shell to report back after the command's processes were killed; a shell that
# is itself busy (a builtin `while :; do :; done`) never does and is restarted instead.
KILL_GRACE_S = 2.0


class SandboxError(RuntimeError):
    """A sandbox could not be started or used."""


class SandboxStartError(SandboxError):
    """A sandbox did not start (engine error, missing image, start timeout): the infrastructure's failure,
    never the agent's, and often transient (worth a retry)."""


class SandboxFileError(SandboxError):
    """A file operation ran in the sandbox and failed (a path under a file, no permission): the sandbox itself
    answered and is fine. `reason` is what the command said."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # both arguments, so it crosses Ray (pickled) as itself
        return type(self), (str(self), self.reason)


# Why a sandbox died, as its backend could tell afterwards. Only positive evidence of an outside cause counts
# as the infrastructure's: a policy must not be able to turn a failing episode into an excluded one by killing
# its own sandbox, so anything the sandbox's own processes could have done stays the agent's.
AGENT_CAUSES = ("exited", "oom", "unknown")  # its main process ended (e.g. `kill -9 $PPID`); its memory limit
INFRA_CAUSES = ("killed", "removed", "engine", "host_lost")  # signalled from outside; removed; engine or node gone


class SandboxDied(SandboxError):
    """The sandbox is gone (container removed, supervisor killed): nothing more can run in it.

    `cause` is one of AGENT_CAUSES or INFRA_CAUSES; `infra` says whether the infrastructure, not the agent,
    ended it (see `Sandbox` backends: they look at the container's or process's end when the stream closes)."""

    def __init__(self, message: str, cause: str = "unknown"):
        super().__init__(message)
        self.cause = cause

    @property
    def infra(self) -> bool:
        return self.cause in INFRA_CAUSES

    def __reduce__(self):
        return type(self), (str(self), self.cause)


class ShellTransport(Protocol):
    async def read(self) -> bytes:
        """The next chunk of the shell's output; b"" at end of stream."""

    async def write(self, data: bytes) -> None: ...


def supervisor_script(nonce: str, workdir: str) -> str:
    """The sandbox's long-lived command: a loop that (re)starts bash and says so on the stream."""
    wd = shlex.quote(workdir)
    # The supervisor's own stderr goes nowhere: when it reaps a bash that was killed it reports
    # "Killed", which would otherwise land in the next command's output. bash's stderr is its stdout.
    return (
        f"exec 2>/dev/null; mkdir -p {wd}; cd {wd}; "
        f"while :; do sh -c 'printf \"{nonce}S %d\\n\" $$; exec bash --noprofile --norc 2>&1'; "
        f"printf '{nonce}X %d\\n' $?; cd {wd}; done"
    )


def init_script(workdir: str) -> bytes:
    # Interactive programs must never wait for a human: pagers and editors become no-ops.
    return (
        "exec 2>&1; unset HISTFILE; "
        "export PAGER=cat GIT_PAGER=cat MANPAGER=cat SYSTEMD_PAGER=cat EDITOR=true VISUAL=true "
        "TERM=dumb PIP_PROGRESS_BAR=off DEBIAN_FRONTEND=noninteractive "
        # Edits within one second keep the size and mtime of a file: a cached .pyc would hide them.
        "PYTHONDONTWRITEBYTECODE=1; "
        f"cd {shlex.quote(workdir)} 2>/dev/null; "
        # Commands run inside a function so that the killer's SIGUSR1 can abort the rest of the
        # command line (`return` from a trap leaves the function), not only its current process.
        "__vs_eval() { eval \"$__vs_cmd\"; }; trap 'return 137' USR1\n"
    ).encode()


@dataclass
class _Collector:
    """Keeps the head and tail of a command's output within a byte budget, counting what is cut."""

    head_limit: int
    tail_limit: int
    kill_after: int = 1 << 62

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit + 65536:
                del self.tail[: -self.tail_limit]

    def render(self) -> tuple[str, bool]:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        cut = self.total - len(self.head) - len(tail)
        text = self.head.decode("utf-8", errors="replace")
        if cut > 0:
            text += (
                f"\n[... output truncated: {cut} bytes cut from the middle; showing the first "
                f"{len(self.head)} and the last {len(tail)} of {self.total} bytes ...]\n"
            )
        return text + tail.decode("utf-8", errors="replace"), cut > 0


# (shell pid, uptime in centiseconds when the command began, kill the shell too)
KillFn = Callable[[int, int, bool], Awaitable[None]]


class PersistentShell:
    """Runs commands through a supervised bash over `transport`; one command at a time."""

    def __init__(self, transport: ShellTransport, nonce: str, workdir: str, kill: KillFn):
        self._transport = transport
        self._nonce = nonce.encode()
        self._workdir = workdir
        self._kill = kill
        self._events = re.compile(re.escape(self._nonce) + rb"(C(\d+)|S|X|T) (-?\d+)\n")
        self._holdback = len(self._nonce) + 32  # longest marker prefix that may straddle two reads
        self._pending = bytearray()
        self._counter = 0
        self._lock = asyncio.Lock()
        self.shell_pid: int | None = None
        self.dead = False

    @staticmethod
    def new_nonce() -> str:
        return f"\x1e{secrets.token_hex(8)}"

    async def start(self, timeout: float = 60.0) -> None:
        """Wait for the supervisor's first bash and initialise it."""
        async with self._lock:
            await asyncio.wait_for(self._until_started(), timeout)

    async def _until_started(self) -> None:
        while True:
            event, _, _ = await self._next_event(None)
            if event == b"S":
                return

    async def _read_more(self) -> None:
        chunk = await self._transport.read()
        if not chunk:
            self.dead = True
            raise SandboxDied("the sandbox's shell stream closed (sandbox killed or removed)")
        self._pending += chunk

    async def _next_event(self, sink: _Collector | None, flooded: asyncio.Event | None = None) -> tuple[bytes, int, int]:
        """Read until the next marker; output before it goes to `sink` (or is dropped)."""
        while True:
            m = self._events.search(self._pending)
            if m:
                # Read the groups before trimming: a match on a bytearray sees later mutations.
                kind = m.group(1)[:1]
                n = int(m.group(2)) if m.group(2) else 0
                value = int(m.group(3))
                if sink is not None:
                    sink.add(bytes(self._pending[: m.start()]))
                del self._pending[: m.end()]
                if kind == b"S":
                    self.shell_pid = value
                    await self._transport.write(init_script(self._workdir))
                return kind, n, value
            if sink is not None and len(self._pending) > self._holdback:
                cut = len(self._pending) - self._holdback
                sink.add(bytes(self._pending[:cut]))
                del self._pending[:cut]
                if flooded is not None and sink.total > sink.kill_after:
                    flooded.set()
            await self._read_more()

    async def _read_until_end(self, n: int, sink: _Collector, flooded: asyncio.Event) -> tuple[int, bool]:
        """(exit code, whether the shell exited) of command `n`."""
        while True:
            kind, m, value = await self._next_event(sink, flooded)
            if kind == b"C" and m == n:
                return value, False
            if kind == b"T":  # the command's start, in the sandbox's clock (/proc/uptime, 1/100 s)
                self._command_start_cs = value
                sink.reset()  # what came before it (a killed command's last words) is not this command's output
            elif kind == b"C":  # the late marker of an abandoned (cancelled) command: its output is not ours
                sink.reset()
            elif kind == b"X":
                await self._until_started()
                return value, True

    async def run(
        self,
        command: str,
        timeout: float,
        head_bytes: int,
        tail_bytes: int,
        kill_after_bytes: int,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run `command` in the shell. `stdin`, when given, is fed to it (binary-safe); else it reads EOF."""
        sink = _Collector(head_bytes, tail_bytes, kill_after_bytes)
        started = time.monotonic()
        exit_code, restarted, timed_out, flooded = await self._run(command, timeout, sink, stdin)
        output, truncated = sink.render()
        if timed_out:
            output += f"\n[command timed out after {timeout:g} s and was killed]"
        if restarted:
            output += "\n[the shell exited and was restarted: working directory and environment were reset]"
        return ExecResult(exit_code, output, timed_out, truncated or flooded, time.monotonic() - started)

    async def run_bytes(self, command: str, timeout: float) -> tuple[int, bytes]:
        """Run `command` and return its exit code and its whole output as bytes (for file transfer)."""
        sink = _Collector(1 << 62, 0)
        exit_code, _, timed_out, _ = await self._run(command, timeout, sink, None)
        if timed_out:
            raise SandboxError(f"command timed out after {timeout:g} s: {command[:200]}")
        return exit_code, bytes(sink.head)

    async def _run(self, command: str, timeout: float, sink: _Collector, stdin: bytes | None):
        if self.dead:
            raise SandboxDied("the sandbox is dead")
        async with self._lock:
            self._counter += 1
            n = self._counter
            redirect = "" if stdin is not None else " </dev/null"
            nonce = self._nonce.decode()
            # /proc/uptime's two decimals are USER_HZ ticks, the unit of a process's start time: the
            # killer uses it to find every process this command started (see killtree.sh).
            wrapper = (
                f"read -r __vs_t _ </proc/uptime; printf '{nonce}T %s\\n' \"${{__vs_t/./}}\"; "
                f"__vs_cmd={shlex.quote(command)}; __vs_eval{redirect}; printf '{nonce}C{n} %d\\n' $?\n"
            )
            self._command_start_cs = 0  # until the shell reports it: then the killer spares nothing
            flooded = asyncio.Event()
            started = time.monotonic()
            await self._transport.write(wrapper.encode() + (stdin or b""))
            reader = asyncio.ensure_future(self._read_until_end(n, sink, flooded))
            try:
                exit_code, restarted, timed_out = await self._supervise(reader, flooded, started, timeout)
            except BaseException:
                reader.cancel()
                raise
            return exit_code, restarted, timed_out, flooded.is_set()

    async def _supervise(self, reader, flooded, started, timeout) -> tuple[int, bool, bool]:
        flood_wait = asyncio.ensure_future(flooded.wait())
        try:
            done, _ = await asyncio.wait({reader, flood_wait}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            flood_wait.cancel()
        if reader in done:
            return (*reader.result(), False)
        timed_out = not flooded.is_set()
        # Kill everything the command started; the shell then reports the status (137).
        await self._kill(self.shell_pid or -1, self._command_start_cs, False)
        done, _ = await asyncio.wait({reader}, timeout=KILL_GRACE_S)
        if not done:
            # The shell itself is stuck (a builtin loop): kill it too; the supervisor starts a fresh one.
            await self._kill(self.shell_pid or -1, 0, True)
            done, _ = await asyncio.wait({reader}, timeout=30.0)
            if not done:
                self.dead = True
                raise SandboxDied("the sandbox's shell did not come back after it was killed")
        exit_code, restarted = reader.result()
        return (137 if restarted else exit_code), restarted, timed_out
