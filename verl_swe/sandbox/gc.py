"""Find and remove what sandboxes left behind: containers by label, local state dirs and cgroups.

By default only orphans go (their owning process on this host is gone), so `gc` is safe to run
beside a live training job; `everything=True` removes all of this package's sandboxes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

from verl_swe.sandbox import cgroups
from verl_swe.sandbox.config import LABEL, LocalSandboxConfig, owner_id

logger = logging.getLogger(__name__)


@dataclass
class GcReport:
    containers: list[str] = field(default_factory=list)
    local_sandboxes: list[str] = field(default_factory=list)
    kept: int = 0
    errors: list[str] = field(default_factory=list)


def _is_orphan(owner: str) -> bool:
    """Whether `owner` (an `owner_id()`) names a driver on this host that is gone."""
    host, _, pid = owner.rpartition(":")
    if host != owner_id().rpartition(":")[0] or not pid.isdigit():
        return False  # another machine's: only `everything` removes it
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def gc_docker(report: GcReport, everything: bool, docker_host: str | None = None) -> None:
    from verl_swe.sandbox.docker import docker_client, remove_container

    client = docker_client(docker_host)
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        owner = c["Labels"].get(f"{LABEL}.owner", "")
        if not everything and not _is_orphan(owner):
            report.kept += 1
            continue
        try:
            remove_container(client, c["Id"])
            report.containers.append(c["Names"][0].lstrip("/") if c.get("Names") else c["Id"][:12])
        except Exception as e:  # noqa: BLE001 - report and go on with the rest
            report.errors.append(f"container {c['Id'][:12]}: {e}")


def gc_local(report: GcReport, everything: bool, state_dir: Path | None = None) -> None:
    state_dir = Path(state_dir or LocalSandboxConfig().state_dir)
    if not state_dir.is_dir():
        return
    for d in sorted(state_dir.iterdir()):
        if not d.name.startswith("verl-swe-"):
            continue
        try:
            state = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            state = {"owner": "", "cgroups": []}  # a start that died before writing its state
        if not everything and state.get("owner") and not _is_orphan(state["owner"]):
            report.kept += 1
            continue
        _kill_bwrap(d)
        cgroups.remove([Path(p) for p in state.get("cgroups", [])])
        shutil.rmtree(d, ignore_errors=True)
        report.local_sandboxes.append(d.name)


def gc(everything: bool = False, docker: bool = True, local: bool = True,
       docker_host: str | None = None, state_dir: Path | None = None) -> GcReport:
    report = GcReport()
    if docker:
        try:
            gc_docker(report, everything, docker_host)
        except Exception as e:  # noqa: BLE001 - no engine here is not an error for gc
            report.errors.append(f"docker: {e}")
    if local:
        gc_local(report, everything, state_dir)
    return report


def _kill_bwrap(state: Path) -> None:
    """Kill the sandbox's bwrap if it outlived its driver (checked by cmdline: pids get reused)."""
    try:
        pid = int((state / "pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"bwrap" in cmdline and str(state).encode() in cmdline:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
