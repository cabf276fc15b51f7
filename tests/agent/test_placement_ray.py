"""Sandboxes over a real multi-node Ray cluster (`ray start`: a head and two workers with their own resources),
one worker killed mid-run: the short version of bench/cluster_faults.py.

Environments are built on every node with `verl-swe envs build --ray-address`; 12 episodes of the real agent
loop (scripted model, envs/mini, local sandboxes, real grading) are placed over the three nodes; once they all
hold a sandbox, worker w2 is killed (every process of it). Its episodes are run again on the others; none is lost or
returned twice; nothing of any node's sandboxes is left; `verl-swe sandbox gc --run --ray-address` removes a
run's orphans on every node.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from verl_swe.tasks.repos import mini_dir

pytestmark = [pytest.mark.ray, pytest.mark.local]


def cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "RAY_AUTH_MODE": "disabled"})


@pytest.fixture(scope="module")
def cluster():
    import ray

    from verl_swe.testing.ray_cluster import LocalRayCluster

    with LocalRayCluster(workers=2, sandbox_slots=8) as c:
        ray.init(address=c.address, log_to_driver=False, logging_level="ERROR")
        c.identify()
        try:
            yield c
        finally:
            ray.shutdown()


def test_a_node_lost_mid_run_loses_no_episode_and_leaves_no_sandbox(cluster, mini_tasks, tmp_path):
    from verl_swe.testing.cluster_load import cluster_load

    cache = tmp_path / "cache"
    report = tmp_path / "build.json"
    built = cli("envs", "build", "--instances", mini_dir() / "tasks.jsonl", "--backend", "local", "--cache-dir", cache,
                "--ray-address", cluster.address, "--report", report)
    assert built.returncode == 0, built.stderr[-3000:]
    nodes = json.loads(report.read_text())["nodes"]
    assert len(nodes) == 3 and all(n["ready"] == len(mini_tasks) and not n["failed"] for n in nodes)

    tasks = list(mini_tasks.values())
    r = asyncio.run(cluster_load(cluster, "local", cache, tmp_path / "ray", tasks, episodes=12, sleep_s=6.0,
                                 kill="w2"))
    assert r["nodes"] == 3 and r["concurrent_episodes"] == 12  # every episode held a sandbox at once
    assert r["node_killed"]["open_sandboxes_on_it"] >= 1  # spread: the killed node had some
    assert r["lost_trajectories"] == 0 and r["counted_twice"] == 0 and r["episode_errors"] == []
    assert r["trajectories_returned"] == r["trajectories_saved"] == 12
    # every episode that held a sandbox there was run again (or, failing again, excluded), none finished there
    assert r["retried_episodes"] + r["excluded_episodes"] >= r["node_killed"]["open_sandboxes_on_it"]
    assert set(r["retry_kinds"]) <= {"host_lost", "sandbox_start"}
    assert r["resolved"] == r["expected_resolved"]  # retried episodes resolved like the others
    assert len(r["episodes_by_final_node"]) == 2 and cluster.node("w2").node_id[:12] not in r["episodes_by_final_node"]
    assert r["left_by_lost_node_after_auto_gc"] == 0 and r["leaked_sandboxes"] == 0
    assert cluster.wait_dead("w2")


ORPHAN = textwrap.dedent("""
    import asyncio, sys
    from verl_swe.sandbox import LocalSandboxConfig, open_sandbox
    async def main():
        async with open_sandbox(LocalSandboxConfig(run=sys.argv[1], state_dir=sys.argv[2])):
            print("ready", flush=True)
            await asyncio.sleep(1000)
    asyncio.run(main())
""")


def test_gc_of_a_run_on_every_node(cluster, tmp_path):
    from verl_swe.testing.cluster_load import leftovers

    state = tmp_path / "sandboxes"
    procs = [subprocess.Popen([sys.executable, "-c", ORPHAN, run, str(state)], stdout=subprocess.PIPE, text=True)
             for run in ("gone-run", "gone-run", "other-run")]
    try:
        assert all(p.stdout.readline().strip() == "ready" for p in procs)
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    r = cli("sandbox", "gc", "--run", "gone-run", "--ray-address", cluster.address, "--state-dir", state)
    assert r.returncode == 0, r.stdout + r.stderr
    # Every alive node ran it; they share this machine's disk, and each sandbox is removed (and counted) once.
    assert "removed 0 containers and 2 local sandboxes of run gone-run on " in r.stdout, r.stdout
    assert leftovers("local", "gone-run", state) == [] and len(leftovers("local", "other-run", state)) == 1


def test_a_restarted_run_removes_what_its_earlier_incarnation_left(cluster, tmp_path):
    from verl_swe.agent.placement_ray import RayPlacement
    from verl_swe.testing.cluster_load import leftovers

    state = tmp_path / "sandboxes"
    earlier = subprocess.Popen([sys.executable, "-c", ORPHAN, "again", str(state)], stdout=subprocess.PIPE, text=True)
    try:
        assert earlier.stdout.readline().strip() == "ready"
    finally:
        os.kill(earlier.pid, signal.SIGKILL)  # the earlier incarnation died with its sandbox open
        earlier.wait()
    assert len(leftovers("local", "again", state)) == 1

    async def restart():
        placement = RayPlacement(run="again", env_options={"backend": "local", "cache_dir": tmp_path / "cache",
                                                           "sandbox": {"state_dir": str(state)}}, options={})
        await placement.start()  # the run's host on every sandbox node; each removes the run's orphans there
        try:
            return len(placement.hosts)
        finally:
            await placement.shutdown()

    assert asyncio.run(restart()) >= 1
    assert leftovers("local", "again", state) == []


async def test_a_verl_agent_loop_row_runs_its_sandboxes_on_a_sandbox_node(cluster, mini_tasks, tmp_path):
    from omegaconf import OmegaConf

    from tests.agent.test_swe_agent import ORACLE, PAGER
    from tests.agent.test_verl_loop import YAML, build_loop
    from verl_swe.testing.scripted import ScriptedLLM
    from verl_swe.testing.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer()
    llm = ScriptedLLM(tok, tok.convert_tokens_to_ids("<|im_end|>"), ORACLE)
    [entry] = OmegaConf.load(YAML)
    entry = OmegaConf.merge(entry, {"backend": "local", "cache_dir": str(tmp_path / "cache"),
                                    "sandbox": {"state_dir": str(tmp_path / "sandboxes")}, "sandbox_placement": "ray",
                                    "trajectory_dir": str(tmp_path / "run"), "placement": {"run": "verl-row"}})
    loop = build_loop(entry, llm)
    out = await loop.run({}, raw_prompt=[], agent_name="swe_agent", index=0,
                         extra_info={"task": mini_tasks[PAGER].model_dump_json()})
    assert out.reward_score == 1.0 and out.extra_fields["infra_failure"] == ""
    metrics = out.extra_fields["swe_metrics"]
    assert metrics["swe/cost/sandboxes"] == 2 and metrics["swe/cost/sandbox_cpu_s"] > 0  # the agent's and the grader's
    from verl_swe.agent.trajectories import load_trajectories

    [traj] = load_trajectories(tmp_path / "run")
    alive = {n.node_id for n in cluster.nodes if n.name != "w2"}
    assert traj.metadata["sandbox_node"] in alive
    await loop.runner.placement.shutdown()
