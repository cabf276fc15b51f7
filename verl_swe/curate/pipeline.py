"""`curate`: SWE-rebench rows to a clean RL dataset (P1 Sec. 4.1, paper.md 1.7), resumable and parallel.

Rules run cheapest first: the row checks (schema, metadata, complexity, quality, decontamination) over
every task, then the sandbox checks (`checks.py`) over the survivors, `workers` tasks at a time. Each
finished sandbox check is cached in REPORT_DIR/checks.jsonl, so a rerun (after an interruption, or
with other row-rule thresholds) redoes only what is missing. The report is rebuilt on every run.
"""

from __future__ import annotations

import logging
from pathlib import Path

from verl_swe.concurrency import bounded_gather
from verl_swe.curate.checks import CheckCache, check_key, check_task
from verl_swe.curate.config import CurateConfig
from verl_swe.curate.decontam import Exclusions
from verl_swe.curate.report import Decision, write_report
from verl_swe.curate.rules import check_metadata
from verl_swe.tasks.environment import Environments
from verl_swe.tasks.loader import read_tasks
from verl_swe.tasks.rl_data import write_rl_parquet
from verl_swe.tasks.schema import Task

logger = logging.getLogger(__name__)


async def curate(source: str | Path, output: Path, report_dir: Path, config: CurateConfig,
                 envs: Environments | None, *, workers: int = 1, progress: bool = False,
                 fresh: bool = False) -> dict:
    """Curate `source` into verl's RL parquet at `output`; returns the funnel document (also in
    REPORT_DIR/funnel.json). `envs` is None only when `config.checks.enabled` is false."""
    report_dir = Path(report_dir)
    exclusions = Exclusions.from_config(config.decontamination)  # bad lists fail before any work
    tasks, row_errors = read_tasks(source)
    order: list[Decision | Task] = [Decision(e.instance_id, "malformed", e.message, e.where) for e in row_errors]
    survivors: list[Task] = []
    for task in tasks:
        drop = check_metadata(task, config, exclusions)
        if drop:
            order.append(Decision(task.instance_id, drop.rule, drop.reason, details=drop.details))
        else:
            survivors.append(task)
            order.append(task)

    if config.checks.enabled and survivors:
        if envs is None:
            raise ValueError("sandbox checks are enabled but no Environments were given")
        results = await _sandbox_checks(survivors, envs, config, report_dir, workers, progress, fresh)
        decisions = {id(t): d for t, d in zip(survivors, results)}
    else:
        decisions = {id(t): Decision(t.instance_id, None) for t in survivors}
    final = [decisions[id(x)] if isinstance(x, Task) else x for x in order]
    kept = [x for x in order if isinstance(x, Task) and decisions[id(x)].kept]

    write_rl_parquet(kept, output, data_source=config.data_source, tool_set=config.tool_set)
    return write_report(report_dir, final, sandbox_ran=config.checks.enabled, source=str(source), output=output,
                        config=config.model_dump(mode="json"), backend=envs.backend if envs else None)


async def _sandbox_checks(tasks: list[Task], envs: Environments, config: CurateConfig, report_dir: Path,
                          workers: int, progress: bool, fresh: bool) -> list[Decision]:
    cache = CheckCache(report_dir / "checks.jsonl", fresh=fresh)
    log_dir = report_dir / "logs"

    async def one(task: Task) -> Decision:
        key = check_key(task, config, envs.backend)
        cached = cache.get(key)
        result = cached or await check_task(task, envs, config, log_dir)
        if cached is None:
            cache.put(key, task.instance_id, result)
        if result.rule:
            logger.info("%s dropped by %s: %s", task.instance_id, result.rule, result.reason)
        return Decision(task.instance_id, result.rule, result.reason, details=result.details,
                        cached=cached is not None)

    todo = sum(cache.get(check_key(t, config, envs.backend)) is None for t in tasks)
    desc = f"sandbox checks ({envs.backend}, {todo} to run, {len(tasks) - todo} done before)" if progress else None
    return await bounded_gather((one(t) for t in tasks), workers, desc)
