"""Trajectories on disk: one JSON document per episode, written atomically (RFT, curation, eval and
the viewer read them back)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from verl_swe.files import write_json_atomic
from verl_swe.types import Trajectory


def trajectory_path(run_dir: Path, traj: Trajectory) -> Path:
    return Path(run_dir) / "trajectories" / traj.instance_id / f"{traj.episode_id}.json"


def save_trajectory(run_dir: Path, traj: Trajectory) -> Path:
    return write_json_atomic(trajectory_path(run_dir, traj), traj.to_dict(), indent=1, ensure_ascii=False)


def load_trajectories(run_dir: Path, unsettled: bool = False) -> Iterator[Trajectory]:
    """The run's trajectories whose outcome is the agent's (`Trajectory.settled`); cancelled episodes and
    infrastructure failures are saved too, for the record, and come only with `unsettled=True`: a resumed
    run redoes them and no count includes them."""
    for path in sorted((Path(run_dir) / "trajectories").glob("*/*.json")):
        traj = Trajectory.from_dict(json.loads(path.read_text()))
        if unsettled or traj.settled:
            yield traj
