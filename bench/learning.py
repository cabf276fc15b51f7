"""Does DAPO make the agent better? The CPU pipeline's learning run beside a negative control, recorded.

    python bench/learning.py --out runs/learning              # runs (or resumes) both arms
    python bench/learning.py --out runs/learning --record     # only records finished arms

One start policy (the pipeline's model, oracle and RFT stages, run once), then two RL arms from it with the same
harness, seeds and step count: `treatment`, the tiny recipe (swe_dapo_tiny_cpu.yaml), and `control`, the same
with the advantages' sign flipped (verl_swe/algo/controls.py). Each arm is evaluated before RL (the start policy:
the baseline, measured in this run) and after, on held-out episodes: the training tasks, sampled with a vLLM seed
the rollouts never use (Options.eval_seed). Writes bench/learning-results.json and
bench/learning-control-results.json (`"control": true`), and bench/plots/learning_*.png.

The start policy (`--start`). By default it imitates two scripted agents on each task: the oracle, which edits
the code and submits, and the hasty demonstrator (verl_swe/agent/oracle.py), which opens the same file and
submits it unfixed. It so fails most episodes by a well-formed wrong choice, as a weak LLM does, and RL has
something to learn: which of its two plans the tests reward. `--start oracle` is the main job's pure RFT model,
a memoriser of the one resolving path whose failures are slips followed by noise: from it no setting tried made
the agent better (bench/README.md, "Learning run", and bench/update_decomposition.py for why).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import psutil

from verl_swe.eval.plots import plot_learning
from verl_swe.eval.update_check import demonstration_log_prob, demonstrations, load_policy, update_direction
from verl_swe.pipeline.tiny_cpu import Options, Pipeline, options_dict, write_options
from verl_swe.testing.tokenizer import qwen_tokenizer

ARMS = {"treatment": (), "control": ("algorithm.adv_estimator=grpo_sign_flipped",)}
STARTS = {"oracle+hasty": True, "oracle": False}  # Options.hasty_demos
SHARED = ("model-init", "data", "oracle", "hasty", "rft", "eval/rft")  # what the control reuses from the treatment
SHARED_STAGES = ("model", "oracle", "rft", "eval_rft")


def share_baseline(treatment: Path, control: Path) -> None:
    """The control arm starts from the treatment's start policy and baseline evaluation (links, not copies)."""
    for rel in SHARED:
        link = control / rel
        if not link.exists() and (treatment / rel).exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(treatment / rel)
    (control / "stages").mkdir(parents=True, exist_ok=True)
    for stage in SHARED_STAGES:
        target = control / "stages" / f"{stage}.json"
        if not target.exists():
            target.write_text((treatment / "stages" / f"{stage}.json").read_text())


def improvement(before: dict, after: dict) -> dict:
    """The change in held-out Pass@1 in units of the baseline's SEM and of the difference's SEM."""
    delta = after["pass@1"] - before["pass@1"]
    joint = math.hypot(before["pass@1_sem"], after["pass@1_sem"])
    return {"pass@1_delta": round(delta, 4),
            "in_baseline_sems": round(delta / before["pass@1_sem"], 2) if before["pass@1_sem"] else None,
            "in_difference_sems": round(delta / joint, 2) if joint else None}


def machine() -> dict:
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
            "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "accelerator": "none"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("runs/learning"))
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--start", choices=list(STARTS), default="oracle+hasty",
                        help="what the start policy imitates (see the module docstring)")
    parser.add_argument("--rft-epochs", type=int, default=60, help="the start policy's SFT epochs")
    parser.add_argument("--rl-steps", type=int, default=24)
    parser.add_argument("--eval-runs", type=int, default=8)
    parser.add_argument("--arm", choices=list(ARMS), action="append", help="run only these arms (default: both)")
    parser.add_argument("--rl-override", action="append", default=[], help="a Hydra override for both arms' RL")
    parser.add_argument("--record", action="store_true", help="do not run; record the finished arms in --out")
    parser.add_argument("--results-dir", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()

    out = args.out.resolve()
    pipelines = {}
    for arm, overrides in ARMS.items():
        opts = Options(out=out / arm, backend=args.backend, hasty_demos=STARTS[args.start],
                       rft_epochs=args.rft_epochs, rl_steps=args.rl_steps, eval_runs=args.eval_runs,
                       rl_overrides=(*args.rl_override, *overrides))
        pipelines[arm] = Pipeline(opts)
        if args.record or (args.arm and arm not in args.arm):
            continue
        write_options(opts)
        if arm == "control":
            share_baseline(out / "treatment", out / "control")
        pipelines[arm].run()

    evals, arms = {}, {}
    tokenizer = qwen_tokenizer()
    for arm, pipeline in pipelines.items():
        summary_path = pipeline.out / "summary.json"
        if not summary_path.exists():
            continue
        summary = json.loads(summary_path.read_text())
        before, after = summary["eval_before_rl"], summary["eval_after_rl"]
        evals[arm], arms[arm] = {"before": before, "after": after}, Path(summary["metrics"])
        last = summary["rl_steps"][-1]["step"]
        # the last update, checked against its advantages (positive: the update followed them)
        check = update_direction(pipeline.out / "rl", last, tokenizer)
        # the chance of sampling the oracle's path, the one every resolved episode follows: low-variance
        # companion of pass@1 (verl_swe/eval/update_check.py)
        demos = demonstrations(pipeline.out / "oracle", tokenizer)
        scored = {when: demonstration_log_prob(load_policy(Path(evals[arm][when]["model"])), demos)
                  for when in ("before", "after")}
        result = {"machine": machine(), "control": arm == "control", "arm": arm, "update_check": check,
                  "demonstrations": {when: {k: v[k] for k in ("log_prob", "prob")} for when, v in scored.items()},
                  "rl_overrides": list(pipeline.o.rl_overrides), "options": options_dict(pipeline.o),
                  "improvement": improvement(before, after),
                  **{k: v for k, v in summary.items() if k not in ("plots", "metrics")}}
        name = "learning-control-results.json" if arm == "control" else "learning-results.json"
        (args.results_dir / name).write_text(json.dumps(result, indent=1) + "\n")
        print(f"{arm}: pass@1 {before['pass@1']:.3f} +- {before['pass@1_sem']:.3f} -> "
              f"{after['pass@1']:.3f} +- {after['pass@1_sem']:.3f}  {result['improvement']}  update {check}")
    for path in plot_learning(arms, evals, args.results_dir / "plots"):  # beside the results they plot
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
