"""Load and faults on a real multi-node Ray cluster (bench/cluster_faults.py, and a short version in CI).

The real agent loop (`AgentRunner.run`: `run_episode`, the paper's commands, grading in a fresh sandbox)
runs E episodes at once over the envs/mini tasks against a scripted model (`ScriptedLLM`: exactly the tokens
of its replies). Each episode's sandbox is placed by `RayPlacement` on the cluster's sandbox nodes (the head
and `ray start` workers), environments having been built on every node first (`verl-swe envs build` on the
cluster, env_prepare: ahead). Three of four episodes fix the bug (the oracle's edits), the others submit
nothing; each holds its sandbox for `sleep_s` with a `sleep` command, so that all of them are in flight at
once. Once they all hold a sandbox, one worker node is killed (its raylet and every process of the node
SIGKILLed, or with `raylet_only` the raylet alone): its episodes' next calls fail as `host_lost`, they are run
again on the surviving nodes, and nothing is left of the dead node's sandboxes. What is measured and checked: every episode returns exactly one trajectory (none lost,
none twice), which were retried or excluded, sandbox start latency, throughput, and what is left behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import time
import uuid
from collections import Counter
from pathlib import Path

from verl_swe.agent.config import AgentConfig, LimitsConfig, PlacementConfig
from verl_swe.agent.llm import Sampling
from verl_swe.agent.oracle import oracle_replies
from verl_swe.agent.runner import AgentRunner
from verl_swe.agent.trajectories import load_trajectories
from verl_swe.tasks import Task
from verl_swe.testing.scripted import TurnScriptedLLM
from verl_swe.testing.tokenizer import qwen_tokenizer

logger = logging.getLogger(__name__)


def episode_replies(task: Task, sleep_s: float, solve: bool) -> list[str]:
    """The oracle's edits (or none), a `sleep` that keeps the sandbox busy, then submit."""
    edits = [r for r in oracle_replies(task) if "```command\nopen " in r or "```command\nedit " in r] if solve else []
    return [*edits, f"Let me wait for the build.\n```command\nsleep {sleep_s:g} && echo done\n```",
            "The fix is done.\n```command\nsubmit\n```"]


def leftovers(backend: str, run: str, state_dir: Path) -> list[str]:
    """Every sandbox of `run` still on this machine (docker containers by label; local state dirs)."""
    if backend == "docker":
        from verl_swe.sandbox.docker import docker_client

        return [c["Names"][0] for c in docker_client(None).api.containers(
            all=True, filters={"label": f"verl-swe.run={run}"})]
    found = []
    for d in sorted(Path(state_dir).glob("verl-swe-*")):
        try:
            if json.loads((d / "state.json").read_text()).get("run") != run:
                continue
        except (OSError, ValueError):
            pass  # a start that died before writing its state: still a leftover
        found.append(d.name)
    return found


def _quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 4)


def _latencies(trajs: list) -> dict:
    xs = [t.timings.get("prepare_s", 0.0) for t in trajs]
    return {"n": len(xs), "p50": _quantile(xs, 0.5), "p99": _quantile(xs, 0.99)}


def agent_config(backend: str, cache_dir: Path, out: Path, run: str, placement: str, **options) -> AgentConfig:
    sandbox = {"state_dir": str(out / "sandboxes")} if backend == "local" else {}
    return AgentConfig(backend=backend, cache_dir=cache_dir, sandbox=sandbox, trajectory_dir=out / "trajectories-run",
                       sandbox_placement=placement, command_timeout_s=300, grade_timeout_s=300,
                       limits=LimitsConfig(max_turns=12, penalty_threshold=10, timeout_s=1800),
                       placement=PlacementConfig(run=run, **options))


async def run_load(runner: AgentRunner, tasks: list[Task], episodes: int, sleep_s: float, *, on_all_open=None,
                   open_count=None, poll_s: float = 0.5) -> dict:
    """E episodes at once; `open_count()` (async) reports the sandboxes held now, and `on_all_open()` is
    called once they are E (or the first episode ended). Returns the per-episode results and timings."""
    llm_tok, eot = runner.chat.tok, runner.chat.end_of_turn_id
    plan = [(tasks[i % len(tasks)], i) for i in range(episodes)]
    launched = time.monotonic()

    async def one(task: Task, i: int):
        llm = TurnScriptedLLM(llm_tok, eot, episode_replies(task, sleep_s, solve=i % 4 != 3))
        return await runner.run(task, llm, Sampling(max_tokens=512), episode_id=f"{task.instance_id}.{i}")

    tasks_ = [asyncio.ensure_future(one(t, i)) for t, i in plan]
    peak, kill_at, fired = 0, None, on_all_open is None
    while not all(t.done() for t in tasks_):
        await asyncio.sleep(poll_s)
        if open_count is None:
            continue
        now = await open_count()
        peak = max(peak, now)
        if not fired and (now >= episodes or any(t.done() for t in tasks_)):
            fired, kill_at = True, time.monotonic() - launched
            await on_all_open(now)
    results = await asyncio.gather(*tasks_, return_exceptions=True)
    wall = time.monotonic() - launched
    return {"plan": [f"{t.instance_id}.{i}" for t, i in plan], "results": results, "wall_s": wall, "peak_open": peak,
            "kill_at_s": kill_at}


