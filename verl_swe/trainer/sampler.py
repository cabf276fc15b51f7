"""Drop zero-advantage groups from the sampled batch, without refilling (P1 Sec. 4.3).

P1 Sec. 4.3: "samples with zero advantage are dropped": after the G rollouts of each task are scored,
a group whose rewards are all equal has A_hat = 0 for every member (Eq. 2) and is removed from the
batch; the actor trains on what is left, so the number of optimizer steps varies per iteration
(App. D: "2-8 optimization steps per iteration"). verl's `algorithm.filter_groups` (DAPO dynamic
sampling) refills the batch instead; it stays the alternative (leave `custom_sampler` unset).

Enable (v1 sync trainer):
    trainer.v1.sampler.custom_sampler.path=pkg://verl_swe.trainer.sampler
    trainer.v1.sampler.custom_sampler.name=DropZeroAdvantageGroups
    trainer.v1.sampler.sampler_kwargs.max_resamples=4   # optional, see `sample`
verl builds a custom sampler without `filter_groups_metric`, so `algorithm.filter_groups` is ignored
while this sampler is set: enable one or the other.
"""

from __future__ import annotations

import logging
from collections import Counter

import torch
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import (
    DAPO_FILTERED_REWARD_COUNTS_KEY,
    ReplayBuffer,
    _accumulate_eviction_metrics,
)

from verl_swe.algo.advantages import zero_advantage_groups
from verl_swe.eval.metrics import batch_metrics, read_episode_metrics
from verl_swe.trainer import drop_signal
from verl_swe.trainer.infra_filter import exclude_infra_failures, infra_batch_metrics

logger = logging.getLogger(__name__)


