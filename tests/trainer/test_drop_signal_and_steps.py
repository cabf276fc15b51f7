"""On the real TransferQueue (local Ray, CPU): which reward the zero-advantage drop reads (drop_signal), and
how the kept batch becomes optimizer steps under verl's own _balance_batch, with and without the padding
spread of trainer_mode=swe_sync (verl_swe/trainer/spread_trainer.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from tests.trainer.test_sampler import N, PREFIX, build_sampler, live_keys, transfer_queue  # noqa: F401 - fixture
from verl_swe.trainer.spread_trainer import SpreadPaddingSyncTrainer, spread_order, step_metrics

pytestmark = pytest.mark.ray


def put_scored_group(uid: str, outcomes: list[tuple[bool, float]]) -> list[str]:
    """A finished group as verl's TQ agent loop writes it, with SWEAgentLoop's reward_extra_info: one
    (resolved, final reward) per rollout; the final reward carries the turn penalty (P1 Eq. 3-4)."""
    import transfer_queue as tq
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    keys, fields, tags = [], [], []
    for session, (resolved, reward) in enumerate(outcomes):
        plen, rlen = 4, 3
        rm_scores = torch.zeros(rlen)
        rm_scores[-1] = reward
        keys.append(f"{uid}_{session}_0")
        fields.append(dict(prompts=torch.arange(1, plen + 1), responses=torch.arange(10, 10 + rlen),
                           input_ids=torch.arange(plen + rlen), attention_mask=torch.ones(plen + rlen, dtype=torch.int64),
                           position_ids=torch.arange(plen + rlen), response_mask=torch.ones(rlen, dtype=torch.int64),
                           rm_scores=rm_scores, uid=uid,
                           extra_fields={"reward_extra_info": {"resolved": float(resolved)}}))
        tags.append(dict(status="success", prompt_len=plen, response_len=rlen, seq_len=plen + rlen,
                         global_steps=1, min_global_steps=1, max_global_steps=1))
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
    tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})
    return keys


FAILED_LENGTHS = [(False, 0.0), (False, -0.1), (False, -0.2), (False, 0.0)]  # all failed, different turn counts
MIXED = [(True, 1.0), (False, -0.1), (False, 0.0), (True, 0.9)]


# With the turn penalty in the reward, all-failed and all-solved groups of unequal lengths carry "advantage".
@pytest.mark.parametrize("signal,kept", [("resolved", ["m"]), ("reward", ["f", "m", "s"])])
def test_the_drop_reads_the_task_reward_or_the_final_reward(transfer_queue, signal, kept):
    import transfer_queue as tq

    keys = {"f": put_scored_group("f", FAILED_LENGTHS), "m": put_scored_group("m", MIXED),
            "s": put_scored_group("s", [(True, 1.0), (True, 0.8), (True, 1.0), (True, 0.7)])}
    sampler = build_sampler(refill_fn=lambda n: pytest.fail("no refill"), drop_signal=signal)
    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=3)
    assert sorted(batch.keys) == sorted(k for uid in kept for k in keys[uid])
    assert metrics[f"{PREFIX}/groups_dropped"] == 3 - len(kept)
    finals = [r for o in (FAILED_LENGTHS, MIXED, [(1, 1.0), (1, 0.8), (1, 1.0), (1, 0.7)]) for _, r in o]
    assert metrics[f"{PREFIX}/reward_mean_before_drop"] == pytest.approx(sum(finals) / len(finals))  # the final reward
    tq.kv_clear(keys=batch.keys, partition_id="train")
    assert live_keys("train") == set()


def test_an_unknown_signal_is_refused():
    with pytest.raises(ValueError, match="drop_signal='turns': one of resolved, reward"):
        build_sampler(refill_fn=lambda n: None, drop_signal="turns")


def trainer(mode_cls, dp: int, mini_prompts: int):
    """A trainer object with what _balance_batch reads: the config, the actor's dp ranks (ulysses sp 2 here:
    two workers per dp rank), the tokenizer's EOS for padding rows."""
    t = object.__new__(mode_cls)
    t.config = OmegaConf.create({"trainer": {"critic_warmup": 0}, "actor_rollout_ref": {
        "actor": {"ppo_mini_batch_size": mini_prompts, "ppo_epochs": 1}, "rollout": {"n": N}}})
    t.use_critic, t.global_steps, t.tokenizer = False, 1, SimpleNamespace(eos_token_id=0)
    t.actor_rollout_wg = SimpleNamespace(_dispatch_info={"actor": [r for r in range(dp) for _ in range(2)]})
    return t