def summarize(load: dict, run_dir: Path, episodes: int) -> dict:
    """Lost / twice / retried / excluded, latency and throughput, from the results and the saved files."""
    results = load["results"]
    trajs = [r.trajectory for r in results if not isinstance(r, BaseException)]
    errors = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    ids = Counter(t.episode_id for t in trajs)
    saved = Counter(t.episode_id for t in load_trajectories(run_dir, unsettled=True))
    planned = set(load["plan"])
    lost = sorted(planned - set(ids)) + sorted(planned - set(saved))
    twice = sorted({i for i, n in ids.items() if n > 1} | {i for i, n in saved.items() if n > 1})
    retried = [t for t in trajs if t.metadata.get("infra_attempts")]
    excluded = [t for t in trajs if t.infra_failure]
    prepare = [t.timings.get("prepare_s", 0.0) for t in trajs]
    sandboxes = sum(t.cost.get("sandboxes", 0) for t in trajs)
    cpu = [t.cost["sandbox_cpu_s"] for t in trajs if "sandbox_cpu_s" in t.cost]
    nodes = Counter(t.metadata.get("sandbox_node", "here")[:12] for t in trajs)
    return {
        "episodes": episodes, "trajectories_returned": len(trajs), "trajectories_saved": sum(saved.values()),
        "lost_trajectories": len(set(lost)), "lost_ids": sorted(set(lost))[:20], "counted_twice": len(twice),
        "episode_errors": errors[:10],
        "retried_episodes": len(retried), "excluded_episodes": len(excluded),
        "excluded_kinds": dict(Counter(t.infra_failure for t in excluded)),
        "retry_kinds": dict(Counter(a["infra_failure"] for t in retried for a in t.metadata["infra_attempts"])),
        "resolved": sum(t.resolved for t in trajs), "expected_resolved": sum(1 for i in load["plan"]
                                                                            if int(i.rsplit(".", 1)[1]) % 4 != 3),
        "exit_status": dict(Counter(t.exit_status.value for t in trajs)),
        "episodes_by_final_node": dict(nodes),
        "wall_s": round(load["wall_s"], 2), "episodes_per_s": round(len(trajs) / load["wall_s"], 3),
        "sandboxes_closed": int(sandboxes), "sandbox_starts_per_s": round(sandboxes / load["wall_s"], 3),
        "start_latency_s": {"p50": _quantile(prepare, 0.5), "p90": _quantile(prepare, 0.9),
                            "p99": _quantile(prepare, 0.99), "max": _quantile(prepare, 1.0)},
        # apart: the opening burst (first attempts), and the re-opens of retried episodes after the loss
        "start_latency_first_attempt_s": _latencies([t for t in trajs if not t.metadata.get("infra_attempts")]),
        "start_latency_retried_s": _latencies([t for t in trajs if t.metadata.get("infra_attempts")]),
        "sandbox_cpu_s_per_episode": round(statistics.mean(cpu), 3) if cpu else None,
        "peak_open_sandboxes": load["peak_open"],
        # The opening burst: every episode asked for its sandbox at once; this long until all held one.
        "all_open_after_s": round(load["kill_at_s"], 2) if load["kill_at_s"] else None,
        "burst_starts_per_s": round(episodes / load["kill_at_s"], 2) if load["kill_at_s"] and load["peak_open"] >= episodes
        else None,
    }


