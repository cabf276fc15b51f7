"""What `rollout`, `rft collect` and `eval` share: the options of an episode run, and the run itself.

The options are `Annotated` aliases, so each command declares them in one short line and a Python caller
(`eval` calls `rollout`) gets plain defaults rather than typer's option objects.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.console import Console

err_console = Console(stderr=True, soft_wrap=True)

Instances = Annotated[str, typer.Option(help="tasks: .jsonl/.json/.parquet file or a hub dataset name[:split]")]
Tokenizer = Annotated[Optional[str], typer.Option(help="tokenizer name or path, if not the model's")]
Backend = Annotated[str, typer.Option(help="docker or local")]
Workers = Annotated[int, typer.Option(min=1, help="episodes at once")]
ToolSetName = Annotated[str, typer.Option(help="paper (```command blocks) or native (tool calls)")]
MaxTurns = Annotated[int, typer.Option(min=1, help="turns per episode (paper: 40 in stage 1, 80 in stage 2)")]
ContextTokens = Annotated[int, typer.Option(min=64, help="token budget of an episode, prompt included")]
MaxNewTokens = Annotated[int, typer.Option(min=1, help="tokens the model may generate per turn")]
TimeoutS = Annotated[float, typer.Option(min=0.001, help="wall clock per episode, seconds (then exit_status timeout)")]
Temperature = Annotated[float, typer.Option(min=0.0)]
ReposDir = Annotated[Optional[Path], typer.Option(help="directory of owner__name git clones")]
CacheDir = Annotated[Optional[Path], typer.Option(help="environment cache (default $VERL_SWE_CACHE)")]
InstanceIds = Annotated[Optional[List[str]], typer.Option("--instance-id", help="only these tasks (repeatable)")]
DecodingSpec = Annotated[Optional[List[str]], typer.Option(
    "--decoding", help="rollout (temperature 1, filters off), model-defaults[=PATH] (the model's "
                       "generation_config.json), and/or KEY=VALUE overrides (temperature, top_p, top_k, min_p, "
                       "repetition_penalty, ...); repeatable")]
OptionalTemperature = Annotated[Optional[float], typer.Option(min=0.0, help="shorthand for --decoding temperature=T")]


def resolve_decoding_option(spec: list[str] | None, default: str, model: str | None, tokenizer: str | None,
                            temperature: float | None = None):
    """`--decoding` (and `--temperature`, an override on top) resolved, or a usage error naming the option."""
    from verl_swe.agent.decoding import DecodingError, resolve_decoding

    spec = list(spec or []) + ([f"temperature={temperature}"] if temperature is not None else [])
    try:
        return resolve_decoding(spec, default, model, tokenizer)
    except DecodingError as e:
        raise typer.BadParameter(str(e), param_hint="--decoding") from None


def read_selected_tasks(instances: str, instance_ids: list[str] | None) -> list:
    """The tasks of `instances` (malformed rows reported and skipped), narrowed to `instance_ids`."""
    from verl_swe.tasks import read_tasks
    from verl_swe.tasks.loader import select

    try:
        tasks, errors = read_tasks(instances)
    except (FileNotFoundError, ValueError) as e:  # no such file, unknown format, unreachable hub
        raise typer.BadParameter(str(e), param_hint="--instances") from None
    for e in errors:
        err_console.print(f"[yellow]skipped malformed row[/] {e}")
    try:
        return select(tasks, instance_ids)
    except KeyError as e:
        raise typer.BadParameter(str(e.args[0]), param_hint="--instance-id") from None


def run_episodes(tasks: list, config, tokenizer, endpoint: str, model: str, n: int, out: Path, workers: int,
                 decoding) -> dict:
    """K episodes per task against `endpoint` (or `local`: `model` loaded here), resumable in `out`, sampled
    with `decoding` (a verl_swe.agent.decoding.Decoding).

    A failed model server stops the run with exit status 1: the episodes it abandoned are not saved, so
    rerunning the same command runs exactly those and the ones never started.
    """
    from verl_swe.agent.llm import ModelError
    from verl_swe.agent.rollout import rollout_at
    from verl_swe.agent.runner import AgentRunner

    runner = AgentRunner(config, tokenizer)
    sampling = decoding.sampling(config.limits.max_new_tokens)
    try:
        return asyncio.run(rollout_at(endpoint, model, tasks, runner, sampling, n, out, workers, progress=True))
    except ModelError as e:
        err_console.print(f"[red]the model failed:[/] {e}\nFinished episodes are saved in {out}; rerun the same "
                          "command to run the rest.")
        raise typer.Exit(1) from None
    finally:
        runner.close()
