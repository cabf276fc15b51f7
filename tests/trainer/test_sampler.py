"""DropZeroAdvantageGroups on the real TransferQueue (local Ray, CPU): P1 Sec. 4.3 drop, no refill."""

from __future__ import annotations

import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import math
from importlib import resources
from types import SimpleNamespace

import pytest
import torch

import ray  # noqa: E402 - dependencies of verl[verl-core]
import transfer_queue as tq  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import DAPO_FILTERED_REWARD_COUNTS_KEY  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import PPOTrainer  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402

from verl_swe.trainer.sampler import DropZeroAdvantageGroups  # noqa: E402

pytestmark = pytest.mark.ray
N = 4  # rollout.n: trajectories per group
PREFIX = "training/zero_adv_drop"


@pytest.fixture(scope="module")
def transfer_queue():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # The controller and each storage unit take 1 CPU: one unit fits 2 CPUs.
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    try:
        yield tq
    finally:
        tq.close()
        ray.shutdown()


def live_keys(partition: str) -> set[str]:
    return set((tq.kv_list(partition) or {}).get(partition, {}))


def put_group(uid: str, rewards: list[float], partition: str = "train", extra_outputs: dict | None = None) -> list[str]:
    """A scored, finished group as verl's AgentLoopWorkerTQ writes it (agent_loop_tq.py): one row per
    output, key `{uid}_{session}_{index}`, reward on the last response token, then the prompt status tag."""
    keys, fields, tags = [], [], []
    for session, reward in enumerate(rewards):
        for index in range((extra_outputs or {}).get(session, 0) + 1):
            plen, rlen = 3 + session, 2 + index
            prompts, responses = torch.arange(1, plen + 1), torch.arange(10, 10 + rlen)
            rm_scores = torch.zeros(rlen)
            rm_scores[-1] = reward  # multi-output sessions carry the final reward on every output
            keys.append(f"{uid}_{session}_{index}")
            fields.append(dict(prompts=prompts, responses=responses, input_ids=torch.cat([prompts, responses]),
                               attention_mask=torch.ones(plen + rlen, dtype=torch.int64),
                               position_ids=torch.arange(plen + rlen),
                               response_mask=torch.ones(rlen, dtype=torch.int64),
                               rm_scores=rm_scores, uid=uid))
            tags.append(dict(status="success", prompt_len=plen, response_len=rlen, seq_len=plen + rlen,
                             global_steps=1, min_global_steps=1, max_global_steps=1))
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(fields), tags=tags)
    tq.kv_put(key=uid, partition_id=partition, tag={"is_prompt": True, "status": "finished", "global_steps": 1})
    return keys


def build_sampler(refill_fn, **sampler_kwargs) -> DropZeroAdvantageGroups:
    """Through verl's own builder and its default `trainer.v1` config, set only as the docs say."""
    defaults = OmegaConf.load(resources.files("verl.trainer.config") / "ppo_trainer.yaml")
    config = OmegaConf.create({"trainer": {"v1": defaults.trainer.v1}})
    sampler = config.trainer.v1.sampler
    assert {"custom_sampler", "sampler_kwargs"} <= set(sampler) and config.trainer.v1.trainer_mode == "sync"
    sampler.custom_sampler.path = "pkg://verl_swe.trainer.sampler"
    sampler.custom_sampler.name = "DropZeroAdvantageGroups"
    sampler.sampler_kwargs = sampler_kwargs
    fake_trainer = SimpleNamespace(config=config, trainer_mode="sync", _add_prompts_to_generate=refill_fn)
    buffer = PPOTrainer._build_replay_buffer(fake_trainer)
    assert type(buffer).__name__ == "DropZeroAdvantageGroups"
    return buffer


