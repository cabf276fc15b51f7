"""Resource limits for local sandboxes: one cgroup per sandbox (v1 or v2), created by the host.

Docker applies the same limits itself; bubblewrap has none, and rlimits cannot bound a process tree
run by root, so the local backend puts the sandbox into its own cgroups before bwrap starts.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from verl_swe.sandbox.config import Limits

logger = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
# cpuacct: CPU time, for cost accounting; freezer: a timed-out command's processes are frozen, then killed
_V1_CONTROLLERS = ("pids", "memory", "cpu", "cpuacct", "freezer")


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ("" key for v2), from /proc/self/cgroup."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path
    return paths


def create(name: str, limits: Limits) -> list[Path]:
    """Create the sandbox's cgroups with `limits`; returns their directories ([] when not possible).

    A process joins them by writing its pid to each `cgroup.procs`; children inherit them at fork.
    """
    try:
        if (ROOT / "cgroup.controllers").exists():
            return [_create_v2(name, limits)]
        return _create_v1(name, limits)
    except OSError as e:
        logger.warning("no cgroup limits for local sandbox %s (%s): memory, CPU and pid limits are off", name, e)
        return []


def _create_v1(name: str, limits: Limits) -> list[Path]:
    own = _own_paths()
    dirs = []
    for controller in _V1_CONTROLLERS:
        base = ROOT / controller
        if not base.is_dir():
            continue
        d = base / own.get(controller, "/").lstrip("/") / name
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(d)
        if controller == "pids":
            (d / "pids.max").write_text(str(limits.pids))
        elif controller == "memory":
            (d / "memory.limit_in_bytes").write_text(str(limits.memory_mb << 20))
            if (d / "memory.memsw.limit_in_bytes").exists():  # else swap is not accounted: fine
                (d / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_mb << 20))
        elif controller == "cpu":
            (d / "cpu.cfs_period_us").write_text("100000")
            (d / "cpu.cfs_quota_us").write_text(str(int(limits.cpus * 100000)))
    return dirs


def _create_v2(name: str, limits: Limits) -> Path:
    parent = ROOT / _own_paths().get("", "/").lstrip("/")
    # Controllers must be enabled in the parent for the child to have the limit files.
    (parent / "cgroup.subtree_control").write_text("+pids +memory +cpu")
    d = parent / name
    d.mkdir(exist_ok=True)
    (d / "pids.max").write_text(str(limits.pids))
    (d / "memory.max").write_text(str(limits.memory_mb << 20))
    (d / "memory.swap.max").write_text("0")
    (d / "cpu.max").write_text(f"{int(limits.cpus * 100000)} 100000")
    return d


def remove(dirs: list[Path], wait_s: float = 2.0) -> None:
    """Remove the cgroups, killing any process still in them (the kernel reaps asynchronously)."""
    deadline = time.monotonic() + wait_s
    for d in dirs:
        while d.exists():
            try:
                os.rmdir(d)
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    logger.warning("could not remove cgroup %s: processes remain", d)
                    break
                _kill_all(d)
                time.sleep(0.005)


def _kill_all(d: Path) -> None:
    try:
        pids = (d / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


def cpu_seconds(dirs: list[Path]) -> float | None:
    """CPU time used by the cgroup's processes: v2 `cpu.stat` usage_usec, v1 `cpuacct.usage` (ns)."""
    for d in dirs:
        try:
            if (d / "cpu.stat").exists() and (ROOT / "cgroup.controllers").exists():
                for line in (d / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
            if (d / "cpuacct.usage").exists():
                return int((d / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            continue
    return None


def oom_killed(dirs: list[Path]) -> bool:
    """Whether the kernel's OOM killer acted inside the cgroup (its memory limit was hit)."""
    for d in dirs:
        for name in ("memory.events", "memory.oom_control"):  # v2, v1
            try:
                text = (d / name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                    return True
    return False
