"""`verl-swe eval` (paper 1.8: Pass@1 over runs +- SEM, Pass@k, per repository), `verl-swe view` (a static
trajectory viewer) and `verl-swe plot-training` (PNG curves from verl's file logger).

`eval` is `verl-swe rollout` with runs = episodes per task, then the report: RUN_DIR/report.json,
RUN_DIR/predictions/run_<r>.jsonl (swebench format, one file per run) and RUN_DIR/plots/*.png. Rerunning
it into the same RUN_DIR runs only the missing episodes (with more --runs too), then reports again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from verl_swe.agent.decoding import MODEL_DEFAULTS, NEUTRAL
from verl_swe.cli.episodes import (Backend, CacheDir, ContextTokens, DecodingSpec, InstanceIds, Instances, MaxNewTokens,
                                   MaxTurns, OptionalTemperature, ReposDir, TimeoutS, Tokenizer, ToolSetName, Workers,
                                   read_selected_tasks, resolve_decoding_option)
from verl_swe.eval.setting import requested_setting

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def served_model(endpoint: str) -> str:
    """The model an OpenAI-compatible server serves (`GET /v1/models`, as `vllm serve` answers it)."""
    import httpx

    base = endpoint.rstrip("/")
    url = base + ("/models" if base.endswith("/v1") else "/v1/models")
    try:
        models = httpx.get(url, timeout=30).raise_for_status().json()["data"]
        return models[0]["id"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
        raise typer.BadParameter(f"could not read the served model from {url} ({type(e).__name__}: {e}); "
                                 "pass --model", param_hint="--model") from None


def eval_cmd(
    instances: Instances,
    out: Annotated[Path, typer.Option(help="run directory (resumable): trajectories/, report.json, predictions/, plots")],
    endpoint: Annotated[Optional[str], typer.Option(help="OpenAI-compatible server URL (vllm serve), or 'local'")] = None,
    model: Annotated[Optional[str], typer.Option(help="served model name (default: what /v1/models lists); its "
                                                      "tokenizer")] = None,
    tokenizer: Tokenizer = None,
    runs: Annotated[int, typer.Option(min=1, help="runs = episodes per task (paper: 10)")] = 10,
    workers: Workers = 4,
    backend: Backend = "docker",
    tool_set: ToolSetName = "paper",
    max_turns: MaxTurns = 40,
    context_tokens: ContextTokens = 65_536,
    max_new_tokens: MaxNewTokens = 4_096,
    timeout_s: TimeoutS = 3_600.0,
    decoding: DecodingSpec = None,
    temperature: OptionalTemperature = None,
    repos_dir: ReposDir = None,
    cache_dir: CacheDir = None,
    subset: Annotated[Optional[str], typer.Option(help="verified-50 (the paper's, App. B), a file of instance ids, "
                                                       "or N: a fixed random N of the tasks")] = None,
    subset_seed: Annotated[int, typer.Option(help="seed of --subset N: the same tasks every time")] = 0,
    instance_ids: InstanceIds = None,
    report_only: Annotated[bool, typer.Option(help="run no episodes: report what RUN_DIR holds")] = False,
):
    """Evaluate a served model: N runs over the tasks, graded; Pass@1 +- SEM, Pass@k, per repository. Samples with
    the model's own decoding defaults (its generation_config.json, as the paper evaluates) unless --decoding says
    otherwise."""
    tasks = read_selected_tasks(instances, instance_ids)
    tasks, subset_info = _subset(tasks, subset, subset_seed, instances)
    if not tasks:
        raise typer.BadParameter(f"no tasks to evaluate in {instances}", param_hint="--instances")
    ids = [t.instance_id for t in tasks]

    if not report_only:
        if endpoint is None:
            raise typer.BadParameter("needed unless --report-only", param_hint="--endpoint")
        model = model or (served_model(endpoint) if endpoint != "local" else None)
        if model is None:
            raise typer.BadParameter("--endpoint local needs --model", param_hint="--model")
        chosen = resolve_decoding_option(decoding, MODEL_DEFAULTS, model, tokenizer, temperature)
        _refuse_mixed(out, set(ids), requested_setting(chosen.values, context_tokens, max_turns, max_new_tokens))
        from verl_swe.cli.agent import rollout

        # The same agent loop, resumable store and grading as `verl-swe rollout`: episode r of a task is run r.
        rollout(instances=instances, endpoint=endpoint, model=model, tokenizer=tokenizer, n=runs, out=out,
                backend=backend, workers=workers, tool_set=tool_set, max_turns=max_turns,
                context_tokens=context_tokens, max_new_tokens=max_new_tokens, timeout_s=timeout_s,
                decoding=chosen, repos_dir=repos_dir, cache_dir=cache_dir, instance_ids=ids)
    report(out, {t.instance_id: t.repo for t in tasks}, runs, model or "verl-swe", subset_info)


def _subset(tasks: list, subset: str | None, seed: int, instances: str) -> tuple[list, dict]:
    """The tasks of --subset, and what the report says of it (the whole task list when there is none)."""
    from verl_swe.eval.runs import subset_ids
    from verl_swe.eval.subsets import SubsetError, select_subset

    every = [t.instance_id for t in tasks]
    if subset is None:
        return tasks, {"name": "all", "instances": instances, "size": len(tasks)}
    if subset.isdigit():
        chosen = subset_ids(every, int(subset), seed)
        info = {"name": f"random-{subset}", "size": len(chosen), "subset_seed": seed, "instances": instances}
    else:
        try:
            chosen, info = select_subset(every, subset)
        except SubsetError as e:
            raise typer.BadParameter(str(e), param_hint="--subset") from None
        info["instances"] = instances
    keep = set(chosen)
    return [t for t in tasks if t.instance_id in keep], info


def _refuse_mixed(out: Path, ids: set[str], wanted: dict) -> None:
    """Resuming into RUN_DIR must not mix settings: its episodes' numbers would come from two decodings."""
    from verl_swe.eval.runs import RunDirError, read_run
    from verl_swe.eval.setting import run_settings, same

    try:
        run = read_run(out)
    except RunDirError:
        return  # a new run directory
    for setting, n in run_settings(t for t in run.trajectories if t.instance_id in ids and t.settled):
        if not same(setting, wanted):
            raise typer.BadParameter(
                f"{out} holds {n} episodes run with {json.dumps(setting, sort_keys=True)}; this run asks for "
                f"{json.dumps(wanted, sort_keys=True)}: use another --out, or the same --decoding / --context-tokens "
                "/ --max-turns / --max-new-tokens", param_hint="--out")


