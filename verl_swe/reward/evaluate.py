"""`verl-swe evaluate`: grade a predictions file against tasks, write a swebench-style report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from verl_swe.concurrency import bounded_gather
from verl_swe.files import write_json_atomic
from verl_swe.reward.grading import GradeResult, grade
from verl_swe.tasks.environment import Environments
from verl_swe.tasks.loader import read_tasks


class PredictionsError(ValueError):
    pass


def read_predictions(path: Path) -> dict[str, dict]:
    """swebench predictions (`instance_id, model_name_or_path, model_patch`) from JSONL, a JSON list,
    or a JSON object keyed by instance_id. A row without instance_id is an error naming the row."""
    path = Path(path)
    if not path.exists():
        raise PredictionsError(f"predictions file {path} does not exist")
    text = path.read_text()
    rows: list[tuple[str, object]] = []
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((f"{path}:{n}", json.loads(line)))
                except json.JSONDecodeError as e:
                    raise PredictionsError(f"{path}:{n}: invalid JSON: {e}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PredictionsError(f"{path}: invalid JSON: {e}") from None
        if isinstance(data, dict):
            data = [{"instance_id": k, **v} if isinstance(v, dict) else v for k, v in data.items()]
        if not isinstance(data, list):
            raise PredictionsError(f"{path}: expected a list of predictions or an object keyed by instance_id, "
                                   f"got {type(data).__name__}")
        rows = [(f"{path}[row {n}]", r) for n, r in enumerate(data)]
    preds: dict[str, dict] = {}
    for where, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise PredictionsError(f"{where}: a prediction needs a string 'instance_id'")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise PredictionsError(f"{where} ({row['instance_id']}): 'model_patch' must be a string or null")
        preds[row["instance_id"]] = row
    return preds


@dataclass
class Report:
    instances: dict[str, dict] = field(default_factory=dict)
    invalid_rows: list[str] = field(default_factory=list)
    unknown_predictions: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        vals = list(self.instances.values())
        return {
            "total": len(vals),
            "resolved": sum(v["resolved"] for v in vals),
            "unresolved": sum(not v["resolved"] and not v["error"] for v in vals),
            "errors": sum(bool(v["error"]) for v in vals),
            "tampered": sum(bool(v.get("tampered")) for v in vals),  # test runs the integrity checks caught
            "static_flagged": sum(bool(v.get("static_flags")) for v in vals),
            "empty_patches": sum(v["empty_patch"] for v in vals),
            "invalid_task_rows": len(self.invalid_rows),
            "unknown_predictions": len(self.unknown_predictions),
        }

    def to_json(self) -> dict:
        return {"summary": self.summary(), "instances": self.instances, "invalid_task_rows": self.invalid_rows,
                "unknown_predictions": self.unknown_predictions}


async def evaluate(instances: str | Path, predictions: Path, envs: Environments, *, workers: int = 1,
                   timeout_s: float = 1800.0, log_dir: Path | None = None, progress: bool = False,
                   static: str = "flag") -> Report:
    """Grade every prediction whose task is known; the other predictions and bad rows are reported.
    `static="reject"` drops the patch files that carry a static tamper flag (grading.py)."""
    tasks, row_errors = read_tasks(instances)
    preds = read_predictions(predictions)
    by_id = {t.instance_id: t for t in tasks}
    report = Report(invalid_rows=[str(e) for e in row_errors],
                    unknown_predictions=sorted(set(preds) - set(by_id)))
    todo = [(by_id[i], preds[i]) for i in preds if i in by_id]

    async def one(task, pred) -> None:
        res: GradeResult = await grade(task, pred.get("model_patch"), envs, timeout_s=timeout_s, log_dir=log_dir,
                                       static=static)
        entry = res.to_dict()
        entry["model_name_or_path"] = pred.get("model_name_or_path")
        entry["empty_patch"] = not (pred.get("model_patch") or "").strip()
        report.instances[task.instance_id] = entry
        if log_dir is not None:  # per instance as it finishes: an interrupted run keeps what it graded
            write_json_atomic(log_dir / task.instance_id / "report.json", entry)

    await bounded_gather((one(t, p) for t, p in todo), workers, "grading" if progress else None)
    report.instances = dict(sorted(report.instances.items()))
    return report