def test_drops_equal_reward_groups_and_verl_runs_fewer_optimizer_steps(transfer_queue):
    rewards = {
        "g0": [1, 0, 0, 0],  # kept
        "g1": [0, 0, 0, 0],  # dropped: all unsolved
        "g2": [1, 1, 0, -0.25],  # kept; session 1 emits two outputs
        "g3": [-0.25] * N,  # dropped: all equal and non-zero (turn penalty, P1 Eq. 3-4)
        "g4": [1] * N,  # dropped: all solved
        "g5": [0, -0.25, 0, 0],  # kept
    }
    keys = {uid: put_group(uid, r, extra_outputs={1: 1} if uid == "g2" else None) for uid, r in rewards.items()}
    kept_keys = keys["g0"] + keys["g2"] + keys["g5"]
    sampler = build_sampler(refill_fn=lambda n: pytest.fail("no refill when some groups are kept"))

    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=len(rewards))

    assert sorted(batch.keys) == sorted(kept_keys) and len(batch.tags) == len(batch.keys) == 13
    assert live_keys("train") == set(kept_keys)  # dropped rows cleared; prompt tags cleared by verl
    sessions = [r for rs in rewards.values() for r in rs]  # one reward per rollout, not per output
    assert metrics[f"{PREFIX}/groups_kept"] == 3 and metrics[f"{PREFIX}/groups_dropped"] == 3
    assert metrics[f"{PREFIX}/trajectories_kept"] == 13 and metrics[f"{PREFIX}/trajectories_dropped"] == 12
    assert metrics[f"{PREFIX}/reward_mean_before_drop"] == pytest.approx(sum(sessions) / len(sessions))
    assert metrics[f"{PREFIX}/resampled_batches"] == 0
    assert metrics[DAPO_FILTERED_REWARD_COUNTS_KEY] == {0.0: 1, -0.25: 1, 1.0: 1}

    # What verl does next (trainer_base.py _balance_batch): pad to a multiple of lcm(dp, mini * n).
    mini, epochs, dp = 2, 1, 2  # ppo_mini_batch_size in prompts, as verl configures it
    fake_trainer = SimpleNamespace(use_critic=False, global_steps=1, config=OmegaConf.create(
        {"trainer": {"critic_warmup": 0},
         "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": mini, "ppo_epochs": epochs}, "rollout": {"n": N}}}))
    multiple = PPOTrainer._get_required_batch_multiple(fake_trainer, dp)
    assert multiple == math.lcm(dp, mini * N) == 8
    padded = upsample_batch_to_divisible_size(batch, multiple, eos_token_id=0)
    pads = padded.keys[len(batch):]
    assert len(padded) == 16 and all(tag["is_padding"] for tag in padded.tags[len(batch):])
    pad_masks = tq.kv_batch_get(keys=pads, partition_id="train", select_fields=["response_mask"])["response_mask"]
    assert all(int(m.sum()) == 0 for m in pad_masks)  # fully masked: no loss, no gradient
    # engine_workers.py train_mini_batch: one optimizer step per mini-batch of mini * n rows, for each epoch
    # (per dp rank: (rows / dp) // (mini * n / dp) * epochs).
    optimizer_steps = (len(padded) // dp) // (mini * N // dp) * epochs
    assert optimizer_steps == math.ceil(len(kept_keys) / (mini * N)) * epochs == 2  # all 6 groups: 25 rows -> 4

    tq.kv_clear(keys=padded.keys, partition_id="train")  # as fit() does
    assert live_keys("train") == set()


def test_validation_batches_are_not_filtered(transfer_queue):
    keys = put_group("v0", [1, 0, 0, 0], partition="val") + put_group("v1", [0] * N, partition="val")
    sampler = build_sampler(refill_fn=lambda n: pytest.fail("no refill in validation"))
    batch, metrics = sampler.sample(global_steps=1, partition_id="val", batch_size=2)
    assert sorted(batch.keys) == sorted(keys) and not any(k.startswith(PREFIX) for k in metrics)
    tq.kv_clear(keys=batch.keys, partition_id="val")


def test_all_groups_dropped_samples_the_next_batch_then_gives_up(transfer_queue):
    # Every group equal: the batch is skipped (no update on it) and the next tasks are generated and sampled.
    put_group("a0", [0] * N), put_group("a1", [-0.25] * N)
    refills = []

    def refill(num_prompts):  # stands in for the trainer's _add_prompts_to_generate + the rollout
        refills.append(num_prompts)
        put_group("b0", [0, 1, 0, 0]), put_group("b1", [1] * N)

    batch, metrics = build_sampler(refill, max_resamples=2).sample(global_steps=1, partition_id="train", batch_size=2)
    assert refills == [2]
    assert {k.split("_")[0] for k in batch.keys} == {"b0"} and live_keys("train") == set(batch.keys)
    assert metrics[f"{PREFIX}/resampled_batches"] == 1 and metrics[f"{PREFIX}/groups_kept"] == 1
    assert metrics[f"{PREFIX}/groups_dropped"] == 3
    assert metrics[DAPO_FILTERED_REWARD_COUNTS_KEY] == {0.0: 1, -0.25: 1, 1.0: 1}
    tq.kv_clear(keys=batch.keys, partition_id="train")

    # A reward that never varies (e.g. a broken grader) stops the run instead of looping forever.
    put_group("c0", [0] * N), put_group("c1", [0] * N)
    refills.clear()

    def refill_flat(num_prompts):
        refills.append(num_prompts)
        put_group(f"d{len(refills)}", [0] * N), put_group(f"e{len(refills)}", [0] * N)

    with pytest.raises(RuntimeError, match="equal rewards"):
        build_sampler(refill_flat, max_resamples=1).sample(global_steps=1, partition_id="train", batch_size=2)
    assert refills == [2] and live_keys("train") == set()


def put_outputs(uid: str, rollouts: list[tuple[float, str]]) -> list[str]:
    """A finished group of SWEAgentLoop outputs: (reward, infra_failure kind or "") per rollout, in extra_fields."""
    keys, fields, tags = [], [], []
    for session, (reward, infra) in enumerate(rollouts):
        rm_scores = torch.zeros(2)
        rm_scores[-1] = reward
        keys.append(f"{uid}_{session}_0")
        fields.append(dict(prompts=torch.arange(1, 4), responses=torch.arange(10, 12), input_ids=torch.arange(5),
                           attention_mask=torch.ones(5, dtype=torch.int64), position_ids=torch.arange(5),
                           response_mask=torch.zeros(2, dtype=torch.int64) if infra else torch.ones(2, dtype=torch.int64),
                           rm_scores=rm_scores, uid=uid, extra_fields={"infra_failure": infra}))
        tags.append(dict(status="success", prompt_len=3, response_len=2, seq_len=5, global_steps=1,
                         min_global_steps=1, max_global_steps=1))
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
    tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "status": "finished", "global_steps": 1})
    return keys