async def cluster_load(cluster, backend: str, cache_dir: Path, out: Path, tasks: list[Task], episodes: int,
                       sleep_s: float, kill: str | None, raylet_only: bool = False, **placement) -> dict:
    """The run on `cluster` (a started verl_swe.testing.ray_cluster.LocalRayCluster, ray.init done)."""
    from verl_swe.agent.placement_ray import build_on_every_node

    run = f"load-{uuid.uuid4().hex[:8]}"
    options = {"env_prepare": "ahead", "start_retries": 2, "episode_retries": 1, "max_concurrent_starts_per_node": 16,
               "max_concurrent_starts": 48, **placement}
    config = agent_config(backend, cache_dir, out, run, "ray", **options)
    t0 = time.monotonic()
    env_options = {"backend": backend, "cache_dir": cache_dir, "sandbox": config.sandbox}
    build = await asyncio.to_thread(build_on_every_node, env_options, tasks, 2)
    build_s = time.monotonic() - t0
    runner = AgentRunner(config, qwen_tokenizer())
    placement_ = runner.placement
    await placement_.start()
    killed: dict = {}

    async def open_count() -> int:
        return sum(s.get("open", 0) for s in (await placement_.stats()).values())

    async def on_all_open(now: int) -> None:
        if kill is None:
            return
        per_node = {n[:12]: s.get("open", 0) for n, s in (await placement_.stats()).items()}
        node = cluster.node(kill)
        killed.update({"node": kill, "node_id": node.node_id, "open_sandboxes_on_it": per_node.get(node.node_id[:12]),
                       "open_sandboxes_total": now, "mode": "raylet only" if raylet_only else "every process",
                       "at": cluster.kill_node(kill, raylet_only=raylet_only)})
        logger.warning("killed node %s (%s sandboxes open on it, %s in all)", kill,
                       killed["open_sandboxes_on_it"], now)

    load = await run_load(runner, tasks, episodes, sleep_s, on_all_open=on_all_open, open_count=open_count)
    stats = await placement_.stats()
    # What the lost node left, after the survivors' automatic gc (before any shutdown or explicit gc).
    orphans = leftovers(backend, run, out / "sandboxes")
    shutdown = await placement_.shutdown()
    leaked = leftovers(backend, run, out / "sandboxes")
    summary = summarize(load, config.trajectory_dir, episodes)
    return {
        "placement": "ray", "backend": backend, "run": run, "nodes": len(cluster.nodes),
        "sandbox_nodes": len([n for n in cluster.nodes if n.resources.get("verl_swe_sandbox")]),
        "concurrent_episodes": load["peak_open"], "node_killed": killed or None,
        "lost_trajectories": summary["lost_trajectories"], "leaked_sandboxes": len(leaked),
        "sandbox_starts_per_s": summary["sandbox_starts_per_s"], "episodes_per_s": summary["episodes_per_s"],
        "p99_start_latency_s": summary["start_latency_s"]["p99"],
        "left_by_lost_node_after_auto_gc": len(orphans), "leaked": leaked[:10],
        "envs_build_s": round(build_s, 1), "envs_build": [{k: v for k, v in b.items() if k != "errors"} |
                                                            {"failed": sum(1 for e in b.get("errors", {}).values() if e)}
                                                            for b in build],
        "placement_options": options, "host_stats": {n[:12]: s for n, s in stats.items()},
        "orphans_collected_after_loss": placement_.orphans_collected,
        "shutdown": {n[:12]: {"removed": len(r.get("containers", [])) + len(r.get("local_sandboxes", []))}
                     for n, r in shutdown.items()},
        **summary,
    }


async def local_load(backend: str, cache_dir: Path, out: Path, tasks: list[Task], episodes: int,
                     sleep_s: float) -> dict:
    """The baseline: the same episodes with sandbox_placement: local (every sandbox on this machine, no Ray)."""
    from verl_swe.agent.placement import LocalPlacement

    run = f"load-local-{uuid.uuid4().hex[:8]}"
    config = agent_config(backend, cache_dir, out, run, "local", max_concurrent_starts_per_node=16)
    runner = AgentRunner(config, qwen_tokenizer())
    assert isinstance(runner.placement, LocalPlacement)
    async def open_count() -> int:  # this run's sandboxes that exist now (docker label / local state dirs)
        return len(await asyncio.to_thread(leftovers, backend, run, out / "sandboxes"))

    async def all_open(now: int) -> None:
        pass

    try:
        await runner.placement.build(tasks)
        load = await run_load(runner, tasks, episodes, sleep_s, on_all_open=all_open, open_count=open_count)
    finally:
        runner.close()
    leaked = leftovers(backend, run, out / "sandboxes")
    summary = summarize(load, config.trajectory_dir, episodes)
    return {"placement": "local", "backend": backend, "nodes": 1, "concurrent_episodes": load["peak_open"],
            "lost_trajectories": summary["lost_trajectories"],
            "leaked_sandboxes": len(leaked), "sandbox_starts_per_s": summary["sandbox_starts_per_s"],
            "episodes_per_s": summary["episodes_per_s"], "p99_start_latency_s": summary["start_latency_s"]["p99"],
            **summary}
