"""The paper's step-count length penalty (P1 Eq. 3-4)."""

from __future__ import annotations


def turn_penalty(num_turns: int, max_turns: int, threshold: int = 10) -> float:
    """R_length(tau) = 0 if |tau| < L_thr, else (L_thr - |tau|) / (T_max - L_thr)   (P1 Eq. 4).

    |tau| counts actions (assistant turns). With L_thr = 10 it reaches -1 at T_max (40 or 80 turns).
    """
    if max_turns <= threshold:
        raise ValueError(f"max_turns ({max_turns}) must exceed the penalty threshold ({threshold})")
    if num_turns < threshold:
        return 0.0
    return (threshold - num_turns) / (max_turns - threshold)


def final_reward(resolved: bool, num_turns: int, max_turns: int, threshold: int = 10) -> float:
    """R_final = R + R_length (P1 Eq. 3), for successes and failures alike."""
    return float(resolved) + turn_penalty(num_turns, max_turns, threshold)
