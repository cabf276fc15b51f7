"""A run directory read back: its trajectories, each placed in its run, with unreadable files reported
instead of fatal; and the fixed-seed task subset used to track checkpoints (paper 1.8, "Verified-50").

A run directory is what `verl-swe rollout` / `verl-swe eval` write (`trajectories/<instance>/<episode>.json`,
the episode id `<instance>.<r>` for run r) or a training `trajectory_dir` (episode ids without a run).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from verl_swe.types import Trajectory


class RunDirError(FileNotFoundError):
    """The path is not a run directory (the message names the path and what is missing)."""


@dataclass(frozen=True)
class LoadError:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Run:
    run_dir: Path
    trajectories: list[Trajectory] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)  # the file each trajectory came from, same order
    errors: list[LoadError] = field(default_factory=list)


def read_run(run_dir: Path) -> Run:
    """Every readable trajectory of `run_dir`; a corrupt or foreign file becomes a `LoadError` naming it."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    traj_dir = run_dir / "trajectories"
    if not traj_dir.is_dir():
        raise RunDirError(f"{run_dir}: has no trajectories/ folder (expected the --out of `verl-swe eval` or "
                          "`verl-swe rollout`, or a training trajectory_dir)")
    run = Run(run_dir)
    for path in sorted(traj_dir.glob("*/*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
            traj = Trajectory.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            # json and unicode errors are ValueErrors; TypeError/KeyError: a document of another shape.
            run.errors.append(LoadError(path, f"{type(e).__name__}: {e}"))
            continue
        run.trajectories.append(traj)
        run.paths.append(path)
    return run


def run_index(traj: Trajectory) -> int | None:
    """r of an episode id `<instance_id>.<r>` (how `verl-swe rollout` names episodes), else None."""
    prefix, _, suffix = traj.episode_id.rpartition(".")
    return int(suffix) if prefix == traj.instance_id and suffix.isdigit() else None


def repo_of(instance_id: str) -> str:
    """SWE-bench's naming (`owner__name-123`), for trajectories whose task row is not at hand."""
    head = instance_id.rsplit("-", 1)[0]
    return head.replace("__", "/", 1) if "__" in head else head


def subset_ids(instance_ids: list[str], size: int, seed: int = 0) -> list[str]:
    """A fixed random subset: the same ids for the same task list, seed and size on any machine (ids are
    sorted first, so the file's row order does not matter). Paper 1.8 tracks checkpoints on 50 tasks."""
    ids = sorted(set(instance_ids))
    if size >= len(ids):
        return ids
    return sorted(random.Random(seed).sample(ids, size))