def report(out: Path, repos: dict[str, str], runs: int, model_name: str, subset: dict | None = None) -> dict:
    from verl_swe.eval.plots import plot_eval
    from verl_swe.eval.report import build_report, write_predictions, write_report
    from verl_swe.eval.runs import RunDirError, read_run
    from verl_swe.eval.setting import run_settings

    try:
        run = read_run(out)
    except RunDirError as e:
        err_console.print(f"[red]{e}[/]")
        raise typer.Exit(2) from None
    for e in run.errors:
        err_console.print(f"[yellow]unreadable trajectory[/] {e}")
    result = build_report(run, repos, runs)
    if subset:
        result["subset"] = {**subset, "instance_ids": sorted(repos)}
    # What produced every number of this report: the subset above, and the decoding and context of its episodes.
    settings = run_settings(t for t in run.trajectories if t.instance_id in repos and t.settled)
    result["setting"] = None if not settings else settings[0][0] if len(settings) == 1 else {
        "mixed": [{**s, "episodes": n} for s, n in settings]}
    if len(settings) > 1:
        err_console.print(f"[yellow]{out} mixes {len(settings)} decoding/context settings[/]: its numbers are not "
                          "one setting's (report.json `setting.mixed`)")
    write_report(result, out / "report.json")
    write_predictions(run, list(repos), runs, out / "predictions", model_name)
    plot_eval(result, out / "plots")
    console.print(report_table(result))
    console.print(setting_line(result))
    if result["missing_episodes"]:
        err_console.print(f"[yellow]{result['missing_episodes']} episodes missing[/] (counted unresolved); "
                          "rerun the same command to finish them")
    if result["infra_failed_episodes"]:
        kinds = ", ".join(f"{k} {n}" for k, n in result["unsettled_episodes"].items() if k != "cancelled")
        err_console.print(f"[yellow]{result['infra_failed_episodes']} episodes failed for the infrastructure's "
                          f"reason[/] ({kinds}): not scored, so Pass@1 is over the {result['scored_episodes']} that "
                          "ran; rerun the same command to try them again")
    console.print(f"report: {out / 'report.json'}   predictions: {out / 'predictions'}/run_<r>.jsonl   "
                  f"plots: {out / 'plots'}   viewer: verl-swe view {out}")
    return result


