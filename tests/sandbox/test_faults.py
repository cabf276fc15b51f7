"""Who ended a sandbox, and what it cost: a sandbox its own commands kill is the agent's doing; one killed or
removed from outside is the infrastructure's. CPU-seconds and seconds alive are measured at close."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from verl_swe.sandbox import Limits, SandboxDied, open_sandbox
from verl_swe.sandbox.admission import START_ADMISSION, StartAdmission, StartStats
from verl_swe.sandbox.usage import usage_meter


async def test_a_sandbox_that_kills_its_own_shell_is_the_agents(make_config):
    async with open_sandbox(make_config()) as sb:
        with pytest.raises(SandboxDied) as err:
            await sb.exec("kill -9 $PPID; sleep 1")  # the supervisor: nothing is left to run commands
            await sb.exec("true")
    assert err.value.cause == "exited" and not err.value.infra and "[cause: exited]" in str(err.value)


async def test_a_sandbox_removed_or_killed_from_outside_is_the_infrastructures(make_config, backend):
    async with open_sandbox(make_config()) as sb:
        if backend == "docker":
            from verl_swe.sandbox.docker import docker_client, remove_container

            await asyncio.to_thread(remove_container, docker_client(None), sb.id)
        else:
            os.kill(sb._proc.pid, signal.SIGKILL)  # the host side: the sandbox cannot reach this process
            await sb._proc.wait()
            await asyncio.sleep(0.5)  # its children die by their parent-death signal, just after it
        with pytest.raises(SandboxDied) as err:
            await sb.exec("echo hi")
    assert err.value.infra and err.value.cause == ("removed" if backend == "docker" else "killed")


async def test_a_command_over_the_memory_limit_is_killed_and_the_sandbox_lives(make_config):
    async with open_sandbox(make_config(limits=Limits(memory_mb=64))) as sb:
        r = await sb.exec("python3 -c 'x = bytearray(400 << 20)'")
        assert r.exit_code == 137
        assert (await sb.exec("echo alive")).output == "alive\n"


async def test_usage_is_measured_for_the_sandboxes_closed_in_the_block(make_config):
    with usage_meter() as outer:
        with usage_meter() as inner:
            async with open_sandbox(make_config()) as sb:
                await sb.exec("python3 -c 'sum(i * i for i in range(3_000_000))'")
        async with open_sandbox(make_config()):
            pass
    assert sb.usage.cpu_s > 0.05 and sb.usage.alive_s > 0
    assert inner.sandboxes == 1 and inner.cpu_s == pytest.approx(sb.usage.cpu_s)
    assert outer.sandboxes == 2 and outer.cpu_s >= inner.cpu_s and outer.unmeasured == 0


async def test_admission_caps_concurrent_starts(make_config, monkeypatch):
    monkeypatch.setattr(START_ADMISSION, "stats", StartStats())  # this test's starts only
    START_ADMISSION.configure(2)
    try:
        async def one():
            async with open_sandbox(make_config()) as sb:
                await sb.exec("true")

        await asyncio.gather(*(one() for _ in range(6)))
        stats = START_ADMISSION.stats
        assert stats.max_in_flight <= 2 and stats.in_flight == 0 and stats.waiting == 0
    finally:
        START_ADMISSION.configure(None)


async def test_admission_gate_is_held_for_each_start_and_released():
    admission = StartAdmission()
    held, peak = 0, 0

    def gate():
        import contextlib

        @contextlib.asynccontextmanager
        async def slot():
            nonlocal held, peak
            held += 1
            peak = max(peak, held)
            try:
                yield
            finally:
                held -= 1

        return slot()

    admission.configure(3, gate)

    async def start():
        async with admission.slot():
            await asyncio.sleep(0.02)

    await asyncio.gather(*(start() for _ in range(10)))
    assert peak == 3 and held == 0 and admission.stats.started == 10 and len(admission.stats.wait_s) == 10
    task = asyncio.ensure_future(start())  # cancelled while admitted: its slot comes back
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert held == 0 and admission.stats.in_flight == 0 and admission.stats.waiting == 0