def real_rows_per_step(batch, dp: int, rows_per_step: int) -> list[int]:
    """What train_mini_batch gets: verl's dispatch hands rank r the r-th of dp equal chunks; each rank steps
    once per `rows_per_step` consecutive rows (actor.shuffle is off); a step's rows are all ranks' together."""
    pad = [tag.get("is_padding", False) for tag in batch.tags]
    return [int(v) for v in step_metrics_rows(pad, dp, rows_per_step)]


def step_metrics_rows(pad, dp, rows_per_step):
    per_rank = len(pad) // dp
    return [sum(not pad[r * per_rank + s * rows_per_step + k] for r in range(dp) for k in range(rows_per_step))
            for s in range(per_rank // rows_per_step)]


def test_padding_is_spread_over_the_optimizer_steps_not_left_in_the_last(transfer_queue):
    import transfer_queue as tq
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    dp, mini_prompts = 2, 4  # mini-batch 16 trajectories, 8 per rank per step
    results = {}
    for mode in (PPOTrainerSync, SpreadPaddingSyncTrainer):
        uids = [f"{mode.__name__[:4]}{g}" for g in range(5)]
        batch = build_batch([k for uid in uids for k in put_scored_group(uid, MIXED)])  # 20 kept rows
        tq.kv_clear(keys=uids, partition_id="train")  # the prompt tags, as the sampler clears them
        metrics: dict = {}
        out = mode._balance_batch(trainer(mode, dp, mini_prompts), batch, metrics)
        assert len(out) == 32 and sum(t.get("is_padding", False) for t in out.tags) == 12  # verl padded to 2 x 16
        results[mode] = (real_rows_per_step(out, dp, mini_prompts * N // dp), metrics)
        tq.kv_clear(keys=out.keys, partition_id="train")
    verl_steps, _ = results[PPOTrainerSync]
    spread_steps, metrics = results[SpreadPaddingSyncTrainer]
    assert verl_steps == [16, 4]  # verl: a full step, then 4 real trajectories under 12 padding rows
    assert spread_steps == [10, 10]  # the same 20 trajectories, half in each step
    assert metrics["swe/optimizer_steps"] == 2 and metrics["swe/real_rows_min_step"] == 10
    assert metrics["swe/padding_rows"] == 12 and "global_seqlen/min" in metrics  # verl's own balance metrics too
    assert live_keys("train") == set()


def build_batch(keys):
    from transfer_queue import KVBatchMeta

    tags = [dict(status="success", prompt_len=4, response_len=3, seq_len=7, global_steps=1, min_global_steps=1,
                 max_global_steps=1) for _ in keys]
    return KVBatchMeta(keys=keys, tags=tags, partition_id="train")


def test_spread_order_is_a_permutation_within_each_rank():
    pad = [False] * 7 + [True] * 5 + [False] * 10 + [True] * 2  # 2 ranks x 12 rows, 3 steps of 4 per rank
    order = spread_order(pad, 2, 4)
    assert sorted(order) == list(range(24)) and set(order[:12]) == set(range(12))  # no row changes rank
    assert step_metrics_rows([pad[i] for i in order], 2, 4) == [6, 5, 6]  # 17 real rows: never fewer than 5
    assert step_metrics_rows(pad, 2, 4) == [8, 7, 2]  # verl's order
    assert step_metrics([pad[i] for i in order], 2, 4, epochs=2)["swe/optimizer_steps"] == 6
    with pytest.raises(ValueError, match="do not split"):
        spread_order(pad[:-1], 2, 4)
