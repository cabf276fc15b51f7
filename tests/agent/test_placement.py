"""Placement of an episode's sandboxes: environments prepared once per machine (a failed build remembered,
`ahead` never building), the grader served a warm sandbox of the task's image, nodes chosen by image and load."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from verl_swe.agent.infra import ENV_BUILD, ENV_NOT_READY, InfraFailure
from verl_swe.agent.placement import LocalPlacement
from verl_swe.agent.placement_ray import RayPlacement, _Host
from verl_swe.sandbox import LocalSandboxConfig
from verl_swe.tasks import EnvBuildError, Task

TASK = Task(instance_id="t-1", repo="o/r", base_commit="0" * 40, problem_statement="x", test_patch="",
            FAIL_TO_PASS=["t"])


class FakeEnvironments:
    """Environments' interface with a build that takes a while, counted, and fails when told to."""

    def __init__(self, cache_dir, fail: bool):
        self.backend, self.template = "local", LocalSandboxConfig()
        self.store = SimpleNamespace(cache_dir=cache_dir)
        self.fail, self.builds = fail, 0

    async def prepare(self, task):
        self.builds += 1
        await asyncio.sleep(0.05)
        if self.fail:
            raise EnvBuildError(f"{task.instance_id}: pip could not build the package")
        return self.template.model_copy(update={"workdir": "/testbed"})

    def close(self):
        pass


async def test_a_failed_build_is_tried_once_and_its_episodes_fail_at_once(tmp_path):
    envs = FakeEnvironments(tmp_path, fail=True)
    placement = LocalPlacement(envs)
    errors = await asyncio.gather(*(placement.prepare(TASK) for _ in range(5)), return_exceptions=True)
    assert envs.builds == 1 and all(isinstance(e, InfraFailure) and e.kind == ENV_BUILD for e in errors)
    assert "pip could not build" in str(errors[0])
    assert await placement.build([TASK]) == {"t-1": "t-1: pip could not build the package"}


async def test_ahead_uses_only_environments_built_before(tmp_path):
    ahead = LocalPlacement(FakeEnvironments(tmp_path, fail=False), env_prepare="ahead", run="r1")
    with pytest.raises(InfraFailure) as err:
        await ahead.prepare(TASK)
    assert err.value.kind == ENV_NOT_READY and ahead.envs.builds == 0  # never built during training

    builder = LocalPlacement(FakeEnvironments(tmp_path, fail=False))  # `verl-swe envs build`, same cache
    assert await builder.build([TASK]) == {"t-1": None}
    ahead = LocalPlacement(FakeEnvironments(tmp_path, fail=False), env_prepare="ahead", run="r1")
    config = await ahead.prepare(TASK)
    assert ahead.envs.builds == 0 and config.workdir == "/testbed" and config.run == "r1"
    assert ahead.holds() == {"t-1"}
    assert LocalPlacement(FakeEnvironments(tmp_path, fail=False)).holds() == {"t-1"}  # what the machine holds
    changed = TASK.model_copy(update={"problem_statement": "another task under the same id"})
    with pytest.raises(InfraFailure):
        await ahead.prepare(changed)  # a record is for the task's exact content


def test_nodes_holding_the_image_are_preferred_while_they_have_room():
    p = RayPlacement(run="r", env_options={}, options={})
    a, b, c = (_Host(None, n, slots=4) for n in "abc")
    p.hosts = {h.node_id: h for h in (a, b, c)}
    a.load, b.load, c.load = 3, 1, 0
    a.holds.add("t-1")
    assert p._choose("t-1", set()) is a  # holds it and has a slot: no build, no pull
    assert p._choose("t-2", set()) is c  # nobody holds it: the least filled
    a.load = 4
    assert p._choose("t-1", set()) is c  # the holder is full
    assert p._choose("t-1", {"c"}) is b  # c was tried and failed
    with pytest.raises(InfraFailure):
        p._choose("t-1", {"a", "b", "c"})


async def test_the_grader_gets_a_warm_sandbox_of_the_image_and_its_cost_is_measured(task_envs, mini_tasks):
    task = mini_tasks["verl-swe-mini__pager-1"]
    placement = LocalPlacement(task_envs, run="warm-run", warm_per_image=1)
    try:
        box = await placement.open(task)  # the agent's sandbox; the pool starts one more of this image
        assert box.config.run == "warm-run"
        await box.close()
        for _ in range(600):
            if placement.pools.warm_count:
                break
            await asyncio.sleep(0.05)
        grading = await placement.grade(task, task.patch, timeout_s=300)
        assert grading.result.resolved and grading.infra is None, grading.result.error
        assert placement.pools.hits == 1  # the grader's sandbox was the warm one
        assert grading.meter.sandboxes == 1 and grading.meter.cpu_s > 0
    finally:
        await placement.pools.close()
