"""The paper's pieces registered in verl (imported in every worker by `verl_swe.plugin`).

- policy loss `swe_dapo`: P1 Eq. 8 (decoupled clip, no dual clip), token-mean over the action tokens of
  the whole mini-batch on every rank (verl's engine supplies `global_batch_info`).
Advantages need no registration: verl's `grpo` is P1 Eq. 2 (tests/algo check it against ours). The negative
control `grpo_sign_flipped` (verl_swe/algo/controls.py) is registered for learning runs.
"""

from __future__ import annotations

from verl.trainer.ppo.core_algos import register_policy_loss

import verl_swe.algo.controls  # noqa: F401  (registers the negative-control estimator)
from verl_swe.algo.loss import dapo_token_loss


@register_policy_loss("swe_dapo")
def swe_dapo_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode: str = "token-mean",
                         config=None, rollout_is_weights=None):
    if loss_agg_mode != "token-mean":
        raise ValueError(f"policy_loss.loss_mode=swe_dapo is P1 Eq. 8, a token mean; got loss_agg_mode={loss_agg_mode}")
    info = dict(getattr(config, "global_batch_info", None) or {})
    eps_low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    eps_high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    if rollout_is_weights is not None:  # verl's rollout correction (TIS); w >= 0, so min(wx, wy) = w min(x, y)
        advantages = advantages * rollout_is_weights
    return dapo_token_loss(old_log_prob, log_prob, advantages, response_mask, eps_low, eps_high,
                           batch_num_tokens=info.get("batch_num_tokens"), dp_size=info.get("dp_size") or 1)
