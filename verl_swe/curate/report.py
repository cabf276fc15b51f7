"""What a curation run explains: the funnel (tasks left after each rule), one CSV row per dropped task
with its rule and reason, and every decision with its details as JSON lines."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from verl_swe.curate.rules import RULES, SANDBOX_RULES
from verl_swe.files import write_json_atomic, write_text_atomic

CSV_COLUMNS = ["instance_id", "rule", "reason", "where"]


@dataclass
class Decision:
    instance_id: str | None
    rule: str | None  # None: kept
    reason: str = ""
    where: str | None = None  # file and line of a malformed row
    details: dict = field(default_factory=dict)
    cached: bool = False  # the sandbox verdict came from an earlier run

    @property
    def kept(self) -> bool:
        return self.rule is None


def funnel(decisions: list[Decision], sandbox_ran: bool) -> list[dict]:
    """Each rule in order, with how many tasks it dropped and how many remain after it."""
    dropped = Counter(d.rule for d in decisions if d.rule)
    remaining = len(decisions)
    stages = []
    for rule, description in RULES.items():
        if rule in SANDBOX_RULES and not sandbox_ran:
            stages.append({"rule": rule, "description": description, "dropped": None, "remaining": remaining,
                           "skipped": True})
            continue
        remaining -= dropped[rule]
        stages.append({"rule": rule, "description": description, "dropped": dropped[rule], "remaining": remaining})
    return stages


def dropped_csv(decisions: list[Decision]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for d in decisions:
        if not d.kept:
            writer.writerow({"instance_id": d.instance_id or "", "rule": d.rule, "reason": d.reason,
                             "where": d.where or ""})
    return out.getvalue()


def write_report(report_dir: Path, decisions: list[Decision], *, sandbox_ran: bool, source: str, output: Path,
                 config: dict, backend: str | None) -> dict:
    """funnel.json, dropped.csv and decisions.jsonl under `report_dir`; returns the funnel document."""
    report_dir = Path(report_dir)
    doc = {
        "input": source, "output": str(output), "backend": backend if sandbox_ran else None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "rows": len(decisions), "kept": sum(d.kept for d in decisions),
        "sandbox_checks_from_earlier_runs": sum(d.cached for d in decisions),
        "funnel": funnel(decisions, sandbox_ran), "config": config,
    }
    write_text_atomic(report_dir / "dropped.csv", dropped_csv(decisions))
    write_text_atomic(report_dir / "decisions.jsonl",
                      "".join(json.dumps(asdict(d), default=str) + "\n" for d in decisions))
    write_json_atomic(report_dir / "funnel.json", doc, default=str)
    return doc
