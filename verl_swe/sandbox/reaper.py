"""Freeze-then-kill, from the host: what a timed-out command started dies before the call returns.

A killer that runs inside the sandbox (killtree.sh) races the command: a fork bomb forks faster than a sweep
of /proc can kill, and under the sandbox's pid limit the killer itself may not get a pid to start. The
sandbox's freezer cgroup has neither problem. The host freezes it (v1 `freezer.state`, v2 `cgroup.freeze`),
so nothing in the sandbox runs or forks, SIGKILLs every process that started since the command began (orphans
and daemons included: they keep their start time and stay in the cgroup) except the shell and its ancestors,
and thaws it; the killed processes die at once, before running another instruction. The sweep repeats until
one finds nothing alive of the command.

Where the host cannot see the sandbox's cgroup (a remote docker engine, a driver inside a container, no
freezer) `Freezer.of_process` returns None and the backends fall back to killtree.sh inside the sandbox, with
a warning.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Freezer:
    """A cgroup the host can freeze: `version` 1 (the freezer controller) or 2 (cgroup.freeze)."""

    path: Path
    version: int

    @classmethod
    def of_process(cls, host_pid: int, own: str) -> Freezer | None:
        """The freezer cgroup `host_pid` (a sandbox's init, as the host sees it) is in, if the host can use it and
        it is the sandbox's own: its name contains `own` (the container id, the sandbox id). Never a cgroup the
        driver shares, which freezing would stop too."""
        try:
            lines = Path(f"/proc/{host_pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        found = None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "freezer" in controllers.split(","):
                found = cls(ROOT / "freezer" / path.lstrip("/"), 1)
                break
            if controllers == "" and (ROOT / "cgroup.controllers").exists():
                found = cls(ROOT / path.lstrip("/"), 2)  # a pure v2 host (a hybrid's v2 tree is not at ROOT)
        if found is None or own not in found.path.name or not found._control_file.exists():
            return None
        return found if host_pid in found.pids() else None

    @property
    def _control_file(self) -> Path:
        return self.path / ("freezer.state" if self.version == 1 else "cgroup.freeze")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def freeze(self, timeout: float = 5.0) -> bool:
        """Freeze and wait until every task is frozen; False if that did not happen in time (still frozen)."""
        self._control_file.write_text("FROZEN" if self.version == 1 else "1")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._frozen():
                return True
            time.sleep(0.001)
        return False

    def thaw(self) -> None:
        self._control_file.write_text("THAWED" if self.version == 1 else "0")

    def _frozen(self) -> bool:
        try:
            if self.version == 1:
                return (self.path / "freezer.state").read_text().strip() == "FROZEN"
            return "frozen 1" in (self.path / "cgroup.events").read_text()
        except OSError:
            return True  # the cgroup is gone: nothing in it runs


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks since boot) of a host pid, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def ns_pid(host_pid: int) -> int | None:
    """`host_pid` as the sandbox's innermost pid namespace numbers it (the last NSpid entry)."""
    try:
        for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def _protected(pids: list[int], shell_ns_pid: int, kill_shell: bool) -> set[int]:
    """The shell's host pid and its ancestors inside the cgroup (supervisor, init); without the shell itself
    under `kill_shell`."""
    inside = set(pids)
    shell = next((p for p in pids if ns_pid(p) == shell_ns_pid), None)
    keep: set[int] = set()
    p = shell
    while p in inside and p not in keep:
        keep.add(p)
        st = _stat(p)
        p = st[1] if st else None
    if kill_shell and shell is not None:
        keep.discard(shell)
    return keep


def kill_command(freezer: Freezer, shell_ns_pid: int, since_ticks: int, kill_shell: bool = False,
                 rounds: int = 20) -> int:
    """SIGKILL every process of the cgroup that started at or after `since_ticks` (the command's start, in the
    sandbox's /proc/uptime centiseconds, which are the kernel's clock ticks too), sparing the shell and its
    ancestors (the shell too under `kill_shell`). The shell is sent SIGUSR1 so that it abandons the rest of
    its command line. Returns how many processes were killed; none of them is alive when it returns."""
    killed: set[int] = set()
    keep: set[int] | None = None  # found once: after the first round the shell may be gone, its ancestors not
    # Once a freeze held, what was in the cgroup then is all of the command: a process born later comes from a
    # spared one (the fresh shell the supervisor starts after the old one was killed), never from a killed one.
    first: set[tuple[int, int]] | None = None
    for _ in range(rounds):
        frozen = freezer.freeze()
        if not frozen:
            logger.warning("cgroup %s did not freeze within 5 s; killing what it holds anyway", freezer.path)
        try:
            pids = freezer.pids()
            if keep is None:
                keep = _protected(pids, shell_ns_pid, kill_shell)
            if not kill_shell and not killed:
                shell = next((p for p in keep if ns_pid(p) == shell_ns_pid), None)
                if shell is not None:
                    os.kill(shell, signal.SIGUSR1)  # delivered at thaw, after its foreground child is gone
            targets = set()
            for pid in pids:
                st = _stat(pid)
                if pid in keep or st is None or st[0] in ("Z", "X") or st[2] < since_ticks:
                    continue
                if first is None or (pid, st[2]) in first:
                    targets.add((pid, st[2]))
            if first is None and frozen:
                first = targets
            for pid, _ in targets:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
        finally:
            freezer.thaw()
        if not targets:
            return len(killed)
        _wait_dead([pid for pid, _ in targets])
    logger.warning("processes of a killed command in %s survived %d freeze-and-kill rounds", freezer.path, rounds)
    return len(killed)


def _wait_dead(pids: list[int], timeout: float = 5.0) -> None:
    """Until each pid is gone or a zombie (dead, waiting to be reaped by its parent)."""
    deadline = time.monotonic() + timeout
    pending = list(pids)
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if (st := _stat(p)) is not None and st[0] not in ("Z", "X")]
        if pending:
            time.sleep(0.001)
