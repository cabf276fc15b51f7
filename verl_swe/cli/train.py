"""`verl-swe plan`, `rehearse`, `export` and `curriculum`: check a training config, rehearse its start-up,
export a run's model, build the stage-2 task pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _compose(config_name: str, overrides: Optional[List[str]], config_dir: Optional[Path] = None):
    """The recipe as verl_swe.trainer.main composes it; a Hydra error is exit status 2."""
    from hydra import compose, initialize_config_dir, initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        init = initialize_config_dir(str(config_dir.resolve()), version_base=None) if config_dir else \
            initialize_config_module("verl_swe.trainer.config", version_base=None)
        with init:
            return compose(config_name=config_name, overrides=list(overrides or []))
    except (HydraException, OmegaConfBaseException) as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None


def plan(
    config_name: str = typer.Option("swe_dapo_qwen72b", help="a config of verl_swe/trainer/config"),
    overrides: Optional[List[str]] = typer.Argument(None, help="hydra overrides, e.g. trainer.nnodes=8"),
):
    """Check divisibility, context and memory of a training config before any GPU is touched."""
    from verl_swe.trainer.preflight import PreflightError, plan_for, preflight

    cfg = _compose(config_name, overrides)
    p = plan_for(cfg)
    if p is not None:
        table = Table(title=f"plan: {config_name} ({cfg.actor_rollout_ref.model.path})")
        table.add_column("estimate")
        table.add_column("value", justify="right")
        for k, v in p.rows:
            table.add_row(k, v)
        console.print(table)
    try:
        preflight(cfg, rehearse=False)  # arithmetic only; `verl-swe rehearse` runs verl's and vLLM's start-up
    except PreflightError as e:
        err_console.print(f"[red]refused:[/]\n{e}")
        raise typer.Exit(1) from None
    console.print("[green]ok[/]: the layout divides, the context fits, and the estimates fit in GPU memory")


def rehearse(
    config_name: str = typer.Option("swe_dapo_qwen72b", help="a config of verl_swe/trainer/config (or --config-dir)"),
    overrides: Optional[List[str]] = typer.Argument(None, help="hydra overrides, e.g. data.train_files=..."),
    config_dir: Optional[Path] = typer.Option(None, help="compose from this folder instead of the package's"),
    engine: bool = typer.Option(True, help="also build vLLM's engine config (--no-engine: verl's side only)"),
):
    """A GPU run's start-up on this CPU, in under a minute: verl's config validation, the workers' config
    dataclasses, verl's vLLM server arguments and vLLM's engine config, RoPE, context, stop tokens, prompts."""
    from verl_swe.trainer.rehearse import rehearse as run

    cfg = _compose(config_name, overrides, config_dir)
    r = run(cfg, engine=engine)
    console.print(r.report(), markup=False, highlight=False)
    if not r.ok:
        err_console.print(f"[red]refused:[/] {len(r.findings)} problem(s) a GPU run of {config_name} would hit")
        raise typer.Exit(1)
    console.print(f"[green]ok[/]: {config_name} passes verl's and vLLM's start-up logic")


def export(
    run_dir: Path = typer.Argument(..., help="a run directory (trainer.default_local_dir) of RFT or RL"),
    out: Optional[Path] = typer.Option(None, help="the model folder to write (default: RUN_DIR/hf)"),
    step: Optional[int] = typer.Option(None, help="which global_step_N (default: the last checkpoint)"),
    merge: bool = typer.Option(False, help="build it with verl's model merger even if the checkpoint has hf_model"),
):
    """A run's checkpoint as a Hugging Face model: the next stage's model.path, or a model to `vllm serve`."""
    from verl_swe.trainer.export import ExportError
    from verl_swe.trainer.export import export as run

    try:
        folder = run(run_dir, out, step, merge)
    except ExportError as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(1) from None
    record = json.loads((folder / "export.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    console.print(f"{folder}: step {record['step']} ({record['source']}), max_position_embeddings "
                  f"{config.get('max_position_embeddings')}, RoPE {config.get('rope_parameters') or config.get('rope_scaling')}")


def curriculum(
    trajectories: List[Path] = typer.Option(..., help="run directories (or their trajectories/) of stage 1; repeatable"),
    instances: Path = typer.Option(..., help="the stage-1 pool: its RL parquet (data.train_files), or task rows"),
    out: Path = typer.Option(..., help="stage-2 pool: .parquet (verl RL rows, data.train_files) or .jsonl; the "
                                       "success counts go next to it"),
    max_rate: float = typer.Option(2 / 3, help="drop tasks solved in at least this share of attempts (paper: 2/3)"),
):
    """Stage-2 pool (P1): drop tasks solved in >= 2/3 of their attempts and tasks never solved."""
    from verl_swe.agent.trajectories import load_trajectories
    from verl_swe.algo.curriculum import SuccessCounts, filter_rl_parquet, is_rl_parquet, rl_parquet_tasks, stage2_pool
    from verl_swe.tasks import load_tasks
    from verl_swe.tasks.rl_data import write_rl_parquet

    rl_rows = is_rl_parquet(instances)
    tasks = rl_parquet_tasks(instances) if rl_rows else load_tasks(instances)
    ids = [t.instance_id for t in tasks]
    counts = SuccessCounts()
    for run in trajectories:
        run = run.parent if run.name == "trajectories" else run
        # an episode infrastructure ended (issue 17's infra_failure) says nothing about the task's difficulty
        counts.update((t.instance_id, t.resolved) for t in load_trajectories(run) if not getattr(t, "infra_failure", None))
    keep = set(stage2_pool(counts, ids, max_rate))
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet" and rl_rows:
        filter_rl_parquet(instances, out, keep)  # stage 1's rows as they were: prompts, tool set, data_source
    elif out.suffix == ".parquet":
        write_rl_parquet([t for t in tasks if t.instance_id in keep], out)
    else:
        out.write_text("".join(t.model_dump_json() + "\n" for t in tasks if t.instance_id in keep))
    counts.save(out.with_suffix(".counts.json"))
    attempted = sum(1 for i in ids if counts.attempts.get(i))
    console.print(f"{len(ids)} tasks, {attempted} attempted, {sum(counts.attempts.values())} episodes -> "
                  f"{len(keep)} in the stage-2 pool: {out}")


def doctor(
    gpus: bool = typer.Option(False, "--gpus", help="also require visible GPUs (imports torch)"),
    as_json: bool = typer.Option(False, "--json"),
):
    """Does this environment's GPU stack run verl-swe? verl, torch (and its CUDA build against the driver),
    vLLM, transformers, flash-attn, and the attention implementation that follows; exit 1 naming each problem."""
    from verl_swe.trainer.gpu_stack import main

    args = (["--gpus"] if gpus else []) + (["--json"] if as_json else [])
    raise typer.Exit(main(args))
