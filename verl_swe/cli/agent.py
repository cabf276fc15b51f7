"""`verl-swe rollout`: run the SWE agent against a served model (or a local one) from the command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def rollout(
    instances: str = typer.Option(..., help="tasks: .jsonl/.json/.parquet file or a hub dataset name[:split]"),
    endpoint: str = typer.Option(..., help="OpenAI-compatible server URL (vllm serve), or 'local' for --model on CPU"),
    model: str = typer.Option(..., help="model name at the endpoint; its tokenizer (HF name or path) templates the chat"),
    tokenizer: Optional[str] = typer.Option(None, help="tokenizer name or path, if not the model's"),
    n: int = typer.Option(1, min=1, help="episodes per task"),
    out: Path = typer.Option(..., help="run directory: trajectories/, predictions.jsonl, summary.json"),
    backend: str = typer.Option("docker", help="docker or local"),
    workers: int = typer.Option(4, min=1, help="episodes at once"),
    tool_set: str = typer.Option("paper", help="paper (```command blocks) or native (tool calls)"),
    max_turns: int = typer.Option(40, min=1),
    context_tokens: int = typer.Option(65_536, min=64),
    max_new_tokens: int = typer.Option(4_096, min=1),
    temperature: float = typer.Option(1.0, min=0.0),
    repos_dir: Optional[Path] = typer.Option(None, help="directory of owner__name git clones"),
    cache_dir: Optional[Path] = typer.Option(None, help="environment cache (default $VERL_SWE_CACHE)"),
    instance_ids: Optional[List[str]] = typer.Option(None, "--instance-id", help="only these tasks (repeatable)"),
):
    """Run N episodes per task; saves each trajectory as it ends, and resumes a run directory."""
    from pydantic import ValidationError

    from verl_swe.agent.config import AgentConfig, LimitsConfig
    from verl_swe.agent.llm import Sampling
    from verl_swe.agent.rollout import rollout as run_rollout
    from verl_swe.agent.runner import AgentRunner
    from verl_swe.tasks import read_tasks
    from verl_swe.tasks.loader import select

    tasks, errors = read_tasks(instances)
    for e in errors:
        err_console.print(f"[yellow]skipped malformed row[/] {e}")
    try:
        tasks = select(tasks, instance_ids)
        cfg = AgentConfig(tool_set=tool_set, backend=backend, repos_dir=repos_dir, cache_dir=cache_dir,
                          trajectory_dir=out, limits=LimitsConfig(max_turns=max_turns, context_tokens=context_tokens,
                                                                  max_new_tokens=max_new_tokens))
    except (KeyError, ValidationError) as e:
        raise typer.BadParameter(str(e)) from None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer or model)
    runner = AgentRunner(cfg, tok)
    sampling = Sampling(max_tokens=max_new_tokens, temperature=temperature)

    async def main():
        if endpoint == "local":
            from transformers import AutoModelForCausalLM

            from verl_swe.agent.llm_local import TransformersClient

            llm = TransformersClient(AutoModelForCausalLM.from_pretrained(model), runner.chat.end_of_turn_id)
        else:
            from verl_swe.agent.llm_openai import OpenAICompletionsClient

            llm = OpenAICompletionsClient(endpoint, model)
        try:
            return await run_rollout(tasks, runner, llm, sampling, n, out, workers=workers, model_name=model,
                                     progress=True)
        finally:
            if hasattr(llm, "aclose"):
                await llm.aclose()

    try:
        summary = asyncio.run(main())
    finally:
        runner.close()
    console.print(json.dumps({k: v for k, v in summary.items() if k != "per_task"}))
    console.print(f"trajectories: {out / 'trajectories'}   predictions: {out / 'predictions.jsonl'}")
