"""The evaluation report of a run directory (paper 1.8): Pass@1 as the mean over runs with its standard
error, unbiased Pass@k over the same runs, per-repository and exit-status breakdowns; and one swebench
predictions file per run, so each run can be re-graded by the official harness.

Runs are `verl-swe rollout` episodes: episode r of every task is run r. Pass@1 of run r is the fraction
of tasks its episode resolved; the report gives their mean +- SEM (sample std / sqrt(runs)), as Table 1
does. A task whose episode r is missing (an unfinished run) counts as unresolved in run r, as the
harness counts a missing prediction, and `missing_episodes` says how many: rerun to complete them.
An episode that failed for the infrastructure's reason (its sandbox did not start, its environment did
not build: verl_swe/agent/infra.py) says nothing about the model: as in training, it is left out of the
scores (run r's Pass@1 is over the tasks whose episode r ran; a task's Pass@k over its runs that ran) and
counted apart (`infra_failed_episodes`, by kind in `unsettled_episodes`).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

from verl_swe.agent.rollout import pass_at_k
from verl_swe.eval.metrics import episode_metrics, mean_metrics
from verl_swe.eval.runs import Run, repo_of, run_index
from verl_swe.files import write_json_atomic, write_text_atomic
from verl_swe.types import Trajectory


def mean_sem(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample std, ddof=1); SEM 0 for a single value."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def episodes_by_task(run: Run, instance_ids: list[str], runs: int) -> dict[str, list[Trajectory | None]]:
    """task -> its episode of each run 0..runs-1 (None where missing). Episodes without a run index (a
    training directory) fill the first free slots in file order."""
    wanted = set(instance_ids)
    table: dict[str, list[Trajectory | None]] = {iid: [None] * runs for iid in instance_ids}
    loose: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in run.trajectories:
        if traj.instance_id not in wanted or not traj.settled:  # cancelled / infra failure: missing, redone on resume
            continue
        r = run_index(traj)
        if r is None:
            loose[traj.instance_id].append(traj)
        elif r < runs:
            table[traj.instance_id][r] = traj
    for iid, trajs in loose.items():
        slots = table[iid]
        for traj in trajs:
            if None in slots:
                slots[slots.index(None)] = traj
    return table


def infra_failed_slots(run: Run, table: dict[str, list[Trajectory | None]]) -> dict[str, set[int]]:
    """task -> the runs whose episode failed for the infrastructure's reason and did not run again (no agent
    outcome in that slot): those slots are not scored."""
    slots: dict[str, set[int]] = defaultdict(set)
    loose: Counter = Counter()
    for traj in run.trajectories:
        if traj.instance_id not in table or traj.settled or not traj.infra_failure:
            continue
        r = run_index(traj)
        if r is None:
            loose[traj.instance_id] += 1
        elif r < len(table[traj.instance_id]) and table[traj.instance_id][r] is None:
            slots[traj.instance_id].add(r)
    for iid, n in loose.items():
        free = [r for r, t in enumerate(table[iid]) if t is None and r not in slots[iid]]
        slots[iid].update(free[:n])
    return slots


def _runs_in(run: Run) -> int:
    indices = [run_index(t) for t in run.trajectories]
    counted = [i for i in indices if i is not None]
    per_task = Counter(t.instance_id for t in run.trajectories)
    return max([i + 1 for i in counted] + list(per_task.values()) + [1])


def build_report(run: Run, repos: dict[str, str] | None = None, runs: int | None = None) -> dict:
    """The report of `run`. `repos` maps each task to evaluate to its repository (default: every task
    with a trajectory, repository from its SWE-bench id); `runs` the runs expected (default: as found)."""
    if repos is None:
        repos = {t.instance_id: repo_of(t.instance_id) for t in run.trajectories}
    runs = runs or _runs_in(run)
    ids = sorted(repos)
    table = episodes_by_task(run, ids, runs)
    solved = {iid: [bool(t and t.resolved) for t in eps] for iid, eps in table.items()}
    infra = infra_failed_slots(run, table)
    scored = {iid: [r not in infra.get(iid, ()) for r in range(runs)] for iid in ids}

    per_run = [_rate(solved, scored, ids, r) for r in range(runs)]
    p1_mean, p1_sem = mean_sem(per_run)
    episodes = [t for eps in table.values() for t in eps if t is not None]
    statuses = Counter(t.exit_status.value if t.exit_status else "unknown" for t in episodes)
    infra_failed = sum(len(v) for v in infra.values())
    missing = sum(t is None for eps in table.values() for t in eps) - infra_failed

    by_repo: dict[str, list[str]] = defaultdict(list)
    for iid in ids:
        by_repo[repos[iid]].append(iid)
    repo_rows = {}
    for repo, members in sorted(by_repo.items()):
        runs_rate = [_rate(solved, scored, members, r) for r in range(runs)]
        mean, sem = mean_sem(runs_rate)
        repo_rows[repo] = {"tasks": len(members), "pass@1": mean, "pass@1_sem": sem,
                           f"pass@{runs}": _pass_k(solved, scored, members, runs),
                           "resolved_episodes": sum(sum(solved[i]) for i in members)}

    return {
        "run_dir": str(run.run_dir),
        "tasks": len(ids), "runs": runs, "episodes": len(episodes), "missing_episodes": missing,
        "infra_failed_episodes": infra_failed, "scored_episodes": len(ids) * runs - infra_failed,
        # saved but not the agent's outcome (infra failure kinds, cancelled): not scored
        "unsettled_episodes": dict(Counter(t.infra_failure or "cancelled" for t in run.trajectories if not t.settled)),
        "pass@1": p1_mean, "pass@1_sem": p1_sem, "pass@1_per_run": per_run,
        "pass@k": {str(k): _pass_k(solved, scored, ids, k) for k in range(1, runs + 1)},
        "exit_status": dict(sorted(statuses.items(), key=lambda kv: -kv[1])),
        "submit_rate": statuses.get("submitted", 0) / len(episodes) if episodes else 0.0,
        "mean_turns": sum(t.num_turns for t in episodes) / len(episodes) if episodes else 0.0,
        "per_repo": repo_rows,
        "per_task": {iid: {"repo": repos[iid], "resolved": sum(solved[iid]),
                           "episodes": sum(t is not None for t in table[iid]),
                           "resolved_runs": [r for r in range(runs) if solved[iid][r]]} for iid in ids},
        "metrics": mean_metrics(episode_metrics(t) for t in episodes),
        "load_errors": [str(e) for e in run.errors],
    }


def _rate(solved: dict[str, list[bool]], scored: dict[str, list[bool]], ids: list[str], r: int) -> float:
    """Run r's resolved fraction over the tasks whose episode r is scored (0 when none is)."""
    counted = [i for i in ids if scored[i][r]]
    return sum(solved[i][r] for i in counted) / len(counted) if counted else 0.0


