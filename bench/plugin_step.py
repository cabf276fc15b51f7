"""Per-step cost of the plugin's algorithm pieces beside verl's own GRPO advantage + policy loss, on CPU.

    .venv/bin/python bench/plugin_step.py --out bench/plugin-step-results.json

One batch, built once: 1,000 trajectories (100 groups of G = 10, uuid group ids as verl's), 16,384 response
tokens each (float32 [1000, 16384]), a response_mask with ~30% observation tokens (mask 0) in runs, the reward on
each trajectory's last action token (30 groups all-equal: the filter drops 300 rows), old / new / rollout
log-probs near each other. Same process, same tensors; the three steps interleaved (order rotated each round):

- baseline: verl's compute_grpo_outcome_advantage + compute_policy_loss_vanilla (token-mean, clip 0.2/0.28,
  global_batch_info set as verl's engine does), forward + backward w.r.t. a leaf log_prob, 1,000 rows;
- ours, like for like: the same advantage + our filter (zero_advantage_groups, then index_select of the kept
  rows of the batch's tensors, result unused) + swe_dapo forward + backward + logprob_mismatch, on the same
  1,000 rows: the filter's cost without its saving (an upper bound; also the cost when nothing is dropped);
- ours, end to end: the same, the loss and the mismatch on the 700 kept rows (their log_prob is a leaf made
  beforehand: the model forward that would produce it is on neither side);
then each piece alone. Ratio = ours / baseline (target <= 1.05): of the medians, and the median of per-round
ratios. torch runs with as many threads as the machine has cores (os.cpu_count()), then with 1 thread.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from types import SimpleNamespace

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_policy_loss_vanilla, get_policy_loss_fn
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_corr_metrics_from_logprobs
from verl.workers.config.actor import ActorConfig

import verl_swe.algo.verl_registry  # noqa: F401 - registers swe_dapo
from verl_swe.algo.advantages import zero_advantage_groups
from verl_swe.algo.sampling import logprob_mismatch

N_GROUPS, G, T = 100, 10, 16384
DROPPED_GROUPS = 30


def make_batch(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n = N_GROUPS * G
    mask = np.zeros((n, T), dtype=np.float32)
    for i in range(n):  # alternating runs: action (mean 350 tokens), observation (mean 150): ~30% mask 0
        t, action = 0, True
        while t < T:
            length = int(rng.geometric(1 / (350 if action else 150)))
            mask[i, t:t + length] = 1.0 if action else 0.0
            t, action = t + length, not action
    rewards = (rng.random(n) < 0.4).astype(np.float32) - 0.05 * rng.integers(0, 3, n)  # 0/1 minus a turn penalty
    for g in rng.choice(N_GROUPS, DROPPED_GROUPS, replace=False):  # all-equal groups: zero advantage
        rewards[g * G:(g + 1) * G] = 0.0 if g % 2 else 1.0
    token_rewards = np.zeros((n, T), dtype=np.float32)
    last = T - 1 - np.argmax(mask[:, ::-1], axis=1)
    token_rewards[np.arange(n), last] = rewards
    old = -np.abs(rng.standard_normal((n, T), dtype=np.float32))
    near = lambda scale: torch.from_numpy(old + scale * rng.standard_normal((n, T), dtype=np.float32))  # noqa: E731
    uid = np.array([str(uuid.UUID(int=int(g))) for g in np.repeat(rng.integers(0, 2**63, N_GROUPS), G)], dtype=object)
    return {"responses": torch.from_numpy(rng.integers(0, 150_000, (n, T))), "response_mask": torch.from_numpy(mask),
            "old_log_probs": torch.from_numpy(old), "rollout_log_probs": near(0.02), "log_prob": near(0.05),
            "token_level_rewards": torch.from_numpy(token_rewards), "uid": uid}


def actor_config(batch_num_tokens: float) -> ActorConfig:
    config = ActorConfig(strategy="fsdp", rollout_n=G, ppo_micro_batch_size=2, clip_ratio=0.2, clip_ratio_low=0.2,
                         clip_ratio_high=0.28, loss_agg_mode="token-mean")
    config.global_batch_info.update(dp_size=1, batch_num_tokens=batch_num_tokens, global_batch_size=None)
    return config


def leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(True)


def mismatch_without_gather(rollout_log_probs, trainer_log_probs, response_mask):
    """The fix proposed for verl_swe.algo.sampling.logprob_mismatch (same values): masked sums, no gather."""
    mask = response_mask.to(trainer_log_probs.dtype)
    diff = trainer_log_probs - rollout_log_probs
    k3 = torch.exp(diff).sub_(1).sub_(diff).mul_(mask)  # exp(d) - 1 - d on action tokens, 0 elsewhere
    n = mask.sum()
    return {"swe/logprob_mismatch_kl": float(k3.sum() / n.clamp(min=1)),
            "swe/logprob_mismatch_max_abs": float(diff.abs_().mul_(mask).max())}


def sampler_drop(uid, rm_scores):
    """verl_swe.trainer.sampler.DropZeroAdvantageGroups._drop with TransferQueue stubbed (keys, rm_scores)."""
    from transfer_queue import KVBatchMeta

    import verl_swe.trainer.sampler as sampler
    keys = [f"{u}_{i % G}_0" for i, u in enumerate(uid)]
    meta = KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id="train", fields=["rm_scores"])
    sampler.tq = SimpleNamespace(kv_batch_get=lambda **_: {"rm_scores": rm_scores}, kv_clear=lambda **_: None)
    return lambda: sampler.DropZeroAdvantageGroups._drop(SimpleNamespace(tol=1e-8), meta, Counter(), [])


def timed(variants: dict, repeats: int) -> tuple[dict, dict]:
    """Wall and process-CPU ms of each variant, `repeats` rounds, the order rotated every round."""
    for fn in variants.values():  # warm-up
        fn()
    wall, cpu = {name: [] for name in variants}, {name: [] for name in variants}
    names = list(variants)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start, start_cpu = time.perf_counter(), time.process_time()
            variants[name]()
            wall[name].append((time.perf_counter() - start) * 1000)
            cpu[name].append((time.process_time() - start_cpu) * 1000)
    return wall, cpu


def measure(b: dict, threads: int, repeats: int) -> dict:
    torch.set_num_threads(threads)
    mask, old, rollout, rewards, uid = (b["response_mask"], b["old_log_probs"], b["rollout_log_probs"],
                                        b["token_level_rewards"], b["uid"])
    keep = (~zero_advantage_groups(rewards.sum(-1), uid)).nonzero().squeeze(1)
    adv_full, _ = compute_grpo_outcome_advantage(rewards, mask, uid)
    cfg_full, cfg_kept = actor_config(float(mask.sum())), actor_config(float(mask[keep].sum()))
    lp_full, lp_kept = leaf(b["log_prob"]), leaf(b["log_prob"][keep])  # the model's output on the kept rows
    sets = {1000: (lp_full, old, adv_full, mask, cfg_full),
            700: (lp_kept, old[keep], adv_full[keep], mask[keep], cfg_kept)}
    swe_dapo = get_policy_loss_fn("swe_dapo")
    batch_keys = ("responses", "response_mask", "old_log_probs", "rollout_log_probs", "token_level_rewards")
    ours, proposed = logprob_mismatch(rollout, old, mask), mismatch_without_gather(rollout, old, mask)
    assert all(math.isclose(ours[k], proposed[k], rel_tol=1e-4) for k in ours), (ours, proposed)

    def advantage():
        return compute_grpo_outcome_advantage(rewards, mask, uid)[0]

    def filter_drop(adv):  # which groups are all-equal, then keep the other rows of the batch
        idx = (~zero_advantage_groups(rewards.sum(-1), uid)).nonzero().squeeze(1)
        return {**{k: b[k].index_select(0, idx) for k in batch_keys}, "advantages": adv.index_select(0, idx)}

    def loss(fn, lp, old_, adv, mask_, cfg):
        lp.grad = None
        value, _ = fn(old_log_prob=old_, log_prob=lp, advantages=adv, response_mask=mask_,
                      loss_agg_mode="token-mean", config=cfg, rollout_is_weights=None)
        value.backward()

    def baseline():
        loss(compute_policy_loss_vanilla, lp_full, old, advantage(), mask, cfg_full)

    def ours_like_for_like():
        adv = advantage()
        filter_drop(adv)
        loss(swe_dapo, lp_full, old, adv, mask, cfg_full)
        logprob_mismatch(rollout, old, mask)

    def ours_end_to_end():
        d = filter_drop(advantage())
        loss(swe_dapo, lp_kept, d["old_log_probs"], d["advantages"], d["response_mask"], cfg_kept)
        logprob_mismatch(d["rollout_log_probs"], d["old_log_probs"], d["response_mask"])

    steps = {"baseline": baseline, "ours_like_for_like": ours_like_for_like, "ours_end_to_end": ours_end_to_end}
    pieces = {
        "grpo_advantage (verl)": advantage,
        "zero_advantage_groups": lambda: zero_advantage_groups(rewards.sum(-1), uid),
        "filter_drop (groups + index select)": lambda: filter_drop(adv_full),
        "sampler._drop, TQ stubbed": sampler_drop(uid, rewards),
        **{f"{name} loss fwd+bwd, {rows} rows": (lambda fn=fn, rows=rows: loss(fn, *sets[rows]))
           for rows in (1000, 700) for name, fn in (("vanilla", compute_policy_loss_vanilla), ("swe_dapo", swe_dapo))},
        "logprob_mismatch, 1000 rows": lambda: logprob_mismatch(rollout, old, mask),
        "proposed mismatch without gather, 1000 rows": lambda: mismatch_without_gather(rollout, old, mask),
        "verl rollout_corr metrics, 1000 rows": lambda: compute_rollout_corr_metrics_from_logprobs(old, rollout, mask),
    }
    wall, cpu = timed(steps, repeats)
    piece_wall, piece_cpu = timed(pieces, max(3, repeats // 2))
    wall, cpu = {**wall, **piece_wall}, {**cpu, **piece_cpu}
    median = {name: statistics.median(s) for name, s in wall.items()}
    median_cpu = {name: statistics.median(s) for name, s in cpu.items()}
    ratios = {}
    for key, name in (("like_for_like", "ours_like_for_like"), ("end_to_end", "ours_end_to_end")):
        ratios[key] = {"of_medians": median[name] / median["baseline"],
                       "median_per_round": statistics.median(o / b for o, b in zip(wall[name], wall["baseline"])),
                       "cpu_time_of_medians": median_cpu[name] / median_cpu["baseline"]}
    print(f"torch threads: {threads}")
    for name in median:
        print(f"  {name:50s} {median[name]:8.1f} ms wall {median_cpu[name]:8.1f} ms cpu (min {min(wall[name]):.1f})")
    for key, value in ratios.items():
        print(f"  ratio {key:14s}" + "".join(f"  {k} {v:.3f}" for k, v in value.items()) + "  (target <= 1.05)")
    return {"torch_threads": threads, "repeats": len(wall["baseline"]), "ratios": ratios, "median_wall_ms": median,
            "median_cpu_ms": median_cpu, "samples_wall_ms": wall, "samples_cpu_ms": cpu}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15, help="rounds of the three steps (pieces: half)")
    parser.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count(), 1])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    b, start = make_batch(), os.getloadavg()
    runs = [measure(b, threads, args.repeats) for threads in args.threads]
    if args.out:
        result = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                        "torch": torch.__version__, "python": platform.python_version(),
                        "load_average_start": start, "load_average_end": os.getloadavg()},
            "batch": {"trajectories": N_GROUPS * G, "group_size": G, "response_tokens": T,
                      "action_token_fraction": float(b["response_mask"].mean()),
                      "dropped_rows": int(zero_advantage_groups(b["token_level_rewards"].sum(-1), b["uid"]).sum())},
            "runs": runs,
        }
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
