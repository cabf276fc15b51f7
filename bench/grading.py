"""Grading throughput on envs/mini with 1 and 2 workers, and per-task overhead over the bare test run.

    .venv/bin/python bench/grading.py [--backends docker local] [--rounds 3] [--out bench/grading-results.json]

Environments are built first and not timed (the target is "once environments are cached"). The
baseline is the bare test run: the same test command, in a plain checkout on the host with the task's
virtualenv, no sandbox, no patching, no parsing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from verl_swe.reward.grading import grade
from verl_swe.tasks import Environments, load_tasks
from verl_swe.tasks.repos import mini_dir
from verl_swe.tasks.spec import DETERMINISTIC_ENV, make_test_spec


def bare_runs(tasks, envs: Environments) -> dict[str, float]:
    """Seconds of each task's test command run directly on the host (gold and test patch applied)."""
    out = {}
    for t in tasks:
        config = asyncio.run(envs.prepare(t))
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "repo"
            subprocess.run(["cp", "-a", str(config.source_dir), str(work)], check=True)
            for patch in (t.patch, t.test_patch):
                subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=work, check=True)
            env = {**config.env, **DETERMINISTIC_ENV, "HOME": tmp}
            start = time.perf_counter()
            subprocess.run(["bash", "-c", make_test_spec(t).test_cmd], cwd=work, env=env, capture_output=True)
            out[t.instance_id] = time.perf_counter() - start
    return out


async def grade_all(tasks, envs: Environments, workers: int):
    sem = asyncio.Semaphore(workers)

    async def one(t):
        async with sem:
            return await grade(t, t.patch, envs)

    start = time.perf_counter()
    results = await asyncio.gather(*(one(t) for t in tasks))
    wall = time.perf_counter() - start
    assert all(r.resolved for r in results), [r for r in results if not r.resolved]
    return wall, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["docker", "local"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tasks = load_tasks(mini_dir() / "tasks.jsonl")
    cache = Path(tempfile.mkdtemp(prefix="verl-swe-bench-cache-"))
    local_envs = Environments("local", cache_dir=cache)
    asyncio.run(local_envs.build(tasks))
    bare = bare_runs(tasks, local_envs)
    results = {"bare_test_run_s": {"mean": statistics.mean(bare.values()), "per_task": bare}}
    for backend in args.backends:
        envs = local_envs if backend == "local" else Environments(backend, cache_dir=cache)
        errors = asyncio.run(envs.build(tasks))
        assert not any(errors.values()), errors
        for workers in (1, 2):
            walls, per_task, tests = [], [], []
            for _ in range(args.rounds):
                wall, res = asyncio.run(grade_all(tasks, envs, workers))
                walls.append(wall)
                per_task += [r.duration_s for r in res]
                tests += [r.test_duration_s for r in res]
            wall = statistics.median(walls)
            results[f"{backend}/workers={workers}"] = {
                "tasks": len(tasks), "wall_s_median": round(wall, 3), "tasks_per_s": round(len(tasks) / wall, 3),
                "per_task_s_mean": round(statistics.mean(per_task), 3),
                "test_command_in_sandbox_s_mean": round(statistics.mean(tests), 3),
                "overhead_over_bare_s_mean": round(statistics.mean(per_task) - results["bare_test_run_s"]["mean"], 3),
            }
            print(backend, workers, results[f"{backend}/workers={workers}"], flush=True)
    machine = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
               "cpus": __import__("os").cpu_count(), "python": platform.python_version()}
    print(json.dumps({"bare_test_run_s_mean": round(results["bare_test_run_s"]["mean"], 3)}))
    if args.out:
        args.out.write_text(json.dumps({"machine": machine, "rounds": args.rounds, "results": results}, indent=2) + "\n")
    local_envs.close()


if __name__ == "__main__":
    main()
