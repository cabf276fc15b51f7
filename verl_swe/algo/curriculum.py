"""Per-task success counts across RL iterations, and the stage-2 pool built from them (P1 Sec. 1.4:
drop tasks solved in >= 2/3 of their attempts and tasks never solved; 7,249 -> 2,028)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

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
