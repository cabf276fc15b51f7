"""Preflight checks on where a run writes and how long it runs.

- Paths on many nodes: verl starts an agent-loop worker on every node, each reading agent_loop.yaml and
  writing trajectories relative to its own working directory; the task runner (which loads the data) may
  land on any node. A relative path there means one copy per node's disk, or a file that is not found.
- Iterations: verl stops at trainer.total_training_steps or after trainer.total_epochs passes over the
  pool, whichever comes first (its dataloader cycles between passes); the paper's counts need the steps.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def _files(value) -> list[str]:
    if value is None:
        return []
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def multinode_path_problems(config: DictConfig) -> list[str]:
    nnodes = int(OmegaConf.select(config, "trainer.nnodes", default=1) or 1)
    if nnodes <= 1:
        return []
    keys = ["trainer.default_local_dir", "swe.agent.trajectory_dir", "actor_rollout_ref.model.path",
            "data.train_files", "data.val_files"]
    problems = []
    for key in keys:
        for value in _files(OmegaConf.select(config, key, default=None, throw_on_missing=False)):
            if "://" in value or Path(value).expanduser().is_absolute():
                continue
            if key == "actor_rollout_ref.model.path" and _HUB_ID.match(value) and not Path(value).exists():
                continue  # a hub id: every node downloads it
            problems.append(f"{key}={value} is relative: with trainer.nnodes={nnodes} every node resolves it "
                            "against its own working directory; use an absolute path on storage all nodes mount "
                            "(e.g. swe.run_root=/shared/runs, SWE_RUN_ROOT)")
    return problems


def _pool_rows(config: DictConfig) -> int | None:
    rows = 0
    for f in _files(OmegaConf.select(config, "data.train_files", default=None, throw_on_missing=False)):
        path = Path(f).expanduser()
        if path.suffix != ".parquet" or not path.exists():
            return None
        import pyarrow.parquet as pq

        rows += pq.read_metadata(path).num_rows
    return rows or None


def iterations(config: DictConfig) -> tuple[int | None, str]:
    """(iterations the run will make, how that follows) from the config and, when local, the pool's size."""
    steps = OmegaConf.select(config, "trainer.total_training_steps", default=None)
    epochs = int(config.trainer.total_epochs)
    batch = int(config.data.train_batch_size)
    rows = _pool_rows(config)
    if rows is None:
        return steps, f"trainer.total_training_steps={steps} (pool size unknown: data.train_files not local yet)"
    per_pass = rows // batch
    by_epochs = per_pass * epochs
    n = by_epochs if steps is None else min(int(steps), by_epochs)
    return n, f"{n} iterations: {rows} tasks / {batch} per iteration = {per_pass} per pass, x total_epochs {epochs}" + \
        (f", total_training_steps {steps}" if steps is not None else "")


def iteration_problems(config: DictConfig) -> list[str]:
    steps = OmegaConf.select(config, "trainer.total_training_steps", default=None)
    rows = _pool_rows(config)
    if rows is None:
        return []
    batch, epochs = int(config.data.train_batch_size), int(config.trainer.total_epochs)
    per_pass = rows // batch
    if per_pass == 0:
        return [f"data.train_files has {rows} tasks, fewer than data.train_batch_size={batch}: no iteration runs"]
    if steps is not None and per_pass * epochs < int(steps):
        need = math.ceil(int(steps) / per_pass)
        return [f"trainer.total_epochs={epochs} stops the run after {per_pass * epochs} of trainer.total_training_steps="
                f"{steps} iterations ({rows} tasks / {batch} = {per_pass} per pass): set trainer.total_epochs>={need}"]
    return []


def absolute_run_paths(config: DictConfig) -> Path:
    """Make trainer.default_local_dir and swe.agent.trajectory_dir absolute in `config` (the driver's view);
    return the run directory. verl's workers, and on many nodes other machines, must not resolve them against
    their own working directories (the preflight refused relative ones for nnodes > 1 already)."""
    run_dir = Path(config.trainer.default_local_dir).expanduser().resolve()
    OmegaConf.update(config, "trainer.default_local_dir", str(run_dir))
    trajectory_dir = OmegaConf.select(config, "swe.agent.trajectory_dir")
    if trajectory_dir:
        OmegaConf.update(config, "swe.agent.trajectory_dir", str(Path(trajectory_dir).expanduser().resolve()))
    return run_dir
