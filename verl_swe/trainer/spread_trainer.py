"""`trainer.v1.trainer_mode=swe_sync`: verl's sync trainer, with each step's padding spread over its mini-batches.

After the zero-advantage drop (sampler.py) the kept batch is rarely a multiple of the mini-batch. verl's
`_balance_batch` pads it with zero-mask rows (`upsample_batch_to_divisible_size`), splits it over the
data-parallel ranks and keeps each rank's rows in index order, so the padding, appended last, fills the
last mini-batches of every rank; `train_mini_batch` then steps the optimizer once per consecutive
mini-batch. E.g. 1,000 kept trajectories at 160 per mini-batch: 7 steps, the last on 40 real trajectories
and 120 padding rows, which still moves Adam's moments and the weights as a full step would.

This reorders rows only *within* each rank after verl's balancing (so the token balance over ranks is
verl's), giving every mini-batch an equal share of the padding: 7 steps of ~143 real rows each. It logs
`swe/optimizer_steps` per iteration (P1 App. D reports 2-8) and the real rows of the emptiest step.
The rest of verl branches on `trainer_mode == "sync"`; to it, this is that trainer. Its validation leaves
infrastructure failures out of the scores and counts them in `val/infra/*` (infra_filter.py).
"""

from __future__ import annotations

import logging

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

logger = logging.getLogger(__name__)


def spread_order(is_padding: list[bool], dp_size: int, rows_per_step: int) -> list[int]:
    """A permutation of a balanced batch (dp_size consecutive equal chunks, one per rank) after which each
    rank's padding rows are dealt round-robin over its mini-batches of `rows_per_step` consecutive rows,
    the real rows filling the rest in their original order."""
    n = len(is_padding)
    if n % dp_size or (n // dp_size) % rows_per_step:
        raise ValueError(f"{n} rows do not split into {dp_size} ranks x mini-batches of {rows_per_step}")
    per_rank = n // dp_size
    steps = per_rank // rows_per_step
    order: list[int] = []
    for rank in range(dp_size):
        rows = range(rank * per_rank, (rank + 1) * per_rank)
        real = iter([i for i in rows if not is_padding[i]])
        pads: list[list[int]] = [[] for _ in range(steps)]
        for j, i in enumerate(i for i in rows if is_padding[i]):
            pads[(j + rank) % steps].append(i)  # ranks start one step apart: even totals per step too
        for step in pads:
            order += [next(real) for _ in range(rows_per_step - len(step))] + step
    return order


def step_metrics(is_padding: list[bool], dp_size: int, rows_per_step: int, epochs: int) -> dict[str, float]:
    """Optimizer steps of the update and the real rows in each, as train_mini_batch will split the batch."""
    per_rank = len(is_padding) // dp_size
    steps = per_rank // rows_per_step
    real = [sum(not is_padding[rank * per_rank + step * rows_per_step + k]
                for rank in range(dp_size) for k in range(rows_per_step)) for step in range(steps)]
    return {"swe/optimizer_steps": steps * epochs, "swe/padding_rows": sum(is_padding),
            "swe/real_rows_min_step": min(real, default=0), "swe/real_rows_max_step": max(real, default=0)}


@register_trainer("swe_sync")
class SpreadPaddingSyncTrainer(PPOTrainerSync):
    def _build_replay_buffer(self):
        # Called by PPOTrainer.__init__ right after it reads trainer_mode: from here on verl's replay buffer,
        # dataloader and checkpoint code take their sync branches, as for trainer_mode=sync.
        self.trainer_mode = "sync"
        return super()._build_replay_buffer()

    def _val_metrics_update(self, data_sources, sample_uids, reward_extra_infos_dict, sample_turns,
                            expected_acc_counts=None):
        # Validation scores the episodes that ran: infrastructure failures are counted apart (val/infra/*).
        from verl_swe.trainer.infra_filter import validation_without_infra_failures

        sources, uids, infos, turns, expected, infra = validation_without_infra_failures(
            data_sources, sample_uids, reward_extra_infos_dict, list(sample_turns), expected_acc_counts)
        return {**super()._val_metrics_update(sources, uids, infos, turns, expected_acc_counts=expected), **infra}

    def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        batch = super()._balance_batch(batch, metrics, logging_prefix=logging_prefix, keep_minibatch=keep_minibatch)
        dp_size = max(self.actor_rollout_wg._dispatch_info["actor"]) + 1  # set by super()
        actor = self.config.actor_rollout_ref.actor
        mini = actor.ppo_mini_batch_size * self.config.actor_rollout_ref.rollout.n
        if self.use_critic or mini % dp_size or len(batch) % mini:
            return batch  # a multiple verl chose for other updates too (critic): leave its order alone
        pad = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        if any(pad):
            batch.reorder(spread_order(pad, dp_size, mini // dp_size))
            pad = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        metrics.update(step_metrics(pad, dp_size, mini // dp_size, int(actor.ppo_epochs)))
        return batch
