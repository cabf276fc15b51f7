"""Read tasks from JSONL, JSON, parquet, harbor task directories or a Hugging Face dataset; bad rows are
named, good rows kept."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from pydantic import ValidationError

from verl_swe.tasks.schema import Task


@dataclass(frozen=True)
class RowError:
    where: str  # "FILE:LINE" or "FILE[row N]"
    instance_id: str | None
    message: str

    def __str__(self) -> str:
        who = f" ({self.instance_id})" if self.instance_id else ""
        return f"{self.where}{who}: {self.message}"


class TaskLoadError(ValueError):
    def __init__(self, errors: list[RowError]):
        self.errors = errors
        shown = "\n  ".join(str(e) for e in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"{len(errors)} malformed task row(s):\n  {shown}{more}")


def explain_validation_error(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        field = ".".join(str(x) for x in err["loc"]) or "row"
        parts.append(f"field {field!r}: {err['msg']}")
    return "; ".join(parts)


def _rows(source: str) -> Iterator[tuple[str, Any]]:
    """Yield (where, raw row) pairs; `where` names the file and line or row for error messages."""
    path = Path(source)
    if not path.exists():
        if "/" in source and not source.startswith((".", "/")) and path.suffix == "":
            yield from _hub_rows(source)
            return
        raise FileNotFoundError(f"task file {source} does not exist")
    if path.is_dir():  # a harbor task directory, or a dataset of them
        from verl_swe.tasks.harbor import harbor_rows

        yield from harbor_rows(path)
    elif path.suffix == ".jsonl":
        with path.open() as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield f"{path}:{n}", json.loads(line)
                except json.JSONDecodeError as e:
                    yield f"{path}:{n}", ValueError(f"invalid JSON: {e}")
    elif path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:  # one document: nothing to keep, but say which file
            raise ValueError(f"task file {path}: invalid JSON: {e}") from None
        if isinstance(data, dict):  # {instance_id: row} as some exports write it
            data = [{"instance_id": k, **v} if isinstance(v, dict) else v for k, v in data.items()]
        if not isinstance(data, list):
            raise ValueError(f"task file {path}: expected a list of rows or an object keyed by instance_id, "
                             f"got {type(data).__name__}")
        for n, row in enumerate(data):
            yield f"{path}[row {n}]", row
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq  # a dependency of `datasets`, present wherever verl is

        for n, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path}[row {n}]", row
    else:
        raise ValueError(f"task file {source}: unknown format {path.suffix!r} (use .jsonl, .json, .parquet or a "
                         "harbor task directory)")


def _hub_rows(name: str) -> Iterator[tuple[str, Any]]:
    """`owner/dataset[:split]` from the Hugging Face hub (needs the hub to be reachable)."""
    import datasets

    name, _, split = name.partition(":")
    try:
        ds = datasets.load_dataset(name, split=split or "test")
    except Exception as e:  # noqa: BLE001 - unreachable hub, unknown dataset or split: all end here
        raise ValueError(f"{name}: no such task file, and loading it as a Hugging Face dataset (split "
                         f"{split or 'test'}) failed: {type(e).__name__}: {str(e)[:300]}. Where the hub is "
                         "unreachable, export the rows elsewhere and pass the .jsonl/.json/.parquet file") from None
    for n, row in enumerate(ds):
        yield f"{name}:{split or 'test'}[row {n}]", row


def read_tasks(source: str | Path) -> tuple[list[Task], list[RowError]]:
    """All valid tasks of `source` and an error for each malformed row (or duplicate instance_id)."""
    tasks: list[Task] = []
    errors: list[RowError] = []
    seen: dict[str, str] = {}
    for where, row in _rows(str(source)):
        iid = row.get("instance_id") if isinstance(row, dict) else None
        if isinstance(row, Exception):
            errors.append(RowError(where, None, str(row)))
            continue
        try:
            task = Task.model_validate(row)
        except ValidationError as e:
            errors.append(RowError(where, iid if isinstance(iid, str) else None, explain_validation_error(e)))
            continue
        if task.instance_id in seen:
            errors.append(RowError(where, task.instance_id, f"duplicate instance_id (first at {seen[task.instance_id]})"))
            continue
        seen[task.instance_id] = where
        tasks.append(task)
    return tasks, errors


def load_tasks(source: str | Path) -> list[Task]:
    """All tasks of `source`; raises TaskLoadError naming every malformed row."""
    tasks, errors = read_tasks(source)
    if errors:
        raise TaskLoadError(errors)
    return tasks


def select(tasks: Iterable[Task], instance_ids: Iterable[str] | None) -> list[Task]:
    tasks = list(tasks)
    if not instance_ids:
        return tasks
    wanted = list(instance_ids)
    known = {t.instance_id for t in tasks}
    missing = [i for i in wanted if i not in known]
    if missing:
        raise KeyError(f"unknown instance ids: {', '.join(missing[:10])}")
    keep = set(wanted)
    return [t for t in tasks if t.instance_id in keep]
