"""Determinism runs per minute on envs/mini (rule 4 of `verl-swe curate`), 1 and 2 workers, per backend,
beside the baseline measured in the same run: a fresh sandbox per run (the grader, N times per task).

    .venv/bin/python bench/curate.py [--backends docker local] [--tasks 4] [--runs 5] [--out bench/curate-results.json]

Environments are built first and not timed. "Reuse" is what curation does: one sandbox per task, the gold
and test patches applied once, a reset between runs (`verl_swe/curate/determinism.py`). "Rebuild" starts a
fresh sandbox per run and applies both patches each time (`verl_swe.reward.grading.grade`). Both parse and
grade each run's log with swebench's functions. Each configuration runs twice, interleaved; the median wall.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from verl_swe.concurrency import bounded_gather
from verl_swe.curate.determinism import repeat_tests
from verl_swe.reward.grading import grade
from verl_swe.tasks import Environments, load_tasks
from verl_swe.tasks.repos import mini_dir


async def reuse(tasks, envs: Environments, runs: int, workers: int, parts: dict | None = None) -> float:
    async def one(task):
        result = await repeat_tests(task, await envs.prepare(task), runs, timeout_s=300)
        assert result.consistent and result.runs[0].resolved, (task.instance_id, result.runs)
        if parts is not None:
            parts.setdefault("run_s", []).extend(result.durations_s)
            parts.setdefault("reset_s", []).extend(result.resets_s)

    start = time.perf_counter()
    await bounded_gather((one(t) for t in tasks), workers)
    return time.perf_counter() - start


async def rebuild(tasks, envs: Environments, runs: int, workers: int, parts: dict | None = None) -> float:
    async def one(task):
        for _ in range(runs):
            g = await grade(task, task.patch, envs, timeout_s=300)
            assert g.resolved, (task.instance_id, g.error)
            if parts is not None:
                parts.setdefault("grade_s", []).append(g.duration_s)
                parts.setdefault("test_command_s", []).append(g.test_duration_s)

    start = time.perf_counter()
    await bounded_gather((one(t) for t in tasks), workers)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["docker", "local"])
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tasks = load_tasks(mini_dir() / "tasks.jsonl")[: args.tasks]
    cache = Path(tempfile.mkdtemp(prefix="verl-swe-bench-cache-"))
    total_runs = len(tasks) * args.runs
    results = {}
    for backend in args.backends:
        envs = Environments(backend, cache_dir=cache)
        errors = asyncio.run(envs.build(tasks))
        assert not any(errors.values()), errors
        asyncio.run(reuse(tasks, envs, 2, 2))  # warm-up, not timed: first container starts, page cache
        asyncio.run(rebuild(tasks, envs, 1, 2))
        for workers in (1, 2):
            walls, parts = {"reuse": [], "rebuild": []}, {}
            for _ in range(args.rounds):  # interleaved, so load from other jobs hits both alike
                walls["reuse"].append(asyncio.run(reuse(tasks, envs, args.runs, workers, parts)))
                walls["rebuild"].append(asyncio.run(rebuild(tasks, envs, args.runs, workers, parts)))
            med = {k: statistics.median(v) for k, v in walls.items()}
            results[f"{backend}/workers={workers}"] = {
                "tasks": len(tasks), "runs_per_task": args.runs,
                "reuse_runs_per_min": round(total_runs / med["reuse"] * 60, 1),
                "rebuild_runs_per_min": round(total_runs / med["rebuild"] * 60, 1),
                "reuse_s_per_run": round(med["reuse"] / total_runs, 3),
                "rebuild_s_per_run": round(med["rebuild"] / total_runs, 3),
                "saving": round(1 - med["reuse"] / med["rebuild"], 3),
                # reuse: one run (tests + grading) and one reset; rebuild: one whole grading and its test command
                "median_parts_s": {k: round(statistics.median(v), 3) for k, v in parts.items()},
                "walls_s": {k: [round(x, 3) for x in v] for k, v in walls.items()},
            }
            print(backend, workers, json.dumps(results[f"{backend}/workers={workers}"]), flush=True)
        envs.close()
    machine = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
               "cpus": os.cpu_count(), "python": platform.python_version(),
               "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    if args.out:
        args.out.write_text(json.dumps({"machine": machine, "tasks": [t.instance_id for t in tasks],
                                        "runs": args.runs, "rounds": args.rounds, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
