"""A restarted run keeps exactly the trajectories of the steps its checkpoint holds (verl_swe/trainer/resume.py)."""

import os
import time

from verl_swe.trainer.resume import CHECKPOINT_MARKER, set_aside_unfinished


def _episode(run, name, t_ns):
    path = run / "trajectories" / "task-1" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    os.utime(path, ns=(t_ns, t_ns))
    return path


def test_episodes_after_the_last_checkpoint_are_set_aside(tmp_path):
    now = time.time_ns()
    done = _episode(tmp_path, "step1", now - 2_000_000_000)
    marker = tmp_path / CHECKPOINT_MARKER
    marker.write_text("1")
    os.utime(marker, ns=(now - 1_000_000_000, now - 1_000_000_000))
    unfinished = _episode(tmp_path, "step2", now)

    assert set_aside_unfinished(tmp_path, tmp_path, resuming=True) == 1
    assert done.exists() and not unfinished.exists()
    [moved] = (tmp_path / "trajectories.unfinished").glob("*/task-1/step2.json")
    assert moved.read_text() == "{}"  # kept, not deleted
    assert set_aside_unfinished(tmp_path, tmp_path, resuming=True) == 0  # idempotent


def test_a_fresh_start_sets_aside_everything_and_an_empty_run_nothing(tmp_path):
    assert set_aside_unfinished(tmp_path, tmp_path, resuming=True) == 0  # no trajectories/ yet
    _episode(tmp_path, "old", time.time_ns())
    (tmp_path / CHECKPOINT_MARKER).write_text("3")
    assert set_aside_unfinished(tmp_path, tmp_path, resuming=False) == 1  # resume_mode=disable: step 1 again
    assert not list((tmp_path / "trajectories").glob("*/*.json"))
