"""Per-task success counts across RL iterations, and the stage-2 pool built from them (P1 Sec. 1.4:
drop tasks solved in >= 2/3 of their attempts and tasks never solved; 7,249 -> 2,028). The pool is read
from and written as verl's RL parquet (verl_swe/tasks/rl_data.py): stage 2's data.train_files is stage 1's
rows, filtered, so prompts, tool set and data_source stay what stage 1 trained on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from verl_swe.tasks import Task

from verl_swe.files import write_json_atomic


@dataclass
class SuccessCounts:
    attempts: dict[str, int] = field(default_factory=dict)
    successes: dict[str, int] = field(default_factory=dict)

    def update(self, results: Iterable[tuple[str, bool]]) -> None:
        for instance_id, resolved in results:
            self.attempts[instance_id] = self.attempts.get(instance_id, 0) + 1
            self.successes[instance_id] = self.successes.get(instance_id, 0) + int(bool(resolved))

    def rate(self, instance_id: str) -> float:
        n = self.attempts.get(instance_id, 0)
        return self.successes.get(instance_id, 0) / n if n else 0.0

    def save(self, path: Path) -> None:
        write_json_atomic(path, {"attempts": self.attempts, "successes": self.successes}, indent=1, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> "SuccessCounts":
        data = json.loads(Path(path).read_text())
        return cls(dict(data["attempts"]), dict(data["successes"]))


def stage2_pool(counts: SuccessCounts, instance_ids: Iterable[str], max_rate: float = 2 / 3) -> list[str]:
    """Tasks worth stage 2: attempted, solved at least once, and solved in less than `max_rate` of attempts.
    Tasks never attempted in stage 1 are kept (nothing is known about them)."""
    keep = []
    for iid in instance_ids:
        if counts.attempts.get(iid, 0) == 0:
            keep.append(iid)
        elif 0 < counts.successes.get(iid, 0) and counts.rate(iid) < max_rate:
            keep.append(iid)
    return keep


def is_rl_parquet(path: Path) -> bool:
    """A parquet file of verl RL rows (agent_name, extra_info.task), not of task rows."""
    if Path(path).suffix != ".parquet":
        return False
    import pyarrow.parquet as pq

    return {"agent_name", "extra_info"} <= set(pq.read_schema(path).names)


def rl_parquet_tasks(path: Path) -> list[Task]:
    """The tasks of a verl RL parquet (extra_info.task, the task row as JSON or a mapping)."""
    import pyarrow.parquet as pq

    infos = pq.read_table(path, columns=["extra_info"]).column("extra_info").to_pylist()
    tasks = []
    for n, info in enumerate(infos):
        row = (info or {}).get("task")
        if row is None:
            raise ValueError(f"{path}: row {n} has no extra_info.task")
        tasks.append(Task.model_validate(json.loads(row) if isinstance(row, str) else row))
    return tasks


def filter_rl_parquet(src: Path, dst: Path, keep: set[str]) -> int:
    """Write the rows of `src` whose task is in `keep` to `dst` (atomically); return how many."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    ids = [t.instance_id for t in rl_parquet_tasks(src)]
    kept = table.filter(pa.array([i in keep for i in ids]))
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    pq.write_table(kept, tmp)
    os.replace(tmp, dst)
    return kept.num_rows
