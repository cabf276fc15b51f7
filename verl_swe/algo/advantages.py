"""Group-normalized trajectory advantages (P1 Eq. 2)."""

from __future__ import annotations

from typing import Sequence

import torch


def group_advantages(rewards: torch.Tensor, group_ids: Sequence, eps: float = 1e-6) -> torch.Tensor:
    """A_hat(i) = (R(tau_i) - mean_group(R)) / (sigma_group(R) + delta)   (P1 Eq. 2)

    One scalar per trajectory; the group is every rollout of the same task (G = 10 in the paper).
    sigma is the sample standard deviation (torch.std, as verl's GRPO); a group of one gets 0.
    `delta` (eps) is a gap in the paper.
    """
    rewards = rewards.float()
    out = torch.zeros_like(rewards)
    index: dict = {}
    for i, g in enumerate(group_ids):
        index.setdefault(g, []).append(i)
    for members in index.values():
        idx = torch.tensor(members)
        r = rewards[idx]
        if len(members) > 1:
            out[idx] = (r - r.mean()) / (r.std() + eps)
    return out


def broadcast_to_tokens(advantages: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Every action token of a trajectory gets its trajectory's advantage; other tokens 0."""
    return advantages.unsqueeze(-1) * response_mask.to(advantages.dtype)


def zero_advantage_groups(rewards: torch.Tensor, group_ids: Sequence, tol: float = 1e-8) -> torch.Tensor:
    """Which trajectories belong to a group whose rewards are all equal (so every A_hat is 0).

    P1 Sec. 4.3: "samples with zero advantage are dropped". With the turn penalty (Eq. 3-4) rewards
    are not only 0/1, so a group is dropped only when all its rewards are equal, not merely all unsolved.
    """
    rewards = rewards.float()
    drop = torch.zeros(len(rewards), dtype=torch.bool)
    index: dict = {}
    for i, g in enumerate(group_ids):
        index.setdefault(g, []).append(i)
    for members in index.values():
        r = rewards[torch.tensor(members)]
        if (r.max() - r.min()).abs() <= tol:
            drop[torch.tensor(members)] = True
    return drop
