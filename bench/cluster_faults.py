"""Load and faults: sandboxes placed over a multi-node Ray cluster on this machine, one worker node killed mid-run.

    .venv/bin/python bench/cluster_faults.py --out bench/cluster-faults-results.json

A head and two workers are started with `ray start` (each its own raylet, temp dir, `--num-cpus 1` and
`--resources '{"verl_swe_sandbox": 64, "bench_wN": 1}'`). Environments are built on every node first, then
128 episodes of the real agent loop run at once (verl_swe/testing/cluster_load.py: scripted model, envs/mini
tasks, real sandboxes and grading), their sandboxes placed over the three nodes by `RayPlacement`; when all
128 hold a sandbox, worker w2 is killed: its raylet and every process of the node SIGKILLed, as a lost machine
(`--raylet-only`: the raylet alone). Recorded: nodes, concurrent episodes, the node killed,
trajectories lost and counted twice, episodes retried and excluded, sandboxes left behind, sandbox starts and
episodes per second, start latency (p50/p90/p99). Baseline, in the same run: the same episodes with
`sandbox_placement: local` (all sandboxes on this machine, no Ray), no kill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def machine() -> dict:
    load = os.getloadavg()
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "loadavg_at_start": [round(x, 2) for x in load],
            "note": "shared development machine (2 cores, other engineers' jobs running): timings are indicative"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--episodes", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2, help="worker nodes besides the head")
    ap.add_argument("--slots", type=int, default=64, help="verl_swe_sandbox per node")
    ap.add_argument("--sleep-s", type=float, default=20.0, help="how long each episode holds its sandbox busy")
    ap.add_argument("--kill", default="w2", help="worker node to kill once every episode holds a sandbox ('' : none)")
    ap.add_argument("--raylet-only", action="store_true", help="kill the node's raylet alone (its workers live on)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--cache-dir", type=Path, default=None, help="environment cache (default: a fresh temp dir)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    import ray

    from verl_swe.tasks import load_tasks
    from verl_swe.tasks.repos import mini_dir
    from verl_swe.testing.cluster_load import cluster_load, local_load
    from verl_swe.testing.ray_cluster import LocalRayCluster

    tasks = load_tasks(mini_dir() / "tasks.jsonl")
    work = Path(tempfile.mkdtemp(prefix="verl-swe-cluster-bench-"))
    cache = args.cache_dir or work / "cache"
    results: dict = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    t0 = time.monotonic()
    with LocalRayCluster(workers=args.workers, sandbox_slots=args.slots) as cluster:
        results["cluster_start_s"] = round(time.monotonic() - t0, 1)
        ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
        cluster.identify()
        try:
            results["ray"] = asyncio.run(cluster_load(cluster, args.backend, cache, work / "ray", tasks, args.episodes,
                                                      args.sleep_s, args.kill or None, args.raylet_only))
        finally:
            ray.shutdown()
    if not args.no_baseline:
        results["baseline_local"] = asyncio.run(local_load(args.backend, cache, work / "local", tasks, args.episodes,
                                                           args.sleep_s))
    r = results["ray"]
    results.update({k: r[k] for k in ("nodes", "concurrent_episodes", "node_killed", "lost_trajectories",
                                      "leaked_sandboxes", "sandbox_starts_per_s", "episodes_per_s",
                                      "p99_start_latency_s")})
    text = json.dumps(results, indent=1, default=str)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    ok = r["lost_trajectories"] == 0 and r["leaked_sandboxes"] == 0 and r["counted_twice"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
