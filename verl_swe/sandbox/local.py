"""The local backend: a bubblewrap sandbox for machines with no container engine.

Each sandbox gets a private working copy (bound at `workdir`), its own pid, network, ipc and uts
namespaces, read-only system directories and nothing else of the host, a cleared environment, and
its own cgroups for memory / CPU / pid limits. State lives in `state_dir/<id>/` so `gc` can find
what a killed driver left behind; bwrap's --die-with-parent already kills the processes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import shutil
import signal
from pathlib import Path

from verl_swe.sandbox import cgroups, reaper
from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import LocalSandboxConfig, owner_id
from verl_swe.sandbox.shell import KILLTREE, PersistentShell, SandboxError, supervisor_script

logger = logging.getLogger(__name__)

# Host paths a program needs to run (read-only). Not /etc as a whole: it may hold secrets.
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
SYSTEM_ETC = [
    "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd",
    "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/ssl", "/etc/ca-certificates",
    "/etc/python3", "/etc/python3.11", "/etc/python3.12", "/etc/gitconfig", "/etc/mime.types",
]
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class _PipeStream:
    def __init__(self, proc: asyncio.subprocess.Process):
        self._proc = proc

    async def read(self) -> bytes:
        try:
            return await self._proc.stdout.read(65536)
        except (ConnectionError, ValueError):
            return b""

    async def write(self, data: bytes) -> None:
        stdin = self._proc.stdin
        if stdin.is_closing():
            return
        try:
            stdin.write(data)
            if stdin.transport.get_write_buffer_size() > 1 << 20:
                await stdin.drain()
        except (ConnectionError, RuntimeError):
            pass  # the sandbox died: the next read says so


def bwrap_args(config: LocalSandboxConfig, work: Path) -> list[str]:
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--clearenv"]
    if config.network:
        args.append("--share-net")
    for d in SYSTEM_DIRS + SYSTEM_ETC:
        args += ["--ro-bind-try", d, d]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/root", "--tmpfs", "/run"]
    # After the tmpfs mounts, so a cache under /root or /tmp stays visible.
    for p in config.ro_binds:
        args += ["--ro-bind", str(p), str(p)]
    for p in config.rw_binds:
        args += ["--bind", str(p), str(p)]
    args += ["--bind", str(work), config.workdir, "--chdir", config.workdir]
    env = {"PATH": SANDBOX_PATH, "HOME": "/root", "LANG": "C.UTF-8", "USER": "root", **config.env}
    for k, v in env.items():
        args += ["--setenv", k, v]
    return args


class LocalSandbox(Sandbox):
    def __init__(self, config: LocalSandboxConfig):
        super().__init__(config)
        self._dir = Path(config.state_dir) / self._id
        self._proc: asyncio.subprocess.Process | None = None
        self._cgroups: list[Path] = []
        self._ns_pid: int | None = None  # host pid of the sandbox's pid-namespace init
        self._freezer: reaper.Freezer | None = None  # its cgroup, frozen to kill a command's processes

    async def _start(self) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxError("the local backend needs bubblewrap: apt-get install bubblewrap")
        c = self.config
        work = self._dir / "work"
        self._dir.mkdir(parents=True)
        # The state first (owner, run, cgroups), so that whatever a driver killed mid-start leaves, gc can judge.
        self._cgroups = cgroups.create(self._id, c.limits)
        state = {"owner": owner_id(), "run": c.run, "cgroups": [str(d) for d in self._cgroups]}
        (self._dir / "state.json").write_text(json.dumps(state))
        if c.source_dir is not None:
            if not Path(c.source_dir).is_dir():
                raise SandboxError(f"local sandbox source_dir {c.source_dir} is not a directory")
            # Off the event loop: a repository copy takes milliseconds to seconds.
            await asyncio.to_thread(shutil.copytree, c.source_dir, work, symlinks=True)
        else:
            work.mkdir()
        nonce = PersistentShell.new_nonce()
        join = [str(d / "cgroup.procs") for d in self._cgroups]
        # Join the cgroups in a tiny sh before exec'ing bwrap, so every sandbox process is born inside.
        self._proc = await asyncio.create_subprocess_exec(
            "sh", "-c", 'while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; shift; exec "$@"', "sh", *join,
            "--", *bwrap_args(c, work), "sh", "-c", supervisor_script(nonce, c.workdir),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={"PATH": os.environ.get("PATH", SANDBOX_PATH)}, start_new_session=True,
        )
        (self._dir / "pid").write_text(str(self._proc.pid))
        self._shell = PersistentShell(_PipeStream(self._proc), nonce, c.workdir, self._kill)
        await self._shell.start()
        self._ns_pid = _child_of(self._proc.pid)
        self._freezer = reaper.Freezer.of_process(self._ns_pid, self._id) if self._ns_pid else None
        if self._freezer is None:
            _warn_fallback_once()

    async def _kill(self, shell_pid: int, since_cs: int, kill_shell: bool) -> None:
        if self._ns_pid is None:
            return
        if self._freezer is not None:
            await asyncio.to_thread(reaper.kill_command, self._freezer, shell_pid, since_cs, kill_shell)
            return
        # Fallback: no freezer cgroup of the sandbox's own.
        # Enter the sandbox's pid and mount namespaces so /proc and pids are the sandbox's own.
        proc = await asyncio.create_subprocess_exec(
            "nsenter", "-t", str(self._ns_pid), "-p", "-m", "sh", "-c", KILLTREE, "killtree",
            str(shell_pid), str(since_cs), "kill-shell" if kill_shell else "",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        if proc.returncode:
            logger.warning("killing processes in %s failed: %s", self._id, err.decode(errors="replace"))

    async def _death_cause(self) -> str:
        if self._proc is None:
            return "unknown"
        try:
            await asyncio.wait_for(self._proc.wait(), 5.0)
        except TimeoutError:
            return "unknown"  # still running with its stream closed: nothing says who did it
        if cgroups.oom_killed(self._cgroups):
            return "oom"  # its memory limit
        if not self._dir.exists():
            return "removed"  # `sandbox gc` took its state
        # A signal to the outer bwrap came from outside: the sandbox's processes live in their own pid
        # namespace and cannot see it. Its own shell supervisor ending makes bwrap exit with a status (>= 0).
        return "killed" if self._proc.returncode < 0 else "exited"

    async def _cpu_seconds(self) -> float | None:
        return cgroups.cpu_seconds(self._cgroups)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.dead = True
        await self._record_usage()
        if self._proc is not None and self._proc.returncode is None:
            # bwrap's children die with it (--die-with-parent); the pid namespace dies with its init.
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await self._proc.wait()
        await asyncio.to_thread(_remove_state, self._dir, self._cgroups)


@functools.lru_cache(maxsize=None)
def _warn_fallback_once() -> None:
    logger.warning("local sandboxes have no freezer cgroup here (no cgroup v2, no v1 freezer controller, or no "
                   "permission): a timed-out command is killed from inside the sandbox instead, which a fast "
                   "fork bomb can outrun")


def _remove_state(state_dir: Path, cgroup_dirs: list[Path]) -> None:
    cgroups.remove(cgroup_dirs)
    shutil.rmtree(state_dir, ignore_errors=True)


def _child_of(pid: int) -> int | None:
    """The host pid of `pid`'s child (bwrap's namespace init), found through /proc."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            return int(entry.name)
    return None
