"""Nothing of a killed command survives the call, however it forks, with the machine loaded.

Every test here runs beside a CPU hog it starts itself (one busy process per core), so that a slower or
busier machine cannot make the kill look complete when it is not: each check is made the moment the call
returns, with no grace period.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from verl_swe.sandbox import open_sandbox


@pytest.fixture(autouse=True)
def loaded_machine():
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


def host_processes_with(token: str) -> list[str]:
    """Live processes anywhere on the host (sandboxes included: the host sees their pids) naming `token`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if token.encode() in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:
            pass
    return found


def process_count_inside() -> str:
    # Builtins only: no fork is needed to count.
    return "n=0; for d in /proc/[0-9]*; do n=$((n+1)); done; echo $n"


async def test_the_host_freezes_its_sandboxes_to_kill(make_config):
    # Root on a host with cgroups: the freeze-then-kill path, not the in-sandbox fallback, is the one tested here.
    async with open_sandbox(make_config()) as sb:
        assert sb._freezer is not None
        assert sb.id in sb._freezer.path.name or sb._container_id in sb._freezer.path.name


async def test_a_fork_bomb_leaves_nothing_and_the_next_output_is_its_own(make_config):
    # The default pid limit (512): enough room for the bomb to outrun a killer that sweeps /proc from inside,
    # and too little for one to start there while the bomb holds every pid (that took 107 s on docker).
    async with open_sandbox(make_config()) as sb:
        before = int((await sb.exec(process_count_inside())).output)
        # The bomb runs in the background; the command's own foreground outlasts its timeout.
        r = await sb.exec("bomb() { bomb | bomb & }; bomb; sleep 1000", timeout=5)
        assert r.timed_out and r.exit_code == 137
        # At once: no sleep for stragglers to die, and none of their "fork: retry" messages.
        assert (await sb.exec("echo survived", timeout=20)).output == "survived\n"
        assert int((await sb.exec(process_count_inside(), timeout=20)).output) == before


async def test_a_process_that_ignores_sigterm_is_killed(make_config):
    token = f"ignores-term-{uuid.uuid4().hex[:8]}"
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec(f"bash -c 'trap \"\" TERM INT HUP; while :; do sleep 0.05; done' {token} & sleep 100",
                          timeout=1)
        assert r.timed_out
        assert host_processes_with(token) == []


async def test_a_double_forked_daemon_is_killed_and_its_output_stops(make_config):
    token = f"daemon-{uuid.uuid4().hex[:8]}"
    async with open_sandbox(make_config()) as sb:
        # Forked twice and in its own session: re-parented to the sandbox's init, no job of the shell. It
        # writes to the shell's output stream until killed.
        r = await sb.exec(f"( setsid bash -c 'while :; do echo tick; sleep 0.01; done' {token} & ) ; sleep 100",
                          timeout=1)
        assert r.timed_out and "tick" in r.output
        assert host_processes_with(token) == []
        for _ in range(3):
            assert (await sb.exec("echo mine")).output == "mine\n"


async def test_closing_a_sandbox_leaves_no_process_of_it(make_config):
    token = f"left-running-{uuid.uuid4().hex[:8]}"
    async with open_sandbox(make_config()) as sb:
        await sb.exec(f"( setsid bash -c 'trap \"\" TERM; while :; do sleep 0.05; done' {token} & )")
        await asyncio.sleep(0.1)
        assert host_processes_with(token)
    assert host_processes_with(token) == []


async def test_without_the_freezer_the_fallback_still_kills_daemons(make_config, monkeypatch):
    # A remote docker engine or a host without a freezer cgroup: killtree.sh inside the sandbox does the kill.
    from verl_swe.sandbox import reaper

    monkeypatch.setattr(reaper.Freezer, "of_process", classmethod(lambda cls, pid, own: None))
    token = f"fallback-{uuid.uuid4().hex[:8]}"
    async with open_sandbox(make_config()) as sb:
        assert sb._freezer is None
        r = await sb.exec(f"( setsid bash -c 'trap \"\" TERM; while :; do sleep 0.05; done' {token} & ); sleep 100",
                          timeout=1)
        assert r.timed_out
        assert host_processes_with(token) == []
        assert (await sb.exec("echo mine")).output == "mine\n"


def test_a_cgroup_not_named_for_the_sandbox_is_never_frozen():
    # The driver's own cgroup (a sandbox that failed to join its own would sit there): freezing it would stop
    # the driver itself.
    from verl_swe.sandbox.reaper import Freezer

    assert Freezer.of_process(os.getpid(), "verl-swe-notmine") is None
