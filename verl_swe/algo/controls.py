"""Negative controls for learning runs: estimators that must NOT improve the agent.

A learning curve proves little on its own: a broken sign, mask or group between the reward and the update
can still show noise that looks like progress. Run the same harness with a control (bench/learning.py) and
the treatment must beat it. Select with `algorithm.adv_estimator=grpo_sign_flipped`.
"""

from __future__ import annotations

from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est


@register_adv_est("grpo_sign_flipped")
def grpo_sign_flipped(token_level_rewards, response_mask, index, config=None, **kwargs):
    """-A_hat of P1 Eq. 2 (verl's GRPO, group mean and std): every update pushes towards the group's worse
    rollouts, so resolve rates should fall, or at best stay, where the treatment's rise."""
    norm = config.get("norm_adv_by_std_in_grpo", True) if config is not None else True
    advantages, returns = compute_grpo_outcome_advantage(token_level_rewards, response_mask, index,
                                                         norm_adv_by_std_in_grpo=norm)
    return -advantages, -returns
