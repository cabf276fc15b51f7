"""`verl-swe curate`: SWE-rebench tasks to verl's RL parquet, with a funnel report and a CSV of every drop."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from verl_swe.cli.tasks import BACKEND_HELP, _environments

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _overrides(**sections: dict) -> dict:
    """Only the options given on the command line, so they override the YAML and nothing else does."""
    return {name: {k: v for k, v in values.items() if v not in (None, [], False)}
            for name, values in sections.items()}


def curate(
    input: str = typer.Option(..., "--input", help="tasks: .jsonl/.json/.parquet file or a hub dataset name[:split]"),
    output: Path = typer.Option(..., help="the RL parquet to write (verl's data.train_files)"),
    report: Path = typer.Option(..., help="report directory: funnel.json, dropped.csv, decisions.jsonl, logs/, "
                                          "checks.jsonl (finished sandbox checks; a rerun resumes from them)"),
    backend: str = typer.Option("docker", help=BACKEND_HELP),
    workers: int = typer.Option(2, min=1, help="tasks checked in sandboxes at once"),
    config: Optional[Path] = typer.Option(None, help="YAML with the rule settings (verl_swe/curate/config.py)"),
    runs: Optional[int] = typer.Option(None, min=0, help="determinism: test runs per task with the gold patch "
                                                         "(default 50, the paper's; 0 skips the rule)"),
    test_timeout: Optional[float] = typer.Option(None, help="seconds one test run may take (default 1800)"),
    max_files: Optional[int] = typer.Option(None, min=1, help="complexity: files the gold patch may touch (7)"),
    max_lines: Optional[int] = typer.Option(None, min=1, help="complexity: lines it may change (499)"),
    llm_score_field: Optional[List[str]] = typer.Option(None, help="quality: meta.llm_score sub-score to check "
                                                                   "(repeatable; default all three)"),
    exclude_instances: Optional[List[Path]] = typer.Option(None, help="decontamination: ids (one a line) or a task "
                                                                      "file, e.g. a SWE-rebench monthly split"),
    exclude_repo: Optional[List[str]] = typer.Option(None, help="decontamination: drop this owner/name (repeatable)"),
    exclude_verified_repos: bool = typer.Option(False, help="decontamination: drop SWE-bench Verified's 12 repos"),
    created_from: Optional[datetime] = typer.Option(None, formats=["%Y-%m-%d"],
                                                    help="decontamination: drop tasks created on or after this date"),
    no_verified_ids: bool = typer.Option(False, help="do not drop SWE-bench Verified's own instances"),
    no_sandbox: bool = typer.Option(False, help="row rules only: no environments, no test runs (a quick funnel)"),
    fresh: bool = typer.Option(False, help="forget the sandbox checks of earlier runs"),
    repos_dir: Optional[Path] = typer.Option(None, help="directory of owner__name git clones"),
    cache_dir: Optional[Path] = typer.Option(None, help="environment cache (default $VERL_SWE_CACHE)"),
):
    """Filter tasks by the paper's rules (P1 Sec. 4.1) and write verl's RL parquet; exit 0 whatever was dropped."""
    from verl_swe.curate import CurateConfigError, curate as run_curate, load_config
    from verl_swe.curate.decontam import DecontaminationError

    overrides = _overrides(
        checks={"runs": runs, "test_timeout_s": test_timeout},
        complexity={"max_files": max_files, "max_lines": max_lines},
        quality={"fields": llm_score_field or []},
        decontamination={"instance_files": exclude_instances or [], "repos": exclude_repo or [],
                         "verified_repos": exclude_verified_repos,
                         "created_from": created_from.date() if created_from else None},
    )
    if no_verified_ids:
        overrides["decontamination"]["verified_ids"] = False
    if no_sandbox:
        overrides["checks"]["enabled"] = False
    try:
        cfg = load_config(config, overrides)
    except CurateConfigError as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    envs = _environments(backend, repos_dir, cache_dir) if cfg.checks.enabled else None
    try:
        doc = asyncio.run(run_curate(input, output, report, cfg, envs, workers=workers, progress=True, fresh=fresh))
    except (FileNotFoundError, ValueError, DecontaminationError) as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    finally:
        if envs is not None:
            envs.close()
    _print_funnel(doc)
    console.print(f"{doc['kept']} of {doc['rows']} tasks kept: {output}")
    console.print(f"report: {report / 'funnel.json'}   dropped: {report / 'dropped.csv'}")


def _print_funnel(doc: dict) -> None:
    table = Table(title="verl-swe curate: tasks left after each rule")
    for col in ("rule", "dropped", "remaining", "what it drops"):
        table.add_column(col)
    table.add_row("(input rows)", "", str(doc["rows"]), "")
    for stage in doc["funnel"]:
        dropped = "skipped" if stage.get("skipped") else str(stage["dropped"])
        table.add_row(stage["rule"], dropped, str(stage["remaining"]), stage["description"])
    console.print(table)
    if doc["sandbox_checks_from_earlier_runs"]:
        console.print(f"{doc['sandbox_checks_from_earlier_runs']} sandbox checks reused from earlier runs")
