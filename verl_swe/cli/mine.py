"""`verl-swe mine`: SWE tasks from a repository's history (verl_swe/mine/)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from verl_swe.cli.tasks import BACKEND_HELP

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def mine(
    repo: str = typer.Option(..., help="the repository: a local path or a git URL"),
    out: Path = typer.Option(..., help="output: tasks.jsonl (SWE-rebench rows), funnel.json, candidates/ (a rerun "
                                       "resumes from them), repos/ (the --repos-dir of evaluate and envs build)"),
    name: Optional[str] = typer.Option(None, help="owner/name for the rows (default: from the URL, or local/<dir>)"),
    since: Optional[str] = typer.Option(None, help="only commits after this date (git's --since)"),
    commits: Optional[str] = typer.Option(None, help="a commit range A..B (default: HEAD's first-parent history)"),
    prs: Optional[Path] = typer.Option(None, help="JSONL of merged PRs (merge_commit, title, body, issue_title, "
                                                  "issue_body) instead of commits"),
    backend: str = typer.Option("docker", help=BACKEND_HELP),
    cache_dir: Optional[Path] = typer.Option(None, help="environment cache (default ~/.cache/verl-swe)"),
    repeats: int = typer.Option(3, min=1, help="test runs before and after each fix; a test that changes is flaky"),
    workers: int = typer.Option(2, min=1, help="candidates validated in sandboxes at once"),
    install: Optional[str] = typer.Option(None, help="install command (default pip install -e . with the test extra)"),
    test_timeout: float = typer.Option(900.0, help="seconds one test run may take"),
    judge_url: Optional[str] = typer.Option(None, help="an OpenAI-compatible endpoint that scores kept rows' "
                                                       "quality (meta.llm_score), e.g. http://127.0.0.1:8000/v1"),
    judge_model: Optional[str] = typer.Option(None, help="the judge's model name"),
    judge_api_key: Optional[str] = typer.Option(None, envvar="VERL_SWE_JUDGE_API_KEY"),
):
    """Turn a repository's history into validated SWE tasks: candidate fixes (library code and tests changed),
    their environments built offline as the grader builds them, FAIL_TO_PASS / PASS_TO_PASS from repeated runs
    before and after the fix (flaky tests dropped and named), statements checked for leaks, rows written as
    SWE-rebench writes them; `curate`, `evaluate` and training read them as they read SWE-rebench."""
    from verl_swe.mine.history import MineError
    from verl_swe.mine.judge import JudgeConfig
    from verl_swe.mine.miner import STAGES, MineOptions, mine as run

    if bool(judge_url) != bool(judge_model):
        err_console.print("[red]error:[/] --judge-url and --judge-model go together")
        raise typer.Exit(2)
    if commits and prs:
        err_console.print("[red]error:[/] --commits and --prs are two ways to choose candidates: give one")
        raise typer.Exit(2)
    judge = JudgeConfig(judge_url, judge_model, out / "judge_cache", judge_api_key) if judge_url else None
    opts = MineOptions(repo=repo, out=out, name=name, since=since, commits=commits, prs=prs, backend=backend,
                       cache_dir=cache_dir, repeats=repeats, workers=workers, install=install,
                       timeout_s=test_timeout, judge=judge)
    try:
        funnel = asyncio.run(run(opts))
    except MineError as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    table = Table(title=f"{funnel['repo']}: {funnel['commits_looked_at']} commits looked at")
    for stage in STAGES:
        table.add_column(stage.replace("_", " "))
    table.add_row(*(str(funnel[s]) for s in STAGES))
    console.print(table)
    for d in funnel["drops"]:
        console.print(f"  dropped {d['commit'][:12]} at {d['stage']}: {d['reason'][:200]}")
    console.print(f"kept rows: {out / 'tasks.jsonl'}; funnel: {out / 'funnel.json'}")
