"""Keep a run's saved trajectories equal to the steps its checkpoint holds, across kills and restarts.

The agent loop saves each episode as it ends. A run killed mid-step leaves episodes of a step that was
never trained on; on restart verl resumes from the last checkpoint and samples that step again. Without
this, those episodes would stay on disk next to their re-run: duplicated trajectories for the viewer,
the curriculum and the reward curves. verl writes `latest_checkpointed_iteration.txt` last when it
saves, and (sync trainer) starts the next step's rollouts after, so every trajectory newer than that
file belongs to a step the restart will redo. They are moved aside, not deleted.
"""

from __future__ import annotations

import time
from pathlib import Path

CHECKPOINT_MARKER = "latest_checkpointed_iteration.txt"


def set_aside_unfinished(trajectory_dir: Path, checkpoint_dir: Path, resuming: bool) -> int:
    """Move the trajectories no checkpoint covers to `<trajectory_dir>/trajectories.unfinished/<time>/`;
    return how many. Without a checkpoint to resume from (or `resuming=False`), that is all of them."""
    src = Path(trajectory_dir) / "trajectories"
    marker = Path(checkpoint_dir) / CHECKPOINT_MARKER
    if not src.is_dir():
        return 0
    cutoff = marker.stat().st_mtime_ns if resuming and marker.exists() else -1
    dest = Path(trajectory_dir) / "trajectories.unfinished" / time.strftime("%Y%m%d-%H%M%S")
    moved = 0
    for path in sorted(src.glob("*/*.json")):
        if path.stat().st_mtime_ns > cutoff:
            target = dest / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            path.replace(target)
            moved += 1
    return moved
