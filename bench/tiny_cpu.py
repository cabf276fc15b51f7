"""The CPU pipeline's full run, recorded: stage times, pass@1 / pass@k of the RFT model (the baseline RL starts
from, measured in the same run) and of the RL model, the reward curve, and each RL step's time split.

    python bench/tiny_cpu.py --out runs/tiny-cpu-bench            # runs (or resumes) the whole pipeline
    python bench/tiny_cpu.py --out runs/tiny-cpu-bench --record   # only records a finished run

Writes bench/tiny-cpu-results.json (see bench/README.md for the recorded numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import psutil

from verl_swe.pipeline.tiny_cpu import Options, Pipeline, options_dict, write_options


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("runs/tiny-cpu-bench"))
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--rl-steps", type=int, default=4)
    parser.add_argument("--eval-runs", type=int, default=4)
    parser.add_argument("--record", action="store_true", help="do not run; record the finished run in --out")
    parser.add_argument("--results", type=Path, default=Path(__file__).with_name("tiny-cpu-results.json"))
    args = parser.parse_args()
    opts = Options(out=args.out, backend=args.backend, rl_steps=args.rl_steps, eval_runs=args.eval_runs)
    pipeline = Pipeline(opts)
    if not args.record:
        write_options(opts)
        pipeline.run()
    else:
        pipeline.run(only=["report"])
    summary = json.loads((pipeline.out / "summary.json").read_text())
    options = json.loads((pipeline.out / "options.json").read_text()) if (pipeline.out / "options.json").exists() \
        else options_dict(opts)
    result = {
        "machine": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
                    "python": platform.python_version(), "accelerator": "none"},
        "options": options,
        **{k: v for k, v in summary.items() if k not in ("plots", "metrics")},
    }
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    print(f"recorded {args.results}")


if __name__ == "__main__":
    main()