def test_infrastructure_failures_leave_their_group_before_its_advantage(transfer_queue):
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    keys = {
        # One rollout lost its node: the group trains on the other three. Counted as a failure (reward 0) it
        # would have moved every sibling's advantage; excluded, the group's mean and std are the model's.
        "h0": put_outputs("h0", [(1, ""), (0, ""), (0, "host_lost"), (1, "")]),
        # Only one rollout is left: no group baseline, so the group is dropped (infra_min_group 2).
        "h1": put_outputs("h1", [(1, ""), (0, "env_build"), (0, "env_build"), (0, "env_build")]),
        # Left with two equal rewards: zero advantage, dropped by the P1 Sec. 4.3 rule that runs after.
        "h2": put_outputs("h2", [(0, ""), (0, ""), (1, "sandbox_start"), (1, "sandbox_start")]),
        "h3": put_outputs("h3", [(1, ""), (0, ""), (0, ""), (0, "")]),  # untouched
    }
    sampler = build_sampler(refill_fn=lambda n: pytest.fail("no refill when some groups are kept"))
    batch, metrics = sampler.sample(global_steps=1, partition_id="train", batch_size=4)

    kept = [k for k in keys["h0"] if k != "h0_2_0"] + keys["h3"]
    assert sorted(batch.keys) == sorted(kept) and live_keys("train") == set(kept)
    assert metrics["swe/infra/excluded"] == 1 + 3 + 2 and metrics["swe/infra/groups_dropped"] == 1
    assert metrics[f"{PREFIX}/groups_kept"] == 2 and metrics[f"{PREFIX}/groups_dropped"] == 1  # h2

    # verl's GRPO (P1 Eq. 2) over what the sampler returns: h0's three rollouts only.
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["rm_scores", "response_mask", "uid"])
    adv, _ = compute_grpo_outcome_advantage(data["rm_scores"], data["response_mask"],
                                            index=[k.split("_")[0] for k in batch.keys])
    h0 = [float(adv[i, -1]) for i, k in enumerate(batch.keys) if k.startswith("h0")]
    rewards = torch.tensor([1.0, 0.0, 1.0])  # sessions 0, 1, 3
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
    assert h0 == pytest.approx(expected.tolist(), abs=1e-5)
    tq.kv_clear(keys=batch.keys, partition_id="train")


def test_a_batch_of_only_infrastructure_failures_samples_the_next(transfer_queue):
    put_outputs("i0", [(0, "host_lost")] * N)
    refills = []

    def refill(num_prompts):
        refills.append(num_prompts)
        put_outputs("j0", [(1, ""), (0, ""), (0, ""), (0, "")])

    batch, metrics = build_sampler(refill, max_resamples=1).sample(global_steps=1, partition_id="train", batch_size=1)
    assert refills == [1] and {k.split("_")[0] for k in batch.keys} == {"j0"}
    assert metrics["swe/infra/excluded"] == N and metrics["swe/infra/groups_dropped"] == 1
    tq.kv_clear(keys=batch.keys, partition_id="train")
