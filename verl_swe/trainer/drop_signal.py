"""Which reward decides that a group has zero advantage (sampler_kwargs.drop_signal).

- `resolved`: the task reward R(tau) in {0, 1} (P1 Sec. 3.1): a group is dropped when all its rollouts
  failed or all succeeded. The paper's evidence points here: 2-8 optimizer steps per iteration (App. D) out
  of 3,000 rollouts at batch 128 means a minority of the rollouts is kept, while with the turn penalty an
  all-failed group is kept unless every rollout took the same number of turns (~23 steps per iteration).
- `reward`: the final reward R(tau) + R_length(tau) (Eq. 3-4), the value verl's advantage is computed from.

Either way the kept groups' advantages are Eq. 2 on the final reward (verl's grpo on rm_scores).
"""

from __future__ import annotations

from typing import Any

SIGNALS = ("resolved", "reward")


def check_signal(name: str) -> str:
    if name not in SIGNALS:
        raise ValueError(f"trainer.v1.sampler.sampler_kwargs.drop_signal={name!r}: one of {', '.join(SIGNALS)}")
    return name


def fields(signal: str) -> list[str]:
    """The TransferQueue fields the signal reads (the reward is always read: it is logged)."""
    return ["rm_scores", "extra_fields"] if signal == "resolved" else ["rm_scores"]


def trajectory_signal(signal: str, reward: float, extra_fields: Any) -> float:
    """The value compared within a group: the final reward, or `resolved` from the agent loop's
    reward_extra_info (verl_swe/agent/verl_loop.py puts it there for every trajectory)."""
    if signal == "reward":
        return reward
    extra = getattr(extra_fields, "data", extra_fields)
    info = extra.get("reward_extra_info", {}) if isinstance(extra, dict) else {}
    if "resolved" not in info:
        raise RuntimeError("drop_signal=resolved needs reward_extra_info.resolved from the agent loop (SWEAgentLoop "
                           "sets it); another agent loop needs sampler_kwargs.drop_signal=reward")
    return float(info["resolved"])
