"""`verl-swe sandbox ...`: run a command in a sandbox, clean up, benchmark."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

sandbox_app = typer.Typer(no_args_is_help=True, help="Sandboxes: run a command, clean up, benchmark.")
console = Console()


def _sandbox_config(backend: str, image: Optional[str], workdir: Optional[str], source_dir: Optional[Path]):
    from pydantic import ValidationError

    from verl_swe.sandbox import parse_sandbox_config

    data: dict = {"backend": backend}
    if image:
        data["image"] = image
    if workdir:
        data["workdir"] = workdir
    if source_dir:
        data["source_dir"] = str(source_dir)
    try:
        return parse_sandbox_config(data)
    except ValidationError as e:
        raise typer.BadParameter(str(e)) from None


@sandbox_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def sandbox_exec(
    ctx: typer.Context,
    backend: str = typer.Option("docker", help="docker or local"),
    image: Optional[str] = typer.Option(None, help="docker image (default: the verl-swe base image)"),
    workdir: Optional[str] = typer.Option(None, help="working directory inside the sandbox"),
    source_dir: Optional[Path] = typer.Option(None, help="local backend: directory copied in as the workdir"),
    timeout: float = typer.Option(120.0, help="seconds before the command is killed"),
):
    """Run one command in a fresh sandbox and print its output: `verl-swe sandbox exec -- CMD ARGS...`.

    Several arguments are a command and its arguments, quoted as given (`-- python3 -c "print(1)"`); a
    single argument is a shell command line (`-- "cd /tmp && ls"`)."""
    import shlex

    command = ctx.args[0] if len(ctx.args) == 1 else shlex.join(ctx.args)
    if not command:
        raise typer.BadParameter("give the command after `--`, e.g. verl-swe sandbox exec -- python -V")
    config = _sandbox_config(backend, image, workdir, source_dir)

    async def run():
        from verl_swe.sandbox import open_sandbox

        async with open_sandbox(config) as sb:
            return await sb.exec(command, timeout=timeout)

    from verl_swe.sandbox import SandboxError

    try:
        result = asyncio.run(run())
    except SandboxError as e:
        console.print(f"[red]sandbox error:[/red] {e}")
        raise typer.Exit(2)
    sys.stdout.write(result.output)
    if result.timed_out:
        console.print(f"[yellow]timed out after {timeout:g} s[/yellow]", style="yellow")
    raise typer.Exit(result.exit_code)


@sandbox_app.command("gc")
def sandbox_gc(
    everything: bool = typer.Option(False, "--all", help="also remove sandboxes of live drivers and other hosts"),
    run: Optional[str] = typer.Option(None, help="only the sandboxes of this run (placement.run / the run dir's name)"),
    ray_address: Optional[str] = typer.Option(None, help="a Ray cluster ('auto' or host:port): gc on every node"),
    docker: bool = typer.Option(True, help="clean docker containers"),
    local: bool = typer.Option(True, help="clean local sandboxes"),
    state_dir: Optional[Path] = typer.Option(None, help="local sandboxes' state dir, if not the default"),
):
    """Remove what sandboxes left behind (containers by label, local state and cgroups), here or on every node."""
    from verl_swe.sandbox.gc import GcReport, gc

    if ray_address:
        reports = _gc_cluster(ray_address, run, everything, docker, local, state_dir)
    else:
        reports = [("here", gc(everything=everything, docker=docker, local=local, run=run, state_dir=state_dir))]
    total = GcReport()
    for node, report in reports:
        where = "" if node == "here" else f" on node {node[:12]}"
        for name in report.containers:
            console.print(f"removed container {name}{where}")
        for name in report.local_sandboxes:
            console.print(f"removed local sandbox {name}{where}")
        total.merge(report)
    console.print(
        f"removed {len(total.containers)} containers and {len(total.local_sandboxes)} local sandboxes"
        f"{f' of run {run}' if run else ''}{f' on {len(reports)} nodes' if ray_address else ''}; "
        f"kept {total.kept} that belong to live drivers"
    )
    for err in total.errors:
        console.print(f"[yellow]{err}[/yellow]")
    if any(node != "here" and report.errors for node, report in reports):
        raise typer.Exit(1)


def connect_ray(address: str) -> None:
    """Join the Ray cluster at `address` ('auto' or host:port) as a driver, or exit 2 saying why not (a host:port
    that refuses is said at once: ray.init would wait for it for minutes)."""
    import os
    import socket

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    err = Console(stderr=True, soft_wrap=True)
    host, _, port = address.rpartition(":")
    if address != "auto" and port.isdigit():
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
        except OSError as e:
            err.print(f"[red]error:[/] no Ray cluster answers at --ray-address {address}: {e}")
            raise typer.Exit(2) from None
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as e:
        err.print(f"[red]error:[/] could not join the Ray cluster at --ray-address {address}: {e}")
        raise typer.Exit(2) from None


def _gc_cluster(address: str, run, everything: bool, docker: bool, local: bool, state_dir):
    import ray

    from verl_swe.agent.placement_ray import gc_on_every_node
    from verl_swe.sandbox.gc import GcReport

    connect_ray(address)
    try:
        out = []
        for r in gc_on_every_node(run, everything, docker, local, str(state_dir) if state_dir else None):
            node = r.pop("node_id")
            report = GcReport(errors=[f"node {node[:12]}: {r['error']}"]) if "error" in r else GcReport(**r)
            out.append((node, report))
        return out
    finally:
        ray.shutdown()


@sandbox_app.command("bench")
def sandbox_bench(
    backends: List[str] = typer.Option(["docker", "local"], "--backend", help="backends to measure"),
    calls: int = typer.Option(2000, help="round trips timed per backend"),
    rounds: int = typer.Option(20, help="start/close cycles timed per backend"),
    sandboxes: int = typer.Option(64, help="concurrent sandboxes"),
    commands: int = typer.Option(20, help="commands per concurrent sandbox"),
    out: Optional[Path] = typer.Option(None, help="also write the results as JSON here"),
):
    """Start latency, exec round trip, close latency and concurrency, beside the raw engine."""
    from verl_swe.sandbox import bench

    results = [asyncio.run(bench.run_backend(b, calls, rounds, sandboxes, commands)) for b in backends]
    table = Table(title="verl-swe sandbox bench (ms unless said)")
    table.add_column("metric")
    for r in results:
        table.add_column(r.backend, justify="right")
    rows = [
        ("start p50 / p90", lambda r: f"{r.start_ms_p50:.1f} / {r.start_ms_p90:.1f}"),
        ("exec round trip p50 / p99", lambda r: f"{r.exec_ms_p50:.3f} / {r.exec_ms_p99:.3f}"),
        ("close p50 / p90", lambda r: f"{r.close_ms_p50:.1f} / {r.close_ms_p90:.1f}"),
        ("concurrent: sandboxes x commands", lambda r: f"{r.concurrent_sandboxes} x {r.concurrent_commands}"),
        ("concurrent: failures", lambda r: str(r.concurrent_failures)),
        ("concurrent: wall (s)", lambda r: f"{r.concurrent_wall_s:.2f}"),
        ("baseline", lambda r: r.baseline),
        ("baseline exec p50 / p99", lambda r: f"{r.baseline_exec_ms_p50:.2f} / {r.baseline_exec_ms_p99:.2f}"),
    ]
    for name, fmt in rows:
        table.add_row(name, *(fmt(r) for r in results))
    console.print(table)
    for r in results:
        for err in r.errors:
            console.print(f"[red]{r.backend}: {err}[/red]")
    if out:
        out.write_text(json.dumps({"machine": bench.machine(), "results": bench.as_dicts(results)}, indent=2))
    if any(r.errors or r.concurrent_failures for r in results):
        raise typer.Exit(1)