def setting_line(r: dict) -> str:
    """One line saying which subset, decoding and context produced the report's numbers."""
    sub = r.get("subset") or {}
    where = f"subset {sub.get('name', 'all')} ({sub.get('size', r['tasks'])} tasks)"
    s = r.get("setting") or {}
    if "mixed" in s:
        return f"{where}; MIXED settings: {len(s['mixed'])} (see report.json setting.mixed)"
    if not s:
        return where
    order = [*NEUTRAL, *sorted(set(s["decoding"]) - set(NEUTRAL))]
    dec = ", ".join(f"{k}={s['decoding'][k]}" for k in order if k in s["decoding"])
    return f"{where}; decoding {dec}; context {s['context_tokens']} tokens, {s['max_turns']} turns"


def report_table(r: dict) -> Table:
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    t = Table(title=f"{r['tasks']} tasks x {r['runs']} runs: Pass@1 {pct(r['pass@1'])} +- {pct(r['pass@1_sem'])} "
                    f"(SEM), Pass@{r['runs']} {pct(r['pass@k'][str(r['runs'])])}")
    for col in ("repository", "tasks", "Pass@1", "+- SEM", f"Pass@{r['runs']}"):
        t.add_column(col, justify="left" if col == "repository" else "right")
    for repo, row in r["per_repo"].items():
        t.add_row(repo, str(row["tasks"]), pct(row["pass@1"]), pct(row["pass@1_sem"]), pct(row[f"pass@{r['runs']}"]))
    t.caption = ("exit status: " + ", ".join(f"{k} {v}" for k, v in r["exit_status"].items())
                 + f"; submit rate {pct(r['submit_rate'])}%, mean turns {r['mean_turns']:.1f}")
    return t


def view(
    run_dir: Path = typer.Argument(..., help="a run directory (verl-swe eval/rollout --out, or a trajectory_dir)"),
    out: Optional[Path] = typer.Option(None, help="site folder (default RUN_DIR/site)"),
):
    """Write a static HTML viewer of a run's trajectories (open its index.html in a browser)."""
    from verl_swe.eval.runs import RunDirError
    from verl_swe.eval.viewer import build_site

    try:
        index = build_site(run_dir, out)
    except RunDirError as e:
        err_console.print(f"[red]{e}[/]")
        raise typer.Exit(2) from None
    listing = json.loads((index.parent / "data" / "index.js").read_text().split("=", 1)[1].rstrip().rstrip(";"))
    for e in listing["errors"]:
        err_console.print(f"[yellow]unreadable[/] {e['path']}: {e['reason']}")
    console.print(f"{len(listing['rows'])} trajectories: {index}")


def plot_training(
    metrics: Path = typer.Argument(..., help="verl's file-logger JSONL ($VERL_FILE_LOGGER_PATH)"),
    out: Path = typer.Option(Path("plots"), help="folder for the PNGs"),
):
    """PNG training curves: reward, validation Pass@1, groups kept, turns, submit rate, log-prob mismatch."""
    from verl_swe.eval.plots import plot_training as draw

    if not metrics.is_file():
        err_console.print(f"[red]{metrics}: no such metrics file[/]")
        raise typer.Exit(2)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    for path in draw(metrics, out):
        console.print(str(path))
