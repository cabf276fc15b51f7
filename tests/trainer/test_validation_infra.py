"""Validation scores the episodes that ran: an episode whose sandbox failed to start is counted apart
(`val/infra/*`), not as a failure of the model. Checked through verl's own `_val_metrics_update`."""

from __future__ import annotations

import pytest

from verl_swe.trainer.spread_trainer import SpreadPaddingSyncTrainer


def val_metrics(infra: list[str], resolved: list[float]) -> dict[str, float]:
    """verl's validation metrics for one task with len(resolved) episodes, through the swe_sync trainer."""
    n = len(resolved)
    trainer = object.__new__(SpreadPaddingSyncTrainer)  # _val_metrics_update reads only its arguments
    infos = {"reward": list(resolved), "resolved": list(resolved), "infra_failure": infra}
    return trainer._val_metrics_update(["swe"] * n, ["task-1"] * n, infos, [3] * n,
                                       expected_acc_counts={("swe", "task-1"): n})


def test_infra_failures_are_left_out_of_the_validation_score_and_counted_apart():
    # 4 episodes: 2 resolved, 1 failed by the model, 1 whose sandbox never started.
    m = val_metrics(["", "", "", "sandbox_start"], [1.0, 1.0, 0.0, 0.0])
    assert m["val-core/swe/reward/mean@3"] == pytest.approx(2 / 3)
    assert m["val-aux/swe/resolved/mean@3"] == pytest.approx(2 / 3)
    assert not [k for k in m if "@4" in k]
    assert (m["val/infra/failed"], m["val/infra/sandbox_start"], m["val/infra/episodes_scored"]) == (1, 1, 3)


def test_without_infra_failures_validation_is_verls_own():
    m = val_metrics(["", "", "", ""], [1.0, 1.0, 0.0, 0.0])
    assert m["val-core/swe/reward/mean@4"] == pytest.approx(0.5)
    assert (m["val/infra/failed"], m["val/infra/episodes_scored"]) == (0, 4)
