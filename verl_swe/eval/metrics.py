"""`swe/` metrics: flat, one value per episode, averaged over a batch (training) or a run (eval).

Training path (verl 0.9.1, v1 trainer): `SWEAgentLoop` puts `episode_metrics(traj)` in its output's
`extra_fields["swe_metrics"]`; verl stores `extra_fields` in TransferQueue with the trajectory; the
replay buffer's `sample()` returns a metrics dict that `PPOTrainer._step_once` merges into the step's
metrics, which `Tracking` sends to every configured logger (console, wandb, tensorboard, file). So the
sampler (`verl_swe/trainer/sampler.py`) reads the sampled rollouts' `swe_metrics` with
`read_episode_metrics` before it drops zero-advantage groups, and adds `batch_metrics(...)`: no verl
code is copied. Rollout-vs-trainer mismatch is verl's own `training/rollout_probs_diff_{mean,max,std}`
(logged when `rollout.calculate_log_probs=true`); it is computed after sampling, so it is not re-exported.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from verl_swe.types import ExitStatus, Trajectory

PREFIX = "swe/"


def episode_metrics(traj: Trajectory) -> dict[str, float]:
    """One episode's `swe/` values. Tool counts are per episode (`swe/tool/<name>`: calls of that tool);
    `tokens_per_turn` is the model's own tokens; `context_tokens` the final prompt + response length."""
    m = {f"swe/exit/{s.value}": float(traj.exit_status == s) for s in ExitStatus}
    turns = traj.turns
    m.update({
        "swe/resolved": float(traj.resolved),
        "swe/reward": float(traj.reward),
        "swe/turn_penalty": float(traj.turn_penalty),
        "swe/num_turns": float(len(turns)),
        "swe/submitted": float(traj.exit_status == ExitStatus.SUBMITTED),
        "swe/format_error_turns": float(sum(t.format_error for t in turns)),
        "swe/tokens_per_turn": sum(t.generated_tokens for t in turns) / len(turns) if turns else 0.0,
        "swe/observation_tokens_per_turn": sum(t.observation_tokens for t in turns) / len(turns) if turns else 0.0,
        "swe/context_tokens": float(traj.prompt_tokens + traj.response_tokens),
        "swe/generated_tokens": float(traj.generated_tokens),
        "swe/patch_chars": float(len(traj.patch)),
        "swe/error": float(traj.error is not None),
        "swe/episode_s": float(traj.timings.get("total_s", 0.0)),
        "swe/grade_s": float(traj.timings.get("grade_s", 0.0)),  # inside the rollout: each episode grades its patch
    })
    for tool, n in Counter(t.action.tool for t in turns if t.action is not None).items():
        m[f"swe/tool/{tool}"] = float(n)
    m.update(infra_metrics(traj))
    m.update(cost_metrics(traj))
    m.update(hack_metrics(traj))
    return m


INFRA = "swe/infra/"
COST = "swe/cost/"


def infra_metrics(traj: Trajectory) -> dict[str, float]:
    """`swe/infra/failed` (1: the episode failed for the infrastructure's reason, verl_swe/agent/infra.py),
    `swe/infra/<kind>`, and `swe/infra/retries` (attempts before this one that failed so)."""
    m = {f"{INFRA}failed": float(traj.infra_failure is not None),
         f"{INFRA}retries": float(len(traj.metadata.get("infra_attempts", [])))}
    if traj.infra_failure:
        m[f"{INFRA}{traj.infra_failure}"] = 1.0
    return m


HACK = "swe/hack/"


def hack_metrics(traj: Trajectory) -> dict[str, float]:
    """`swe/hack/<flag>` (1: the reward-hack monitor raised it, verl_swe/reward/monitor.py), `swe/hack/any`,
    and `swe/hack/zeroed` (`on_hack: zero` took the episode's outcome reward). Every flag is logged, 0 or 1,
    so a step's mean is the share of its episodes that raised it."""
    from verl_swe.reward.monitor import HACK_FLAGS

    m = {f"{HACK}{f}": float(bool(traj.hack_flags.get(f))) for f in HACK_FLAGS}
    m[f"{HACK}any"] = float(any(traj.hack_flags.values()))
    m[f"{HACK}zeroed"] = float(traj.hack_zeroed)
    return m


def cost_metrics(traj: Trajectory) -> dict[str, float]:
    """`swe/cost/<key>` for each of the trajectory's cost values (sandbox CPU-seconds, sandbox-seconds,
    wall seconds, tokens; verl_swe/agent/episode.py `_cost`)."""
    return {f"{COST}{k}": float(v) for k, v in traj.cost.items()}


def mean_metrics(episodes: Iterable[dict[str, float]]) -> dict[str, float]:
    """Mean of each key over the episodes; a key an episode lacks counts 0 there (a tool it never called)."""
    episodes = [e for e in episodes if e]
    if not episodes:
        return {}
    keys = sorted({k for e in episodes for k in e})
    return {k: sum(float(e.get(k, 0.0)) for e in episodes) / len(episodes) for k in keys}


def batch_metrics(episodes: list[dict[str, float]], groups_kept: int | None = None,
                  groups_total: int | None = None) -> dict[str, float]:
    """What one training step logs under `swe/`: the means over every rollout sampled (before any group is
    dropped: they describe the policy, not the trained subset), plus the zero-advantage filter's yield.
    An infrastructure failure says nothing about the policy: it counts in `swe/infra/*` and `swe/cost/*` (means
    over every rollout: `swe/infra/failed` x `swe/episodes` of them failed so), and in no other mean."""
    policy = [e for e in episodes if not e.get(f"{INFRA}failed")]
    out = mean_metrics(policy)
    out = {k: v for k, v in out.items() if not k.startswith((INFRA, COST))}
    out.update({k: v for k, v in mean_metrics(episodes).items() if k.startswith((INFRA, COST))})
    if episodes:
        out["swe/episodes"] = float(len(episodes))
    if groups_total:
        out["swe/groups_kept"] = float(groups_kept or 0)
        out["swe/groups_kept_frac"] = (groups_kept or 0) / groups_total
    return out


def read_episode_metrics(batch: Any) -> list[dict[str, float]]:
    """The `swe_metrics` of each rollout of a TransferQueue batch (a `KVBatchMeta`), the final output of
    each session only (keys `{uid}_{session}_{index}`). Rows without them (another agent loop) are skipped."""
    import transfer_queue as tq

    if not batch.keys:
        return []
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
    if "extra_fields" not in data.keys():  # TQ answers an empty TensorDict for a field no row has
        return []
    final: dict[tuple[str, str], tuple[int, dict]] = {}
    for key, extra in zip(batch.keys, list(data["extra_fields"]), strict=True):  # as verl's replay_buffer.py reads it
        uid, session, index = key.rsplit("_", 2)
        extra = getattr(extra, "data", extra)
        swe = extra.get("swe_metrics") if isinstance(extra, dict) else None
        if isinstance(swe, dict) and ((uid, session) not in final or final[uid, session][0] < int(index)):
            final[uid, session] = (int(index), swe)
    return [swe for _, swe in final.values()]
