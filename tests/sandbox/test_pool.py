"""SandboxPool (warm, single-use sandboxes), WarmPools (one pool per image, idle ones closed) and start retries.
Sandboxes on other Ray nodes: tests/agent/test_placement_ray.py."""

from __future__ import annotations

import asyncio
import sys
import uuid

import pytest

from verl_swe.sandbox import DockerSandboxConfig, SandboxError, SandboxStartError
from verl_swe.sandbox import pool as pool_mod
from verl_swe.sandbox.pool import SandboxPool, WarmPools, start_sandbox


def _config() -> tuple[DockerSandboxConfig, str]:
    tag = uuid.uuid4().hex[:12]  # a label of our own, so we count only this test's containers
    return DockerSandboxConfig(workdir="/", labels={"verl-swe-test": tag}), tag


def _containers(tag: str) -> list:
    from verl_swe.sandbox.docker import docker_client

    return docker_client(None).containers.list(all=True, filters={"label": f"verl-swe-test={tag}"})


async def _until(cond, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.1)):
        if cond():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_import_does_not_import_ray():
    import subprocess

    code = "import sys, verl_swe.sandbox.pool, verl_swe.sandbox.remote; assert 'ray' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


class _FlakySandbox:
    """Fails its first `fails` starts (class-wide), like an engine that is briefly down."""

    fails = 2
    n = 0

    def __init__(self, config):
        _FlakySandbox.n += 1
        self.config = config
        self.id, self.alive, self.closed = f"fake-{_FlakySandbox.n}", False, False

    async def start(self):
        if _FlakySandbox.fails > 0:
            _FlakySandbox.fails -= 1
            raise SandboxError("engine down")
        self.alive = True

    async def close(self):
        self.closed, self.alive = True, False


async def test_failed_background_start_is_retried(monkeypatch, caplog):
    monkeypatch.setattr(pool_mod, "create_sandbox", _FlakySandbox)
    async with SandboxPool(DockerSandboxConfig(), 1, retry_delay_s=0.01) as pool:
        await _until(lambda: pool.warm == 1, 5)
        async with pool.acquire() as sb:
            assert sb.alive
            await _until(lambda: pool.warm == 1, 5)  # replaced
            warm = list(pool._warm)
        assert sb.closed and not warm[0].closed
    assert warm[0].closed and pool.warm == 0
    assert "warming a sandbox failed" in caplog.text


@pytest.mark.docker
async def test_warm_pool_hands_out_distinct_sandboxes_and_closes_all():
    config, tag = _config()
    async with SandboxPool(config, 2) as pool:
        await _until(lambda: pool.warm == 2)
        async with pool.acquire() as a, pool.acquire() as b:
            assert a.id != b.id and a.alive and b.alive
            assert (await a.exec("echo hi")).output.strip() == "hi"
            await _until(lambda: pool.warm == 2)  # both replaced in the background
            assert len(_containers(tag)) == 4
        assert not a.alive and not b.alive
        assert len(_containers(tag)) == 2  # used ones removed, warm ones kept
    assert _containers(tag) == []


@pytest.mark.docker
async def test_cancelled_acquire_closes_sandbox():
    config, tag = _config()
    pool = SandboxPool(config, 0)
    entered = asyncio.Event()

    async def body():
        async with pool.acquire():
            entered.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(body())
    await asyncio.wait_for(entered.wait(), 60)
    assert len(_containers(tag)) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _containers(tag) == []
    await pool.close()


async def test_a_failed_start_is_retried_then_named(monkeypatch):
    monkeypatch.setattr(pool_mod, "create_sandbox", _FlakySandbox)
    _FlakySandbox.fails = 2
    sb = await start_sandbox(DockerSandboxConfig(), retries=2, retry_delay_s=0.01)
    assert sb.alive and _FlakySandbox.fails == 0
    _FlakySandbox.fails = 5
    with pytest.raises(SandboxStartError, match=r"engine down \(after 3 attempts\)"):
        await start_sandbox(DockerSandboxConfig(), retries=2, retry_delay_s=0.01)
    _FlakySandbox.fails = 0


async def test_warm_pools_are_per_image_and_close_when_idle(monkeypatch):
    monkeypatch.setattr(pool_mod, "create_sandbox", _FlakySandbox)
    _FlakySandbox.fails = 0
    a, b, c = (DockerSandboxConfig(image=f"img-{x}") for x in "abc")
    pools = WarmPools(per_key=2, max_warm=4, idle_s=3600, start_retries=0)
    pools.warm(a)
    pools.warm(b)
    await _until(lambda: pools.warm_count == 4, 5)
    first = await pools.take(a)  # warm: handed out, and replaced in the background
    assert first.config.image == "img-a" and (pools.hits, pools.misses) == (1, 0)
    cold = await pools.take(c)  # never asked to be warm: started now, not kept warm after
    assert cold.config.image == "img-c" and pools.misses == 1
    await _until(lambda: pools.warm_count == 4, 5)
    pools.warm(c)  # a third image over max_warm (4 = 2 images x 2): the least recently used (b) goes
    await _until(lambda: pools.warm_count == 4 and len(pools._pools) == 2, 5)
    assert {WarmPools.key(a), WarmPools.key(c)} == set(pools._pools)
    pools.idle_s = 0.0
    pools.sweep()  # nothing asked for since: every pool closes its warm sandboxes
    await _until(lambda: not pools._pools and not pools._closing, 5)
    await pools.close()
    assert pools.warm_count == 0


@pytest.mark.docker
async def test_warm_pools_hand_out_fresh_started_sandboxes_and_close_all():
    config, tag = _config()
    pools = WarmPools(per_key=1, start_retries=1)
    pools.warm(config)
    await _until(lambda: pools.warm_count == 1)
    async with pools.acquire(config) as a:  # the warm one
        await a.exec("touch /tmp/used")
        async with pools.acquire(config) as b:  # its replacement, never used by anyone
            assert a.id != b.id and (await b.exec("test -e /tmp/used")).exit_code == 1
    await pools.close()
    assert _containers(tag) == []
