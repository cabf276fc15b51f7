"""`verl-swe rollout`: K episodes per task against a served model, outside training.

Trajectories are saved as they finish; a rerun into the same RUN_DIR only runs the episodes still
missing, so an interrupted collection loses nothing. RUN_DIR also gets `predictions.jsonl` (the
first submitted patch per task, swebench format) and `summary.json`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from verl_swe.agent.llm import LLMClient, Sampling
from verl_swe.agent.runner import AgentRunner
from verl_swe.agent.trajectories import load_trajectories
from verl_swe.concurrency import bounded_gather
from verl_swe.files import write_json_atomic, write_text_atomic
from verl_swe.tasks import Task


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


async def rollout(tasks: list[Task], runner: AgentRunner, llm: LLMClient, sampling: Sampling, n: int,
                  run_dir: Path, workers: int = 4, model_name: str = "verl-swe", progress: bool = False) -> dict:
    run_dir = Path(run_dir)
    # Episode i of a task is `<instance_id>.<i>`: a rerun runs exactly the indices with no saved trajectory, or
    # only a cancelled or infrastructure-failed one (not settled: load_trajectories leaves those out).
    done = {traj.episode_id for traj in load_trajectories(run_dir)}
    todo = [(t, i) for t in tasks for i in range(n) if f"{t.instance_id}.{i}" not in done]
    episodes = (runner.run(t, llm, sampling, episode_id=f"{t.instance_id}.{i}") for t, i in todo)
    try:
        await bounded_gather(episodes, workers, "episodes" if progress else None, unit="ep")
    finally:
        await runner.placement.aclose()  # warm sandboxes, if any (placement.warm_per_image)
    return summarize(tasks, run_dir, n, model_name)


async def rollout_at(endpoint: str, model: str, tasks: list[Task], runner: AgentRunner, sampling: Sampling, n: int,
                     run_dir: Path, workers: int = 4, model_name: str | None = None, progress: bool = False) -> dict:
    """`rollout` against the OpenAI-compatible server at `endpoint` serving `model` (or, with endpoint `local`,
    `model` loaded here with transformers); the client is closed after."""
    if endpoint == "local":
        from transformers import AutoModelForCausalLM

        from verl_swe.agent.llm_local import TransformersClient

        llm = TransformersClient(AutoModelForCausalLM.from_pretrained(model), runner.chat.end_of_turn_id)
    else:
        from verl_swe.agent.llm_openai import OpenAICompletionsClient

        llm = OpenAICompletionsClient(endpoint, model)
    try:
        return await rollout(tasks, runner, llm, sampling, n, run_dir, workers=workers,
                             model_name=model_name or model, progress=progress)
    finally:
        if hasattr(llm, "aclose"):
            await llm.aclose()


def summarize(tasks: list[Task], run_dir: Path, n: int, model_name: str) -> dict:
    by_task: dict[str, list] = {t.instance_id: [] for t in tasks}
    for traj in load_trajectories(run_dir):
        if traj.instance_id in by_task:
            by_task[traj.instance_id].append(traj)
    per_task, predictions = {}, []
    for iid, trajs in by_task.items():
        trajs.sort(key=lambda t: t.episode_id)
        c = sum(t.resolved for t in trajs)
        per_task[iid] = {"episodes": len(trajs), "resolved": c,
                         "exit_status": {s: sum(t.exit_status.value == s for t in trajs)
                                         for s in sorted({t.exit_status.value for t in trajs})}}
        submitted = [t for t in trajs if t.exit_status.value == "submitted"]
        patch = submitted[0].patch if submitted else ""
        predictions.append(json.dumps({"instance_id": iid, "model_name_or_path": model_name, "model_patch": patch}))
    write_text_atomic(run_dir / "predictions.jsonl", "".join(line + "\n" for line in predictions))
    counts = [(v["episodes"], v["resolved"]) for v in per_task.values() if v["episodes"]]
    summary = {
        "tasks": len(per_task), "episodes": sum(e for e, _ in counts),
        "pass@1": sum(c / e for e, c in counts) / len(counts) if counts else 0.0,
        f"pass@{n}": sum(pass_at_k(e, c, min(n, e)) for e, c in counts) / len(counts) if counts else 0.0,
        "per_task": per_task,
    }
    write_json_atomic(run_dir / "summary.json", summary)
    return summary
