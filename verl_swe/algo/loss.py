"""The policy loss of P1 Eq. 8 (DAPO's token-level loss with decoupled clipping, no KL, no entropy)."""

from __future__ import annotations

import torch


def dapo_token_loss(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                    response_mask: torch.Tensor, eps_low: float, eps_high: float,
                    batch_num_tokens: float | None = None, dp_size: int = 1) -> tuple[torch.Tensor, dict[str, float]]:
    """-J(theta) of P1 Eq. 8 for the tokens held here:

        J = 1 / (sum_i sum_t |a_t^(i)|) * sum_{i,t,k} min(rho A_hat, clip(rho, 1 - eps_low, 1 + eps_high) A_hat)

    The normalizer counts ACTION tokens (response_mask = 1) of the whole mini-batch on every
    data-parallel rank (`batch_num_tokens`, all-reduced by the engine). Each rank's loss is scaled by
    `dp_size` because the gradient all-reduce averages over ranks; micro-batch losses are summed by
    gradient accumulation. Together the step's gradient is that of Eq. 8 on the whole mini-batch.
    No dual clip (Eq. 8 has none), no KL, no entropy term.
    """
    mask = response_mask.to(log_prob.dtype)
    log_ratio = torch.clamp(log_prob - old_log_prob, -20.0, 20.0)  # clamped as verl's vanilla loss clamps it
    ratio = torch.exp(log_ratio)  # rho (P1 Eq. 6)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    objective = torch.minimum(unclipped, clipped)
    n = mask.sum() if batch_num_tokens is None else torch.as_tensor(batch_num_tokens, dtype=mask.dtype)
    loss = -(objective * mask).sum() / n.clamp(min=1) * dp_size
    with torch.no_grad():
        on = response_mask.bool()
        local = on.sum().clamp(min=1)
        # verl's names for verl's quantities (core_algos.compute_policy_loss_vanilla): pg_clipfrac, ppo_kl (of
        # the clamped log-ratio), and pg_clipfrac_lower, the share at the DUAL-clip bound (ratio > clip_ratio_c,
        # A < 0): Eq. 8 has no dual clip, so it is 0, as verl logs it for its losses without one (gspo, sapo).
        # The two sides of the decoupled clip are ours (verl logs no such split), named apart from verl's:
        # pg_clipfrac_high (rho > 1 + eps_high, A > 0) and pg_clipfrac_low (rho < 1 - eps_low, A < 0).
        metrics = {
            "actor/pg_clipfrac": float(((clipped < unclipped) & on).sum() / local),
            "actor/ppo_kl": float((-log_ratio * mask).sum() / local),
            "actor/pg_clipfrac_lower": 0.0,
            "actor/pg_clipfrac_high": float(((ratio > 1 + eps_high) & (advantages > 0) & on).sum() / local),
            "actor/pg_clipfrac_low": float(((ratio < 1 - eps_low) & (advantages < 0) & on).sum() / local),
        }
    return loss, metrics
