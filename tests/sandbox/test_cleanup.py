"""Nothing is left behind: after close, an exception, cancellation, or a killed driver plus `gc`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from verl_swe.sandbox import create_sandbox, open_sandbox
from verl_swe.sandbox.gc import gc


def leftovers(backend: str, run_label: str, state_dir: Path, ids: set[str] | None = None) -> list[str]:
    """Every trace of this test's sandboxes: containers carrying `run_label`; for local sandboxes the
    state dirs, the cgroups of the sandbox `ids` seen (other runs on the machine have their own), processes."""
    found = []
    if backend == "docker":
        import docker

        for c in docker.from_env().containers.list(all=True, filters={"label": f"test-run={run_label}"}):
            found.append(f"container {c.name}")
        return found
    ids = set() if ids is None else ids
    if state_dir.exists():
        ids.update(p.name for p in state_dir.iterdir())
        found += [f"state dir {p}" for p in state_dir.iterdir()]
    for controller in Path("/sys/fs/cgroup").iterdir():
        found += [f"cgroup {cg}" for cg in controller.glob("**/verl-swe-*") if cg.is_dir() and cg.name in ids]
    for proc in Path("/proc").iterdir():
        try:
            if str(state_dir).encode() in (proc / "cmdline").read_bytes():
                found.append(f"process {proc.name}")
        except OSError:
            pass
    return found


@pytest.fixture
def labelled(make_config, backend, tmp_path, monkeypatch):
    run = uuid.uuid4().hex
    ids: set[str] = set()  # local sandboxes made by this test (in this process, or seen in its state dir)
    from verl_swe.sandbox.local import LocalSandbox

    init = LocalSandbox.__init__

    def recording_init(self, config):
        init(self, config)
        ids.add(self.id)

    monkeypatch.setattr(LocalSandbox, "__init__", recording_init)

    def make(**kw):
        cfg = make_config(labels={"test-run": run}) if backend == "docker" else make_config()
        return cfg.model_copy(update=kw)

    def check() -> list[str]:
        return leftovers(backend, run, tmp_path / "sandboxes", ids)

    return make, check


async def test_close_leaves_nothing(labelled):
    make, check = labelled
    async with open_sandbox(make()) as sb:
        await sb.exec("sleep 1000 & sleep 1000 & echo started")
        assert check()  # the sandbox is visible while open
    assert check() == []


async def test_exception_inside_leaves_nothing(labelled):
    make, check = labelled
    with pytest.raises(ZeroDivisionError):
        async with open_sandbox(make()) as sb:
            await sb.exec("sleep 1000 &")
            1 / 0
    assert check() == []


async def test_cancellation_mid_command_leaves_nothing(labelled):
    make, check = labelled
    started = asyncio.Event()

    async def agent():
        async with open_sandbox(make()) as sb:
            started.set()
            await sb.exec("sleep 1000", timeout=600)

    task = asyncio.ensure_future(agent())
    await asyncio.wait_for(started.wait(), 60)
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert check() == []


async def test_cancellation_during_start_leaves_nothing(labelled):
    make, check = labelled
    for delay in (0.0, 0.02, 0.08):
        sb = create_sandbox(make())
        task = asyncio.ensure_future(sb.start())
        await asyncio.sleep(delay)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await sb.close()
    assert check() == []


DRIVER = textwrap.dedent(
    """
    import asyncio, sys
    from verl_swe.sandbox import parse_sandbox_config, open_sandbox
    async def main():
        async with open_sandbox(parse_sandbox_config(__import__("json").loads(sys.argv[1]))) as sb:
            await sb.exec("sleep 1000 &")
            print("ready", flush=True)
            await asyncio.sleep(1000)
    asyncio.run(main())
    """
)


def test_killed_driver_then_gc_leaves_nothing(labelled, backend, tmp_path):
    make, check = labelled
    cfg = make()
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, cfg.model_dump_json()], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert check()  # the driver died without closing anything
    report = gc(docker=backend == "docker", local=backend == "local", state_dir=tmp_path / "sandboxes")
    assert not report.errors
    assert report.containers or report.local_sandboxes
    assert check() == []


def test_gc_keeps_sandboxes_of_live_drivers(labelled, backend, tmp_path):
    make, check = labelled

    async def scenario():
        async with open_sandbox(make()) as sb:
            report = gc(docker=backend == "docker", local=backend == "local", state_dir=tmp_path / "sandboxes")
            assert report.kept >= 1
            assert (await sb.exec("echo alive")).output == "alive\n"

    asyncio.run(scenario())
    assert check() == []


def test_gc_of_one_run_removes_its_orphans_only(labelled, backend, tmp_path):
    # Two drivers of two runs die: `gc --run A` removes run A's sandboxes and leaves run B's for its own gc.
    make, check = labelled
    procs = {}
    for run in ("run-a", "run-b"):
        cfg = make(run=run)
        procs[run] = subprocess.Popen([sys.executable, "-c", DRIVER, cfg.model_dump_json()], stdout=subprocess.PIPE,
                                      text=True)
    try:
        for proc in procs.values():
            assert proc.stdout.readline().strip() == "ready"
    finally:
        for proc in procs.values():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    kinds = dict(docker=backend == "docker", local=backend == "local", state_dir=tmp_path / "sandboxes")
    a = gc(run="run-a", **kinds)
    assert not a.errors and a.removed == 1 and check()  # run B's sandbox is still there
    assert gc(run="run-a", **kinds).removed == 0
    b = gc(run="run-b", **kinds)
    assert b.removed == 1 and check() == []


def test_a_resumed_run_collects_what_its_dead_drivers_left_and_only_that(labelled, backend, tmp_path):
    # A run killed mid-episode leaves its sandboxes; the run started again (any driver whose placement carries
    # the run's label: the trainer's agent-loop workers, `rollout`, `eval`) removes them before its first
    # episode, without touching another run's or a live driver's.
    from verl_swe.agent.placement import LocalPlacement
    from verl_swe.tasks import Environments

    make, check = labelled
    procs = [subprocess.Popen([sys.executable, "-c", DRIVER, make(run=run).model_dump_json()], stdout=subprocess.PIPE,
                              text=True) for run in ("resumed", "resumed", "other")]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
    finally:
        for proc in procs:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    async def live_and_resumed():
        async with open_sandbox(make(run="resumed")) as live:  # a driver of the run that is still alive
            sandbox = {"state_dir": str(tmp_path / "sandboxes")} if backend == "local" else {}
            placement = LocalPlacement(Environments(backend, cache_dir=tmp_path / "cache", sandbox=sandbox),
                                       run="resumed")
            assert placement.orphans_collected == 2
            assert (await live.exec("echo alive")).output == "alive\n"
            await placement.aclose()

    asyncio.run(live_and_resumed())
    kinds = dict(docker=backend == "docker", local=backend == "local", state_dir=tmp_path / "sandboxes")
    assert gc(run="resumed", **kinds).removed == 0
    assert gc(run="other", **kinds).removed == 1 and check() == []
