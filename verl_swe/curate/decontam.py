"""What training data must not overlap: evaluation instance ids, repositories and a date cut-off."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path

from verl_swe.curate.config import DecontaminationConfig


class DecontaminationError(ValueError):
    pass


def repo_of(instance_id: str) -> str:
    """`owner/name` of a SWE-bench style id (`owner__name-1234`)."""
    return instance_id.rsplit("-", 1)[0].replace("__", "/", 1)


def verified_ids() -> list[str]:
    """SWE-bench Verified's 500 instance ids, bundled (the hub is not reachable everywhere)."""
    text = resources.files("verl_swe.curate").joinpath("data/swe_bench_verified.txt").read_text()
    return _id_lines(text)


def _id_lines(text: str) -> list[str]:
    return [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]


def read_ids(path: Path) -> list[str]:
    """Instance ids from a text file (one a line, # comments) or a task file (.jsonl/.json/.parquet:
    its rows' instance_id), so a monthly split can be excluded by passing the split itself."""
    path = Path(path)
    if not path.exists():
        raise DecontaminationError(f"exclusion list {path} does not exist")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return [str(i) for i in pq.read_table(path, columns=["instance_id"]).column("instance_id").to_pylist()]
        if path.suffix == ".jsonl":
            return [str(json.loads(line)["instance_id"]) for line in path.read_text().splitlines() if line.strip()]
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            return [str(k) for k in data] if isinstance(data, dict) else \
                [str(r["instance_id"]) if isinstance(r, dict) else str(r) for r in data]
    except (KeyError, TypeError, ValueError) as e:
        raise DecontaminationError(f"exclusion list {path}: every row needs an instance_id ({e})") from None
    return _id_lines(path.read_text())


@dataclass
class Exclusions:
    instances: dict[str, str] = field(default_factory=dict)  # id -> which list it came from
    repos: dict[str, str] = field(default_factory=dict)  # owner/name -> which list
    created_from: date | None = None

    @classmethod
    def from_config(cls, cfg: DecontaminationConfig) -> "Exclusions":
        ex = cls(created_from=cfg.created_from)
        verified = verified_ids() if (cfg.verified_ids or cfg.verified_repos) else []
        if cfg.verified_ids:
            ex.instances.update(dict.fromkeys(verified, "SWE-bench Verified"))
        if cfg.verified_repos:
            ex.repos.update(dict.fromkeys(sorted({repo_of(i) for i in verified}), "SWE-bench Verified repositories"))
        for path in cfg.instance_files:
            ex.instances.update(dict.fromkeys(read_ids(path), str(path)))
        ex.instances.update(dict.fromkeys(cfg.instances, "decontamination.instances"))
        ex.repos.update(dict.fromkeys(cfg.repos, "decontamination.repos"))
        return ex
