"""Overlong trajectories. Default: nothing (P1 Sec. 5.2: masking looping trajectories removes the
negative signal and looping grows; the turn penalty controls length). Two options for comparison."""

from __future__ import annotations

import torch


def mask_truncated(response_mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """DeepSWE-style overlong filtering: trajectories cut by the context or the turn cap train on nothing."""
    return response_mask * (~truncated.bool()).unsqueeze(-1).to(response_mask.dtype)


def soft_overlong_penalty(lengths: torch.Tensor, max_len: int, cache_len: int) -> torch.Tensor:
    """DAPO Eq. 13 (P2 Sec. 3.4), on response tokens:

        0                                    if |y| <= L_max - L_cache
        ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
        -1                                   if |y| > L_max
    """
    if not 0 < cache_len <= max_len:
        raise ValueError(f"overlong cache_len ({cache_len}) must be in (0, max_len={max_len}]")
    expected = max_len - cache_len
    penalty = (expected - lengths.float()) / cache_len
    return torch.clamp(penalty, min=-1.0, max=0.0)
