"""The CPU pipeline's report: the RL metrics of every attempt merged into one JSONL, plots, and a summary
(stage times, pass@1 / pass@k before and after RL, per-step reward and time split) as JSON and Markdown."""

from __future__ import annotations

import json
from pathlib import Path

from verl_swe.files import write_json_atomic, write_text_atomic

# verl's timers (timing_s/<name>, seconds per step) for the split the issue asks for; grading runs inside the
# rollout (the agent loop grades each episode as it ends), so its share is measured from the trajectories.
STEP_SPLIT = {"rollout": "timing_s/gen", "logprob_recompute": "timing_s/old_log_prob",
              "update": "timing_s/update_actor", "weight_sync": "timing_s/update_weights", "step_total": "timing_s/step"}


def merge_attempts(rl_dir: Path) -> list[dict]:
    """One record per step: a resumed run re-logs the steps after its checkpoint; the later attempt wins."""
    by_step: dict[int, dict] = {}
    attempts = sorted(rl_dir.glob("metrics.attempt*.jsonl"), key=lambda p: int(p.stem.split("attempt")[1]))
    for path in attempts:
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                by_step[int(record["step"])] = record
    return [by_step[s] for s in sorted(by_step)]


def grading_seconds(rl_dir: Path) -> float:
    """Mean grading time per RL episode (each episode grades its patch in a fresh sandbox)."""
    from verl_swe.agent.trajectories import load_trajectories

    times = [t.timings["grade_s"] for t in load_trajectories(rl_dir) if "grade_s" in t.timings]
    return sum(times) / len(times) if times else 0.0


def write_summary(pipeline) -> dict:
    from verl_swe.eval.plots import plot_eval, plot_training

    out: Path = pipeline.out
    rl_dir = out / "rl"
    records = merge_attempts(rl_dir) if rl_dir.exists() else []
    metrics_path = write_text_atomic(rl_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    plots = plot_training(metrics_path, out / "plots") if records else []
    for name in ("rft", "rl"):  # pass@1 per run and pass@k of each evaluation
        report = out / "eval" / name / "report.json"
        if report.exists():
            plots += plot_eval(json.loads(report.read_text()), out / "plots" / f"eval_{name}")
    stages = {name: pipeline.stage_record(name) for name in ("model", "oracle", "rft", "eval_rft", "rl", "eval_rl")}
    steps = [{"step": r["step"],
              "reward": r["data"].get("swe/reward", r["data"].get("critic/score/mean")),
              "resolved": r["data"].get("swe/resolved"),
              "groups_kept_frac": r["data"].get("swe/groups_kept_frac"),
              "num_turns": r["data"].get("swe/num_turns"),
              **{k: r["data"].get(key) for k, key in STEP_SPLIT.items()}} for r in records]
    summary = {
        "stage_seconds": {k: v["seconds"] for k, v in stages.items() if v},
        "oracle": stages["oracle"], "rft": stages["rft"],
        "eval_before_rl": stages["eval_rft"], "eval_after_rl": stages["eval_rl"],
        "rl_steps": steps, "grading_s_per_episode": round(grading_seconds(rl_dir), 3),
        "plots": [str(p) for p in plots], "metrics": str(metrics_path),
    }
    write_json_atomic(out / "summary.json", summary, indent=1)
    write_text_atomic(out / "summary.md", markdown(summary))
    print(markdown(summary), flush=True)
    return {"summary": str(out / "summary.json")}


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def markdown(s: dict) -> str:
    lines = ["# tiny CPU pipeline", "", "| stage | seconds |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in s["stage_seconds"].items()]
    lines += ["", "| evaluation | pass@1 | sem | pass@k |", "|---|---|---|---|"]
    for name in ("eval_before_rl", "eval_after_rl"):
        e = s[name]
        if e:
            k = next((key for key in e if key.startswith("pass@") and key != "pass@1" and key != "pass@1_sem"), None)
            lines.append(f"| {name} | {_fmt(e['pass@1'])} | {_fmt(e['pass@1_sem'])} | {k}={_fmt(e.get(k))} |")
    cols = ["step", "reward", "resolved", "groups_kept_frac", "num_turns", *STEP_SPLIT]
    lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(row.get(c)) for c in cols) + " |" for row in s["rl_steps"]]
    lines += ["", f"grading per episode: {s['grading_s_per_episode']} s (inside rollout)", ""]
    return "\n".join(lines)
