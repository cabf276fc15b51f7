"""Reading a run directory's trajectory files without letting one bad file stop the rest: each file
gives a `Trajectory` or a `Problem` that names the file and what is wrong with it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from verl_swe.types import Trajectory

# Trajectory files carry no version field yet (verl_swe/types.py); one with `format_version` other than
# this one was written by another verl-swe and is refused by name instead of misread.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str  # unreadable | incompatible_format
    message: str


def trajectory_files(run_dir: Path) -> list[Path]:
    """The files `save_trajectory` writes: RUN_DIR/trajectories/<instance>/<episode>.json."""
    return sorted((Path(run_dir) / "trajectories").glob("*/*.json"))


def read_trajectory(path: Path) -> Trajectory | Problem:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return Problem(str(path), "unreadable", f"not a complete JSON document (truncated?): {e}")
    if not isinstance(data, dict):
        return Problem(str(path), "incompatible_format", f"a JSON {type(data).__name__}, not a trajectory object")
    version = data.pop("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        return Problem(str(path), "incompatible_format",
                       f"trajectory format_version {version!r}; this verl-swe reads version {FORMAT_VERSION}")
    try:
        traj = Trajectory.from_dict(data)
        if not isinstance(traj.messages, list) or not all(isinstance(m, dict) and {"role", "content"} <= m.keys()
                                                           for m in traj.messages):
            raise ValueError("messages must be a list of {role, content} objects")
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        return Problem(str(path), "incompatible_format", f"not this verl-swe's trajectory format: {type(e).__name__}: {e}")
    return traj


def read_run_dir(run_dir: Path) -> Iterator[tuple[Path, Trajectory | Problem]]:
    for path in trajectory_files(run_dir):
        yield path, read_trajectory(path)