class DropZeroAdvantageGroups(ReplayBuffer):
    """verl's sync ReplayBuffer, minus the groups that carry no learning signal.

    sampler_kwargs: `max_resamples` (default 4): how many fresh batches to generate when every group of
    a batch is dropped, before giving up; `tol` (default 1e-8): rewards closer than this are equal;
    `drop_signal` (default `reward`; the recipes set `resolved`): which reward decides zero advantage
    (verl_swe/trainer/drop_signal.py);
    `infra_min_group` (default 2): rollouts that failed for infrastructure reasons leave their group first
    (verl_swe/trainer/infra_filter.py), and a group left with fewer than this many is dropped.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.trainer_mode != "sync":
            # The async trainers use ReplayBufferAsync's sampling loop; this class extends the sync one.
            raise ValueError(f"DropZeroAdvantageGroups supports trainer.v1.trainer_mode=sync, got {self.trainer_mode}")
        options = self.sampler_kwargs or {}
        self.max_resamples = int(options.get("max_resamples", 4))
        self.tol = float(options.get("tol", 1e-8))
        self.drop_signal = drop_signal.check_signal(str(options.get("drop_signal", "reward")))
        self.infra_min_group = int(options.get("infra_min_group", 2))  # infra_filter.py
        if self.max_resamples > 0 and self.refill_fn is None:
            raise ValueError("max_resamples > 0 needs refill_fn (the trainer passes it)")

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if partition_id == "val":  # validation scores every rollout; nothing is trained on it
            return batch, metrics

        stats: Counter = Counter()
        rewards: list[float] = []
        episodes: list[dict] = []  # swe/ metrics of every rollout sampled, dropped ones too
        for attempt in range(self.max_resamples + 1):
            if attempt:
                # Every group of the last batch was dropped. The trainer cannot run on an empty batch
                # (_balance_batch pads from batch.keys[0]; old-log-prob/advantage/update need rows), and
                # returning the zero-advantage groups would not be a no-op either (KL/entropy terms, Adam
                # momentum, weight decay and the LR schedule still move). So skip that batch as the paper
                # skips its groups: generate the next batch of tasks with the same policy, and train on it.
                self.refill_fn(batch_size)
                batch, more = super().sample(global_steps, partition_id, batch_size)
                _accumulate_eviction_metrics(metrics, more, 0)
            episodes.extend(read_episode_metrics(batch))
            batch = exclude_infra_failures(batch, stats, self.infra_min_group)  # before any group statistic
            batch, collapsed = self._drop(batch, stats, rewards) if batch.keys else (batch, {})
            if collapsed:  # reward value -> groups dropped at it (verl logs it as a wandb table)
                _accumulate_eviction_metrics(metrics, {DAPO_FILTERED_REWARD_COUNTS_KEY: collapsed}, 0)
            if len(batch):
                break
        else:
            raise RuntimeError(
                f"Every group of {self.max_resamples + 1} consecutive batches had equal rewards (all: "
                f"{sorted(set(rewards))[:5]}); check the reward, or raise sampler_kwargs.max_resamples."
            )

        prefix = f"{self._metrics_prefix(partition_id)}/zero_adv_drop"
        metrics.update(
            {
                f"{prefix}/groups_kept": stats["groups_kept"],
                f"{prefix}/groups_dropped": stats["groups_dropped"],
                f"{prefix}/trajectories_kept": len(batch),
                f"{prefix}/trajectories_dropped": stats["trajectories_dropped"],
                f"{prefix}/reward_mean_before_drop": sum(rewards) / len(rewards),
                f"{prefix}/resampled_batches": attempt,
            }
        )
        metrics.update(batch_metrics(episodes, stats["groups_kept"], stats["groups_kept"] + stats["groups_dropped"]))
        metrics.update(infra_batch_metrics(stats))
        logger.info("zero-advantage drop: kept %d groups, dropped %d, resampled %d batches",
                    stats["groups_kept"], stats["groups_dropped"], attempt)
        return batch, metrics

    def _drop(self, batch: KVBatchMeta, stats: Counter, rewards: list) -> tuple[KVBatchMeta, dict]:
        """Clear the zero-advantage groups of `batch` from TransferQueue; return the rest and their values."""
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=drop_signal.fields(self.drop_signal))
        if "rm_scores" not in data.keys():  # TQ returns an empty TensorDict for a missing field
            raise RuntimeError(
                "rm_scores is not in TransferQueue at sampling time: DropZeroAdvantageGroups needs the reward "
                "computed in the agent loop (rule-based reward, or reward.reward_model.enable_resource_pool=True), "
                "as algorithm.filter_groups does."
            )
        # Key format `{uid}_{session_id}_{index}` (replay_buffer.py docstring). A session may emit several
        # outputs that all carry its final reward; like verl's GRPO (v1/utils.py), use the final one per
        # session, so each rollout counts once.
        final: dict[tuple[str, str], tuple[int, float, float]] = {}  # (uid, session_id) -> (index, reward, signal)
        extras = data["extra_fields"] if "extra_fields" in drop_signal.fields(self.drop_signal) else [None] * len(batch)
        for key, scores, extra in zip(batch.keys, data["rm_scores"], extras, strict=True):
            uid, session, index = key.split("_")
            if (uid, session) not in final or final[uid, session][0] < int(index):
                reward = float(scores.sum())  # trajectory reward = sum over tokens
                final[uid, session] = (int(index), reward, drop_signal.trajectory_signal(self.drop_signal, reward, extra))
        uids = [uid for uid, _ in final]
        values = [signal for _, _, signal in final.values()]  # what decides the drop (drop_signal)
        rewards.extend(reward for _, reward, _ in final.values())

        # All-equal rewards -> A_hat = 0 for the whole group (Eq. 2). This includes all -0.25 (the turn
        # penalty, Eq. 3-4), not only all 0 or all 1, and a group left with one rollout (its session
        # siblings failed): it has no group baseline (verl's GRPO would use its raw reward as advantage).
        drop = zero_advantage_groups(torch.tensor(values), uids, tol=self.tol)
        dropped = {uid for uid, d in zip(uids, drop.tolist(), strict=True) if d}
        collapsed = Counter(round(v, 6) for uid, v in dict(zip(uids, values, strict=True)).items() if uid in dropped)
        dropped_keys = [key for key in batch.keys if key.split("_")[0] in dropped]
        if dropped_keys:
            # fit() clears only the keys it gets back (trainer_base.py, "cleanup transfer queue").
            tq.kv_clear(keys=dropped_keys, partition_id=batch.partition_id)

        kept = [(key, tag) for key, tag in zip(batch.keys, batch.tags, strict=True) if key.split("_")[0] not in dropped]
        stats["groups_dropped"] += len(dropped)
        stats["groups_kept"] += len(set(uids)) - len(dropped)
        stats["trajectories_dropped"] += len(dropped_keys)
        out = KVBatchMeta(
            keys=[k for k, _ in kept],
            tags=[t for _, t in kept],
            partition_id=batch.partition_id,
            fields=batch.fields,
            extra_info=batch.extra_info,
        )
        return out, dict(collapsed)
