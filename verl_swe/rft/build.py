"""`verl-swe rft build`: run directories -> the SFT parquet and its funnel report (P1 Sec. 4.2: 72,490
episodes -> 6,548 resolved trajectories kept).

Every trajectory file ends up kept or excluded for one named reason, in this order:
unreadable / incompatible_format (the file), not_resolved, resolved_not_submitted (graded though the
agent never submitted: training on it would teach not to submit), bad_structure, duplicate (the same
task and the same assistant turns as a trajectory kept before it), too_long (over `max_tokens` as the
rollout tokenized it), no_trained_turns (every turn a format error), over_task_cap.
`files == kept + sum(excluded)` always holds.

A kept row trains on the ids the policy sampled where its trajectory recorded them (`Turn.token_ids`), and on
its text re-encoded where it did not; `token_ids` in the report counts both, and the rows whose sampled ids
differ from the re-encoding (what an SFT built from text would have got wrong).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from verl_swe.agent.tokens import ChatTokens
from verl_swe.files import write_json_atomic
from verl_swe.rft.read import Problem, read_run_dir
from verl_swe.rft.render import SFTExample, ShapeError, reencoding_differs, sft_example, token_ids
from verl_swe.types import ExitStatus, Trajectory

logger = logging.getLogger(__name__)

PAPER_FUNNEL = {"episodes": 72_490, "kept": 6_548}  # P1 Sec. 4.2: 7,249 tasks x 10 runs


class NothingToTrain(RuntimeError):
    """No trajectory survived the filters; the report (written) says why."""


@dataclass
class RunDirCounts:
    files: int = 0
    episodes: int = 0
    resolved: int = 0
    kept: int = 0


@dataclass
class BuildReport:
    out: str
    report_path: str
    max_tokens: int
    tokenizer: str
    files: int = 0  # trajectory files found
    episodes: int = 0  # of them, readable trajectories
    resolved: int = 0
    kept: int = 0
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> count
    run_dirs: dict[str, RunDirCounts] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)  # seen, with a resolved episode, with a kept one
    tokens: dict[str, float] = field(default_factory=dict)  # of the kept trajectories
    turns: dict[str, int] = field(default_factory=dict)
    demo_stripped: int = 0  # kept trajectories whose system prompt carried the collection demonstration
    # Kept rows by where their assistant ids come from: `sampled` (the rollout's own), `reencoded` (none recorded);
    # `reencoding_differs`: sampled rows whose text re-encodes to other ids (`turns_differ` such turns in all).
    token_ids: dict[str, int] = field(default_factory=lambda: {"sampled": 0, "reencoded": 0, "reencoding_differs": 0,
                                                               "turns_differ": 0})
    problems: list[dict[str, str]] = field(default_factory=list)  # every file excluded for what is in it
    paper: dict[str, int] = field(default_factory=lambda: dict(PAPER_FUNNEL))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def exclude(self, reason: str, path: Path | str | None = None, message: str | None = None) -> None:
        self.excluded[reason] = self.excluded.get(reason, 0) + 1
        if message is not None:
            self.problems.append({"path": str(path), "reason": reason, "message": message})


def report_path_for(out: Path) -> Path:
    return Path(out).with_suffix(".report.json")


def build_sft_data(run_dirs: list[Path], out: Path, tokenizer: Any, max_tokens: int, *, dedupe: bool = True,
                   max_per_task: int | None = None, template_kwargs: dict | None = None,
                   resolved_only: bool = True) -> BuildReport:
    """Write `out` (parquet) and `<out stem>.report.json`; return the report. Raises NothingToTrain
    (after writing the report) when no trajectory is kept. `resolved_only=False` keeps submitted failures
    too: behaviour cloning of scripted demonstrators (the learning run's start policy), not RFT."""
    out = Path(out)
    report = BuildReport(str(out), str(report_path_for(out)), max_tokens, str(getattr(tokenizer, "name_or_path", "")))
    chats: dict[tuple[str, str], ChatTokens] = {}
    seen: set[str] = set()
    per_task: Counter[str] = Counter()
    tasks_seen, tasks_resolved = set(), set()
    rows: list[dict] = []
    for run_dir in map(Path, run_dirs):
        counts = report.run_dirs.setdefault(str(run_dir), RunDirCounts())
        if not (run_dir / "trajectories").is_dir():
            logger.warning("%s: no trajectories/ directory (not a run directory of verl-swe rollout / rft collect)",
                           run_dir)
        for path, item in read_run_dir(run_dir):
            counts.files += 1
            report.files += 1
            if isinstance(item, Problem):
                logger.warning("%s: %s", item.path, item.message)
                report.exclude(item.reason, item.path, item.message)
                continue
            traj: Trajectory = item
            counts.episodes += 1
            report.episodes += 1
            tasks_seen.add(traj.instance_id)
            if resolved_only and not traj.resolved:
                report.exclude("not_resolved")
                continue
            counts.resolved += 1
            report.resolved += 1
            tasks_resolved.add(traj.instance_id)
            row = _keep(traj, path, report, chats, tokenizer, template_kwargs or {}, max_tokens, seen, per_task,
                        dedupe, max_per_task)
            if row is not None:
                counts.kept += 1
                rows.append(row)
        if counts.resolved == 0:
            logger.warning("%s: no resolved episode among %d trajectory files", run_dir, counts.files)
    report.kept = len(rows)
    report.tasks = {"seen": len(tasks_seen), "resolved": len(tasks_resolved), "kept": len(per_task)}
    _totals(report, rows)
    write_json_atomic(report_path_for(out), report.to_dict())
    if not rows:
        raise NothingToTrain(f"no trajectory kept from {report.files} files in {len(report.run_dirs)} run "
                             f"directories (excluded: {report.excluded or 'none found'}); "
                             f"see {report.report_path}; {out} was not written")
    _write_parquet(rows, out)
    return report


def _keep(traj, path, report, chats, tokenizer, template_kwargs, max_tokens, seen, per_task, dedupe,
          max_per_task) -> dict | None:
    if traj.exit_status != ExitStatus.SUBMITTED:
        report.exclude("resolved_not_submitted")
        return None
    try:
        ex: SFTExample = sft_example(traj)
    except ShapeError as e:
        report.exclude("bad_structure", path, str(e))
        return None
    # Duplicates are judged on what trains: the same task and the same assistant turns.
    key = hashlib.sha256(json.dumps([traj.instance_id] + [m["content"] for m in ex.messages
                                                          if m["role"] == "assistant"]).encode()).hexdigest()
    if dedupe and key in seen:
        report.exclude("duplicate")
        return None
    seen.add(key)
    tools_json = json.dumps(ex.tools)
    chat_key = (tools_json, ex.observation_role)
    if chat_key not in chats:
        chats[chat_key] = ChatTokens(tokenizer, ex.tools, ex.observation_role, template_kwargs)
    try:
        ids, mask = token_ids(chats[chat_key], ex.messages, ex.assistant_loss_mask, ex.assistant_token_ids)
        differ = reencoding_differs(chats[chat_key], ex.messages, ex.assistant_token_ids)
    except ShapeError as e:
        report.exclude("bad_structure", path, str(e))
        return None
    if len(ids) > max_tokens:
        report.exclude("too_long")
        return None
    if not any(ex.assistant_loss_mask):
        report.exclude("no_trained_turns")
        return None
    if max_per_task is not None and per_task[traj.instance_id] >= max_per_task:
        report.exclude("over_task_cap")
        return None
    per_task[traj.instance_id] += 1
    report.demo_stripped += ex.demo_stripped
    report.token_ids["sampled" if ex.assistant_token_ids is not None else "reencoded"] += 1
    report.token_ids["reencoding_differs"] += bool(differ)
    report.token_ids["turns_differ"] += differ
    return {**ex.row(), "instance_id": traj.instance_id, "episode_id": traj.episode_id,
            "tool_set": traj.metadata.get("tool_set"), "source": str(path), "num_tokens": len(ids),
            "trained_tokens": sum(mask), "num_turns": len(ex.assistant_loss_mask),
            "format_error_turns": len(ex.assistant_loss_mask) - sum(ex.assistant_loss_mask)}


def _totals(report: BuildReport, rows: list[dict]) -> None:
    n = [r["num_tokens"] for r in rows]
    report.tokens = {"total": sum(n), "trained": sum(r["trained_tokens"] for r in rows),
                     "mean": round(sum(n) / len(n), 1) if n else 0.0, "max": max(n, default=0)}
    report.turns = {"assistant": sum(r["num_turns"] for r in rows),
                    "format_error_masked": sum(r["format_error_turns"] for r in rows)}


def _write_parquet(rows: list[dict], out: Path) -> None:
    import pandas as pd

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, out)
