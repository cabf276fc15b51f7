"""Find and remove what sandboxes left behind: containers by label, local state dirs and cgroups.

By default only orphans go (their owning process on this host is gone), so `gc` is safe to run
beside a live training job; `everything=True` removes all of this package's sandboxes. `run=RUN` narrows
either to the sandboxes labelled with that run (`SandboxConfig.run`): what a node's sandbox host removes
when it starts (an earlier incarnation's leftovers), and `verl-swe sandbox gc --run RUN` on every node.
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

    @property
    def removed(self) -> int:
        return len(self.containers) + len(self.local_sandboxes)

    def merge(self, other: "GcReport") -> "GcReport":
        self.containers += other.containers
        self.local_sandboxes += other.local_sandboxes
        self.kept += other.kept
        self.errors += other.errors
        return self


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


def gc_docker(report: GcReport, everything: bool, docker_host: str | None = None, run: str | None = None) -> None:
    from verl_swe.sandbox.docker import docker_client, remove_container

    client = docker_client(docker_host)
    label = f"{LABEL}.run={run}" if run else LABEL
    for c in client.api.containers(all=True, filters={"label": label}):
        owner = c["Labels"].get(f"{LABEL}.owner", "")
        if not everything and not _is_orphan(owner):
            report.kept += 1
            continue
        try:
            if remove_container(client, c["Id"]):  # not when another gc (another node, same engine) got it first
                report.containers.append(c["Names"][0].lstrip("/") if c.get("Names") else c["Id"][:12])
        except Exception as e:  # noqa: BLE001 - report and go on with the rest
            report.errors.append(f"container {c['Id'][:12]}: {e}")


def gc_local(report: GcReport, everything: bool, state_dir: Path | None = None, run: str | None = None) -> None:
    state_dir = Path(state_dir or LocalSandboxConfig().state_dir)
    if not state_dir.is_dir():
        return
    for d in sorted(state_dir.iterdir()):
        if not d.name.startswith("verl-swe-"):
            continue
        try:
            state = json.loads((d / "state.json").read_text())
        except (OSError, ValueError):
            # A start that died before writing its state (whose run is unknown: with `run`, only once old).
            state = {"owner": "", "cgroups": [], "run": run}
            if run and not _dead_start(d):
                continue
        if run and state.get("run") != run:
            continue
        if not everything and state.get("owner") and not _is_orphan(state["owner"]):
            report.kept += 1
            continue
        _kill_bwrap(d)
        # Claim it by renaming it out of the way: gcs of other nodes sharing this disk skip what they lost.
        claimed = d.with_name(f".gc-{d.name}-{os.getpid()}")
        try:
            os.rename(d, claimed)
        except OSError:
            continue
        cgroups.remove([Path(p) for p in state.get("cgroups", [])])
        shutil.rmtree(claimed, ignore_errors=True)
        report.local_sandboxes.append(d.name)


def gc(everything: bool = False, docker: bool = True, local: bool = True,
       docker_host: str | None = None, state_dir: Path | None = None, run: str | None = None) -> GcReport:
    report = GcReport()
    if docker:
        try:
            gc_docker(report, everything, docker_host, run)
        except Exception as e:  # noqa: BLE001 - no engine here is not an error for gc
            report.errors.append(f"docker: {e}")
    if local:
        gc_local(report, everything, state_dir, run)
    return report


def gc_run(run: str, template=None, everything: bool = False) -> GcReport:
    """The sandboxes of `run` on this machine that its dead drivers left (all of the run's with `everything`),
    on the backend of `template` (a sandbox config; both backends when None). What a run collects when it starts
    or resumes, and what a node's sandbox host collects."""
    return gc(everything=everything, docker=template is None or template.backend == "docker",
              local=template is None or template.backend == "local", run=run,
              docker_host=getattr(template, "docker_host", None), state_dir=getattr(template, "state_dir", None))


def _dead_start(d: Path, grace_s: float = 300.0) -> bool:
    """A state dir with no state.json: a start killed before writing it, once it is old enough."""
    import time

    try:
        return time.time() - d.stat().st_mtime > grace_s
    except OSError:
        return False


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
