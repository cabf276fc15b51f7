"""Grading throughput on envs/mini with 1 and 2 workers, per-task overhead over the bare test run, and the
cost of the integrity checks (verl_swe/reward/integrity: sentinels, the pytest probe, file checks, verdict).

    .venv/bin/python bench/grading.py [--backends docker local] [--rounds 3] [--out bench/grading-results.json]

Environments are built first and not timed (the target is "once environments are cached"). The
baseline is the bare test run: the same test command, in a plain checkout on the host with the task's
virtualenv, no sandbox, no patching, no parsing. Grading with the integrity checks (the default) and without
them (`grade(..., integrity=False)`) alternate round by round in the same run, so both see the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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


async def grade_all(tasks, envs: Environments, workers: int, integrity: bool = True):
    sem = asyncio.Semaphore(workers)

    async def one(t):
        async with sem:
            return await grade(t, t.patch, envs, integrity=integrity)

    start = time.perf_counter()
    results = await asyncio.gather(*(one(t) for t in tasks))
    wall = time.perf_counter() - start
    assert all(r.resolved for r in results), [r for r in results if not r.resolved]
    return wall, results


def _summary(walls, per_task, tests, n: int, bare_s: float) -> dict:
    wall = statistics.median(walls)
    return {"tasks": n, "wall_s_median": round(wall, 3), "tasks_per_s": round(n / wall, 3),
            "per_task_s_mean": round(statistics.mean(per_task), 3),
            "test_command_in_sandbox_s_mean": round(statistics.mean(tests), 3),
            "overhead_over_bare_s_mean": round(statistics.mean(per_task) - bare_s, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["docker", "local"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load_start = os.getloadavg()
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
            runs = {True: ([], [], []), False: ([], [], [])}  # integrity on / off: walls, per task, test command
            for _ in range(args.rounds):
                for integrity in (True, False):
                    wall, res = asyncio.run(grade_all(tasks, envs, workers, integrity))
                    assert all(bool(r.integrity) == integrity and not r.tampered for r in res), res
                    walls, per_task, tests = runs[integrity]
                    walls.append(wall)
                    per_task += [r.duration_s for r in res]
                    tests += [r.test_duration_s for r in res]
            on, off = (_summary(*runs[i], len(tasks), results["bare_test_run_s"]["mean"]) for i in (True, False))
            results[f"{backend}/workers={workers}"] = {
                **on, "without_integrity_checks": off,
                "integrity_overhead_per_task_s": round(on["per_task_s_mean"] - off["per_task_s_mean"], 3),
                "integrity_overhead_in_test_command_s": round(on["test_command_in_sandbox_s_mean"]
                                                              - off["test_command_in_sandbox_s_mean"], 3),
            }
            print(backend, workers, results[f"{backend}/workers={workers}"], flush=True)
    machine = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
               "cpus": os.cpu_count(), "python": platform.python_version(),
               "loadavg_1_5_15_start": load_start, "loadavg_1_5_15_end": os.getloadavg()}  # the machine is shared
    print(json.dumps({"bare_test_run_s_mean": round(results["bare_test_run_s"]["mean"], 3)}))
    if args.out:
        args.out.write_text(json.dumps({"machine": machine, "rounds": args.rounds, "results": results}, indent=2) + "\n")
    local_envs.close()


if __name__ == "__main__":
    main()
