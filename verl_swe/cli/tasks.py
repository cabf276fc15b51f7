"""`verl-swe envs build` and `verl-swe evaluate`: task environments and grading."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

envs_app = typer.Typer(no_args_is_help=True, help="Task environments: build them ahead of time.")
console = Console(soft_wrap=True)  # long paths and messages stay on one greppable line
err_console = Console(stderr=True, soft_wrap=True)

BACKEND_HELP = "docker or local (bubblewrap, for machines without a container engine)"


def _environments(backend: str, repos_dir: Optional[Path], cache_dir: Optional[Path]):
    from verl_swe.tasks import Environments

    if backend == "docker":
        try:
            from verl_swe.sandbox.docker import docker_client

            docker_client(None).ping()
        except Exception as e:  # noqa: BLE001 - any failure means no engine to talk to
            err_console.print(f"[red]error:[/] no docker engine answers ({e}); start dockerd "
                              "(bash scripts/setup.sh does) or use --backend local")
            raise typer.Exit(2) from None
    try:
        return Environments(backend, repos_dir=repos_dir, cache_dir=cache_dir)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None


@envs_app.command("build")
def envs_build(
    instances: str = typer.Option(..., help="tasks: .jsonl/.json/.parquet file or a hub dataset name[:split]"),
    backend: str = typer.Option("docker", help=BACKEND_HELP),
    repos_dir: Optional[Path] = typer.Option(None, help="directory of owner__name git clones"),
    cache_dir: Optional[Path] = typer.Option(None, help="cache (default $VERL_SWE_CACHE or ~/.cache/verl-swe)"),
    workers: int = typer.Option(2, min=1, help="environments built at once"),
    instance_ids: Optional[List[str]] = typer.Option(None, "--instance-id", help="only these tasks (repeatable)"),
    ray_address: Optional[str] = typer.Option(None, help="a Ray cluster ('auto' or host:port): build on every node "
                                                         "that offers the verl_swe_sandbox resource"),
    report: Optional[Path] = typer.Option(None, help="also write the outcome per node and task as JSON here"),
):
    """Build (or reuse) the environment of every task, with a progress bar; with --ray-address, on every
    sandbox node of the cluster (each builds with its own engine and cache), ahead of training."""
    from verl_swe.tasks import read_tasks
    from verl_swe.tasks.loader import select

    try:
        tasks, row_errors = read_tasks(instances)
        tasks = select(tasks, instance_ids)
    except (FileNotFoundError, ValueError, KeyError) as e:  # no file, unknown format, unreachable hub, unknown id
        err_console.print(f"[red]error:[/] {e.args[0] if isinstance(e, KeyError) else e}")
        raise typer.Exit(2) from None
    for e in row_errors:
        err_console.print(f"[yellow]skipped malformed row[/] {e}")
    if ray_address:
        nodes = _build_on_cluster(ray_address, tasks, backend, repos_dir, cache_dir, workers)
    else:
        from verl_swe.agent.placement import LocalPlacement

        placement = LocalPlacement(_environments(backend, repos_dir, cache_dir))
        started = time.monotonic()
        try:
            errors = asyncio.run(placement.build(tasks, workers=workers, progress=True))
        finally:
            placement.close()
        nodes = [{"node_id": "here", "errors": errors, "seconds": round(time.monotonic() - started, 1)}]
    bad = False
    for node in nodes:
        where = "" if node["node_id"] == "here" else f" on node {node['node_id'][:12]}"
        if "error" in node:
            err_console.print(f"[red]node {node['node_id'][:12]}[/]: {node['error']}")
            bad = True
            continue
        failed = {k: v for k, v in node["errors"].items() if v}
        for iid, msg in failed.items():
            err_console.print(f"[red]{iid}[/]{where}: {msg}")
        bad = bad or bool(failed)
        console.print(f"{len(tasks) - len(failed)}/{len(tasks)} environments ready ({backend}){where} "
                      f"in {node['seconds']:g} s")
    if report:
        from verl_swe.files import write_json_atomic

        write_json_atomic(report, {"backend": backend, "tasks": len(tasks), "nodes": [
            {**{k: v for k, v in n.items() if k != "errors"}, "ready": sum(v is None for v in n.get("errors", {}).values()),
             "failed": {k: v for k, v in n.get("errors", {}).items() if v}} for n in nodes]}, indent=1)
    raise typer.Exit(1 if bad or row_errors else 0)


def _build_on_cluster(address: str, tasks, backend: str, repos_dir, cache_dir, workers: int) -> list[dict]:
    import ray

    from verl_swe.agent.placement_ray import build_on_every_node
    from verl_swe.cli.sandbox import connect_ray

    connect_ray(address)
    try:
        options = {"backend": backend, "repos_dir": repos_dir, "cache_dir": cache_dir}
        nodes = build_on_every_node(options, tasks, workers)
    finally:
        ray.shutdown()
    if not nodes:
        err_console.print("[red]error:[/] no alive node of the cluster offers the verl_swe_sandbox resource")
        raise typer.Exit(2)
    return nodes


def evaluate(
    instances: str = typer.Option(..., help="tasks: .jsonl/.json/.parquet file or a hub dataset name[:split]"),
    predictions: Path = typer.Option(..., help="swebench predictions: instance_id, model_name_or_path, model_patch"),
    output: Path = typer.Option(Path("report.json"), help="where the JSON report goes"),
    backend: str = typer.Option("docker", help=BACKEND_HELP),
    repos_dir: Optional[Path] = typer.Option(None, help="directory of owner__name git clones"),
    cache_dir: Optional[Path] = typer.Option(None, help="cache (default $VERL_SWE_CACHE or ~/.cache/verl-swe)"),
    workers: int = typer.Option(1, min=1, help="predictions graded at once"),
    timeout: float = typer.Option(1800.0, help="seconds the tests of one task may run"),
    log_dir: Optional[Path] = typer.Option(None, help="per-instance test logs and reports (default: next to --output)"),
    static_flags: str = typer.Option("flag", help="patch files with a static tamper flag: flag (report them) or "
                                                  "reject (drop them before grading)"),
):
    """Grade predictions in fresh sandboxes; exit 0 whenever grading ran, whatever was resolved. A test run
    the integrity checks find tampered with is unresolved; the table and the report say why."""
    from verl_swe.files import write_json_atomic
    from verl_swe.reward.evaluate import PredictionsError, evaluate as run_evaluation

    if static_flags not in ("flag", "reject"):
        raise typer.BadParameter(f"--static-flags must be flag or reject, not {static_flags!r}")
    envs = _environments(backend, repos_dir, cache_dir)
    log_dir = log_dir or output.with_name(output.stem + "_logs")
    try:
        report = asyncio.run(run_evaluation(instances, predictions, envs, workers=workers, timeout_s=timeout,
                                            log_dir=log_dir, progress=True, static=static_flags))
    except (PredictionsError, FileNotFoundError, ValueError) as e:
        err_console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    finally:
        envs.close()
    write_json_atomic(output, report.to_json())
    _print_report(report)
    console.print(f"report: {output}   logs: {log_dir}")


def _integrity_cell(r: dict) -> str:
    """tampered (the integrity checks caught the test run), flagged (static tamper flags only), or ok."""
    return "tampered" if r.get("tampered") else "flagged" if r.get("static_flags") else "ok"


def _print_integrity(report) -> None:
    """Below the table, why each run counts as tampered (its checks, the first reason) or is flagged."""
    for iid, r in report.instances.items():
        reasons = (r.get("integrity") or {}).get("reasons") or []
        if r.get("tampered"):
            checks = ", ".join(dict.fromkeys(x["check"] for x in reasons))
            console.print(f"[red]tampered[/] {iid} ({checks}): {reasons[0]['detail'][:200]}")
        elif r.get("static_flags"):
            rules = ", ".join(dict.fromkeys(f["rule"] for f in r["static_flags"]))
            console.print(f"[yellow]flagged[/] {iid}: static tamper flags on the patch: {rules}")


def _print_report(report) -> None:
    table = Table(title="verl-swe evaluate")
    # Long instance ids wrap instead of being cut to "…": the id is what a user looks up in the report.
    table.add_column("instance", overflow="fold")
    for col in ("resolved", "F2P", "P2P", "integrity"):
        table.add_column(col)
    table.add_column("error", overflow="fold")  # a build failure's first line names the command and the error
    for iid, r in report.instances.items():
        ts = r["tests_status"] or {}
        cell = lambda k: (f"{len(ts[k]['success'])}/{len(ts[k]['success']) + len(ts[k]['failure'])}" if k in ts else "-")
        err = (r["error"] or "").splitlines()[0][:300] if r["error"] else ""
        table.add_row(iid, "yes" if r["resolved"] else "no", cell("FAIL_TO_PASS"), cell("PASS_TO_PASS"),
                      _integrity_cell(r), err)
    console.print(table)
    _print_integrity(report)
    for line in report.invalid_rows:
        err_console.print(f"[yellow]malformed task row[/] {line}")
    for iid in report.unknown_predictions:
        err_console.print(f"[yellow]prediction for unknown instance[/] {iid}")
    console.print(json.dumps(report.summary()))
