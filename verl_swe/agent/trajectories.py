"""Trajectories on disk: one JSON document per episode, written atomically (RFT, curation, eval and
the viewer read them back)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from verl_swe.types import Trajectory


def trajectory_path(run_dir: Path, traj: Trajectory) -> Path:
    return Path(run_dir) / "trajectories" / traj.instance_id / f"{traj.episode_id}.json"


def save_trajectory(run_dir: Path, traj: Trajectory) -> Path:
    path = trajectory_path(run_dir, traj)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(traj.to_dict(), ensure_ascii=False, indent=1))
    os.replace(tmp, path)  # readers never see half a file
    return path


def load_trajectories(run_dir: Path) -> Iterator[Trajectory]:
    for path in sorted((Path(run_dir) / "trajectories").glob("*/*.json")):
        yield Trajectory.from_dict(json.loads(path.read_text()))
