"""SandboxPool (warm, single-use sandboxes) and RaySandboxPool (sandboxes spread over Ray nodes)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import pytest

from verl_swe.sandbox import DockerSandboxConfig, SandboxError
from verl_swe.sandbox import pool as pool_mod
from verl_swe.sandbox.pool import RaySandboxPool, SandboxPool


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

    code = "import sys, verl_swe.sandbox.pool; assert 'ray' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


class _FlakySandbox:
    """Fails its first `fails` starts (class-wide), like an engine that is briefly down."""

    fails = 2
    n = 0

    def __init__(self, config):
        _FlakySandbox.n += 1
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


@pytest.fixture(scope="module")
def ray_cluster():
    os.environ["RAY_AUTH_MODE"] = "disabled"
    import ray
    from ray.cluster_utils import Cluster

    node = dict(num_cpus=1, object_store_memory=100 << 20)
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    ray.init(address=cluster.address)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.mark.ray
@pytest.mark.docker
async def test_ray_pool_spreads_over_nodes(ray_cluster):
    import contextlib

    import ray

    config, tag = _config()
    async with RaySandboxPool(config) as pool:
        assert len(pool.hosts) == 2 and len({h.node_id for h in pool.hosts}) == 2
        assert {h.node_id for h in pool.hosts} == {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        async with contextlib.AsyncExitStack() as stack:
            sbs = [await stack.enter_async_context(pool.acquire()) for _ in range(4)]
            assert sorted([s.node_id for s in sbs].count(h.node_id) for h in pool.hosts) == [2, 2]
            assert len({s.id for s in sbs}) == 4 and len(_containers(tag)) == 4

            sb = sbs[0]
            res = await sb.exec("cd /tmp && echo $((6 * 7))")
            assert (res.exit_code, res.output.strip()) == (0, "42")
            assert (await sb.exec("pwd")).output.strip() == "/tmp"  # the shell persists across calls
            await sb.write_file("/tmp/x/f.txt", "héllo")
            assert await sb.read_file("/tmp/x/f.txt") == "héllo"
            with pytest.raises(FileNotFoundError) as err:
                await sb.read_file("/nope")
            assert type(err.value) is FileNotFoundError
            with pytest.raises(SandboxError):
                await sb.read_file("/tmp")  # a directory
            await sb.close()
            with pytest.raises(SandboxError) as err:
                await sb.exec("true")
            assert type(err.value) is SandboxError and "no open sandbox" in str(err.value)
            assert sorted(h.open for h in pool.hosts) == [1, 2]

            async def hold():
                async with pool.acquire():
                    await asyncio.sleep(3600)

            task = asyncio.create_task(hold())
            await asyncio.sleep(0.05)  # cancelled while the host is still starting the container
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert sorted(h.open for h in pool.hosts) == [1, 2] and len(_containers(tag)) == 3
    assert _containers(tag) == []
