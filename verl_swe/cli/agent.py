"""`verl-swe rollout`: run the SWE agent against a served model (or a local one) from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from verl_swe.cli.episodes import (Backend, CacheDir, ContextTokens, DecodingSpec, InstanceIds, Instances, MaxNewTokens,
                                   MaxTurns, OptionalTemperature, ReposDir, TimeoutS, Tokenizer, ToolSetName, Workers,
                                   read_selected_tasks, resolve_decoding_option, run_episodes)

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def rollout(
    instances: Instances,
    endpoint: Annotated[str, typer.Option(help="OpenAI-compatible server URL (vllm serve), or 'local' for --model on CPU")],
    model: Annotated[str, typer.Option(help="model name at the endpoint; its tokenizer (HF name or path) templates the chat")],
    out: Annotated[Path, typer.Option(help="run directory: trajectories/, predictions.jsonl, summary.json")],
    tokenizer: Tokenizer = None,
    n: Annotated[int, typer.Option(min=1, help="episodes per task")] = 1,
    backend: Backend = "docker",
    workers: Workers = 4,
    tool_set: ToolSetName = "paper",
    max_turns: MaxTurns = 40,
    context_tokens: ContextTokens = 65_536,
    max_new_tokens: MaxNewTokens = 4_096,
    timeout_s: TimeoutS = 3_600.0,
    temperature: OptionalTemperature = None,
    decoding: DecodingSpec = None,
    repos_dir: ReposDir = None,
    cache_dir: CacheDir = None,
    instance_ids: InstanceIds = None,
):
    """Run N episodes per task; saves each trajectory as it ends, and resumes a run directory. Samples with the
    training rollout's setting unless --decoding says otherwise."""
    from pydantic import ValidationError

    from verl_swe.agent.config import AgentConfig, LimitsConfig

    tasks = read_selected_tasks(instances, instance_ids)
    from verl_swe.agent.decoding import Decoding

    # `eval` passes the Decoding it resolved (its default is the model's, not the rollout's).
    chosen = decoding if isinstance(decoding, Decoding) else resolve_decoding_option(decoding, "rollout", model,
                                                                                     tokenizer, temperature)
    err_console.print(chosen.describe())
    try:
        cfg = AgentConfig(tool_set=tool_set, backend=backend, repos_dir=repos_dir, cache_dir=cache_dir,
                          trajectory_dir=out, limits=LimitsConfig(max_turns=max_turns, context_tokens=context_tokens,
                                                                  max_new_tokens=max_new_tokens, timeout_s=timeout_s))
    except (KeyError, ValidationError) as e:
        raise typer.BadParameter(str(e)) from None
    from transformers import AutoTokenizer

    summary = run_episodes(tasks, cfg, AutoTokenizer.from_pretrained(tokenizer or model), endpoint, model, n, out,
                           workers, chosen)
    console.print(json.dumps({k: v for k, v in summary.items() if k != "per_task"}))
    console.print(f"trajectories: {out / 'trajectories'}   predictions: {out / 'predictions.jsonl'}")