def _pass_k(solved: dict[str, list[bool]], scored: dict[str, list[bool]], ids: list[str], k: int) -> float:
    """Unbiased Pass@k (Chen et al. 2021) averaged over tasks, n = a task's scored runs (a missing episode is
    a failure, an infrastructure failure is not a run); a task with fewer than k scored runs is left out."""
    rows = [(sum(scored[i]), sum(s for s, ok in zip(solved[i], scored[i]) if ok)) for i in ids]
    rows = [(n, c) for n, c in rows if n >= k]
    return sum(pass_at_k(n, c, k) for n, c in rows) / len(rows) if rows else 0.0


def prediction_patch(traj: Trajectory | None) -> str:
    """The patch the report graded: empty for a missing or ungraded episode (unsubmitted, and the agent was
    not configured to grade those), so the official harness counts exactly what this report counts."""
    return traj.patch if traj is not None and traj.grade is not None else ""


def write_predictions(run: Run, instance_ids: list[str], runs: int, out_dir: Path, model_name: str) -> list[Path]:
    """`out_dir/run_<r>.jsonl` per run, swebench format (instance_id, model_name_or_path, model_patch):
    `python -m swebench.harness.run_evaluation --predictions_path out_dir/run_0.jsonl --run_id run_0`."""
    table = episodes_by_task(run, sorted(instance_ids), runs)
    paths = []
    for r in range(runs):
        lines = [json.dumps({"instance_id": iid, "model_name_or_path": model_name,
                             "model_patch": prediction_patch(eps[r])}) for iid, eps in table.items()]
        paths.append(write_text_atomic(Path(out_dir) / f"run_{r}.jsonl", "".join(line + "\n" for line in lines)))
    return paths


def write_report(report: dict, path: Path) -> Path:
    return write_json_atomic(Path(path), report, indent=1)
