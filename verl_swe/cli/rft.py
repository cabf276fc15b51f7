"""`verl-swe rft`: rejection fine-tuning data (P1 Sec. 4.2): `collect` episodes, `build` the SFT parquet.
Training is verl's SFT trainer: `bash recipes/run_rft_qwen72b.sh`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from verl_swe.cli.episodes import (Backend, CacheDir, ContextTokens, InstanceIds, Instances, MaxNewTokens, MaxTurns,
                                   ReposDir, Temperature, TimeoutS, Tokenizer, ToolSetName, Workers,
                                   read_selected_tasks, resolve_decoding_option, run_episodes)

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)
rft_app = typer.Typer(no_args_is_help=True, help="Rejection fine-tuning: collect episodes, build SFT data.")


@rft_app.command()
def collect(
    instances: Instances,
    endpoint: Annotated[str, typer.Option(help="OpenAI-compatible server URL (vllm serve), or 'local' for --model on CPU")],
    model: Annotated[str, typer.Option(help="model name at the endpoint; its tokenizer (HF name or path) templates the chat")],
    out: Annotated[Path, typer.Option(help="run directory: trajectories/, summary.json, rft_collect.json")],
    n: Annotated[int, typer.Option(min=1, help="episodes per task (paper: 10)")] = 10,
    demo: Annotated[Optional[Path], typer.Option(help="one-shot demonstration for the system prompt, collection "
                                                      "only: a trajectory .json (rendered) or a text file")] = None,
    tokenizer: Tokenizer = None,
    backend: Backend = "docker",
    workers: Workers = 4,
    tool_set: ToolSetName = "paper",
    max_turns: MaxTurns = 40,
    context_tokens: ContextTokens = 65_536,
    max_new_tokens: MaxNewTokens = 4_096,
    timeout_s: TimeoutS = 3_600.0,
    temperature: Temperature = 1.0,
    repos_dir: ReposDir = None,
    cache_dir: CacheDir = None,
    instance_ids: InstanceIds = None,
):
    """Run N episodes per task with the RL agent loop; resumes: a task sampled K times gets only N-K more."""
    from pydantic import ValidationError

    from verl_swe.agent.config import AgentConfig, LimitsConfig
    from verl_swe.rft.collect import RunDirMismatch, claim_run_dir, collection_config
    from verl_swe.rft.demo import DemoError, load_demo

    tasks = read_selected_tasks(instances, instance_ids)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer or model)
    try:
        demo_text = load_demo(demo) if demo is not None else None
        cfg = AgentConfig(tool_set=tool_set, backend=backend, repos_dir=repos_dir, cache_dir=cache_dir,
                          trajectory_dir=out, limits=LimitsConfig(max_turns=max_turns, context_tokens=context_tokens,
                                                                  max_new_tokens=max_new_tokens, timeout_s=timeout_s))
        cfg = collection_config(cfg, demo_text, list(tok.all_special_tokens))
        claim_run_dir(out, demo_text, str(demo) if demo else None, model, tool_set)
    except (KeyError, ValidationError, DemoError, RunDirMismatch) as e:
        raise typer.BadParameter(str(e)) from None
    decoding = resolve_decoding_option(None, "rollout", model, tokenizer, temperature)
    summary = run_episodes(tasks, cfg, tok, endpoint, model, n, out, workers, decoding)
    console.print(json.dumps({k: v for k, v in summary.items() if k != "per_task"}))
    console.print(f"trajectories: {out / 'trajectories'}   next: verl-swe rft build {out} --out sft.parquet "
                  f"--tokenizer {tokenizer or model}")


@rft_app.command()
def build(
    run_dirs: List[Path] = typer.Argument(..., help="run directories of `rft collect` (or `rollout`)"),
    out: Path = typer.Option(..., help="the SFT parquet; its report goes next to it as <name>.report.json"),
    tokenizer: str = typer.Option(..., help="the tokenizer of the model to train (HF name or path)"),
    max_tokens: int = typer.Option(65_536, min=16, help="context budget: longer trajectories are excluded "
                                                        "(paper: 65k, P1 App. C); match data.max_length"),
    dedupe: bool = typer.Option(True, help="drop trajectories repeating a kept one's task and assistant turns"),
    max_per_task: Optional[int] = typer.Option(None, min=1, help="keep at most this many per task (paper: no cap)"),
):
    """Keep resolved trajectories, deduplicate, write verl multi-turn SFT parquet and a funnel report."""
    from transformers import AutoTokenizer

    from verl_swe.rft.build import NothingToTrain, build_sft_data

    tok = AutoTokenizer.from_pretrained(tokenizer)
    try:
        report = build_sft_data(run_dirs, out, tok, max_tokens, dedupe=dedupe, max_per_task=max_per_task)
    except NothingToTrain as e:
        err_console.print(f"[red]{e}[/]")
        raise typer.Exit(1) from None
    _print_report(report.to_dict())


def _print_report(r: dict) -> None:
    table = Table(title="RFT funnel (paper: 72,490 episodes -> 6,548 kept)")
    for col in ("stage", "count"):
        table.add_column(col)
    for stage, count in [("trajectory files", r["files"]), ("episodes", r["episodes"]), ("resolved", r["resolved"]),
                         *[(f"  excluded: {k}", v) for k, v in sorted(r["excluded"].items())], ("kept", r["kept"])]:
        table.add_row(stage, str(count))
    console.print(table)
    console.print(f"tasks {r['tasks']}  tokens {r['tokens']}  turns {r['turns']}")
    ids = r["token_ids"]
    console.print(f"assistant ids: {ids['sampled']} rows as the rollout sampled them, {ids['reencoded']} re-encoded "
                  f"from text (no ids recorded); {ids['reencoding_differs']} sampled rows ({ids['turns_differ']} "
                  "turns) would differ if re-encoded")
    for p in r["problems"]:
        err_console.print(f"[yellow]{p['reason']}[/] {p['path']}: {p['message']}")
    console.print(f"wrote {r['out']} and {r['report_path']}")
