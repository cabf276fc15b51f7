"""The agent-computer interface of the paper's scaffold (App. F): a shell plus file-viewer commands.

File commands run on the host side through the sandbox's read/write calls (no helper scripts are
installed in the sandbox, so any image works); shell commands run in the sandbox's persistent shell.
Every observation ends with the prompt line "(Current directory: ..., current file: ...) bash-$".
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.shell import SandboxFileError
from verl_swe.types import Action

WINDOW = 100  # lines shown by open/goto/scroll (SWE-agent's default)
MAX_SEARCH_HITS = 100
# File commands read the whole file to the host: `open /dev/zero` or a 2 GB log must be refused, not read.
MAX_FILE_BYTES = 8 << 20


class CommandError(Exception):
    """A usage error the agent sees as its observation."""


@dataclass
class ViewerState:
    cwd: str = "/testbed"
    file: str | None = None  # absolute path of the open file
    first: int = 1  # first line shown


class ACI:
    def __init__(self, sandbox: Sandbox, command_timeout_s: float = 120.0, window: int = WINDOW):
        self.box = sandbox
        self.timeout = command_timeout_s
        self.window = window
        self.state = ViewerState(cwd=sandbox.config.workdir)

    def prompt_line(self) -> str:
        return f"(Current directory: {self.state.cwd}, current file: {self.state.file or 'n/a'}) bash-$"

    async def run(self, action: Action) -> str:
        """The observation for `action` (without the prompt line). Sandbox faults propagate."""
        try:
            handler = getattr(self, f"_{action.tool}")
        except AttributeError:
            return f"Unknown command {action.tool!r}."
        try:
            return await handler(**action.args)
        except CommandError as e:
            return str(e)
        except TypeError as e:  # wrong or missing arguments from a native tool call
            return f"Bad arguments for {action.tool}: {e}"

    # -- shell -------------------------------------------------------------------------------------

    async def _bash(self, command: str) -> str:
        if not isinstance(command, str) or not command.strip():
            raise CommandError("bash needs a non-empty command")
        r = await self.box.exec(command, timeout=self.timeout)
        where = await self.box.exec("pwd", timeout=10)
        if where.exit_code == 0 and where.output.strip():
            self.state.cwd = where.output.strip().splitlines()[-1]
        out = r.output
        if r.timed_out:
            out += f"\n[command timed out after {self.timeout:g} s and was killed]"
        elif r.exit_code != 0 and not out.strip():
            out = f"[exit code {r.exit_code}]"
        return out if out.strip() else "[no output]"

    # -- viewer ------------------------------------------------------------------------------------

    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.state.cwd, path))

    async def _lines(self, path: str) -> list[str]:
        # A directory, a device or a huge file is the agent's mistake (an observation), not a sandbox fault.
        r = await self.box.exec(f"stat -L -c '%F %s' -- {shlex.quote(path)}", timeout=10)
        if r.exit_code != 0:
            raise CommandError(f"File {path} not found")
        kind, _, size = r.output.strip().rpartition(" ")
        if kind == "directory":
            raise CommandError(f"{path} is a directory; use ls to list it")
        if kind not in ("regular file", "regular empty file"):
            raise CommandError(f"{path} is not a regular file ({kind})")
        if int(size) > MAX_FILE_BYTES:
            raise CommandError(f"{path} has {int(size):,} bytes, more than the file commands read "
                               f"({MAX_FILE_BYTES:,}); use head, tail, sed -n or grep")
        try:
            return (await self.box.read_file(path)).splitlines(keepends=True)
        except FileNotFoundError:
            raise CommandError(f"File {path} not found") from None

    async def _write(self, path: str, text: str) -> None:
        try:
            await self.box.write_file(path, text)
        except SandboxFileError as e:
            # A path the agent cannot write (under a file, read-only) is its mistake: said in the observation.
            # A dead sandbox raises SandboxDied instead, and ends the episode.
            raise CommandError(f"Could not write {path}: {e.reason}") from None

    def _need_open(self, path: str | None) -> str:
        if path:
            return self._abs(path)
        if self.state.file is None:
            raise CommandError("No file open. Use the open command first.")
        return self.state.file

    async def _show(self) -> str:
        lines = await self._lines(self.state.file)
        n = len(lines)
        first = max(1, min(self.state.first, max(1, n - self.window + 1)))
        self.state.first = first
        last = min(n, first + self.window - 1)
        body = "".join(f"{i}:{lines[i - 1].rstrip(chr(10))}\n" for i in range(first, last + 1))
        above = f"({first - 1} more lines above)\n" if first > 1 else ""
        below = f"({n - last} more lines below)\n" if last < n else ""
        return f"[File: {self.state.file} ({n} lines total)]\n{above}{body}{below}".rstrip("\n")

    async def _open(self, path: str, line: int | None = None) -> str:
        path = self._abs(path)
        lines = await self._lines(path)
        if line is not None and not 1 <= line <= max(1, len(lines)):
            raise CommandError(f"Line {line} is out of range: {path} has {len(lines)} lines")
        self.state.file = path
        self.state.first = max(1, (line or 1) - self.window // 2) if line else 1
        return await self._show()

    async def _goto(self, line: int) -> str:
        path = self._need_open(None)
        n = len(await self._lines(path))
        if not 1 <= line <= max(1, n):
            raise CommandError(f"Line {line} is out of range: {path} has {n} lines")
        self.state.first = max(1, line - self.window // 2)
        return await self._show()

    async def _scroll_down(self) -> str:
        self._need_open(None)
        self.state.first += self.window
        return await self._show()

    async def _scroll_up(self) -> str:
        self._need_open(None)
        self.state.first = max(1, self.state.first - self.window)
        return await self._show()

    async def _create(self, path: str) -> str:
        path = self._abs(path)
        exists = await self.box.exec(f"test -e {shlex.quote(path)}", timeout=10)
        if exists.exit_code == 0:
            raise CommandError(f"File {path} already exists; use open to view it")
        await self._write(path, "")
        self.state.file, self.state.first = path, 1
        return f"[File: {path} (0 lines total)]"

    async def _edit(self, start: int, end: int, replacement: str, path: str | None = None) -> str:
        path = self._need_open(path)
        lines = await self._lines(path)
        if start < 1 or end < start - 1 or start > len(lines) + 1:
            raise CommandError(f"edit {start}:{end} is out of range: {path} has {len(lines)} lines")
        new = [line + "\n" for line in replacement.split("\n")] if replacement != "" else []
        lines[start - 1:min(end, len(lines))] = new
        await self._write(path, "".join(lines))
        self.state.file = path
        self.state.first = max(1, start - self.window // 2)
        return f"File updated. Please review the changes and make sure they are correct.\n{await self._show()}"

    async def _replace(self, search: str, replace: str, replace_all: bool = False) -> str:
        path = self._need_open(None)
        text = "".join(await self._lines(path))
        count = text.count(search) if search else 0
        if count == 0:
            raise CommandError(f"{search!r} not found in {path}")
        if count > 1 and not replace_all:
            raise CommandError(f"{search!r} occurs {count} times in {path}; use replace --replace-all or edit")
        await self._write(path, text.replace(search, replace))
        line = text[: text.index(search)].count("\n") + 1
        self.state.first = max(1, line - self.window // 2)
        return f"Replaced {count} occurrence(s).\n{await self._show()}"

    async def _search_file(self, term: str, path: str | None = None) -> str:
        path = self._need_open(path)
        hits = [(i, line.rstrip("\n")) for i, line in enumerate(await self._lines(path), 1) if term in line]
        if not hits:
            return f'No matches found for "{term}" in {path}'
        shown = "\n".join(f"Line {i}:{line}" for i, line in hits[:MAX_SEARCH_HITS])
        more = f"\n({len(hits) - MAX_SEARCH_HITS} more matches not shown)" if len(hits) > MAX_SEARCH_HITS else ""
        return f'Found {len(hits)} matches for "{term}" in {path}:\n{shown}{more}'

    async def patch(self) -> str:
        """The agent's changes as a git diff against the task's commit, new files included. Read from
        a file, since command output is capped."""
        repo = shlex.quote(self.box.config.workdir)
        r = await self.box.exec(f"cd {repo} && git add -A -N . && git -c core.quotepath=false diff --no-color "
                                "--no-ext-diff --binary > /tmp/.verl_swe_patch.diff", timeout=120)
        if r.exit_code != 0:
            raise CommandError(f"git diff failed: {r.output[-500:]}")
        self.state.cwd = self.box.config.workdir
        return await self.box.read_file("/tmp/.verl_swe_patch.diff")
