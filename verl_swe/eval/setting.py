"""What produced an evaluation's numbers: the decoding and the context each episode ran with, read from the
trajectories themselves (`metadata.sampling` / `metadata.limits`, recorded by the agent runner), so a report
says what its episodes actually used, and a run directory that mixes settings is named as such."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable

from verl_swe.types import Trajectory

_NOT_DECODING = ("max_tokens", "stop_token_ids")  # per-turn budget and end tokens: the limits', not the decoding's


def episode_setting(traj: Trajectory) -> dict[str, Any]:
    sampling = traj.metadata.get("sampling") or {}
    limits = traj.metadata.get("limits") or {}
    return {"decoding": {k: v for k, v in sampling.items() if k not in _NOT_DECODING},
            "context_tokens": limits.get("context_tokens"), "max_turns": limits.get("max_turns"),
            "max_new_tokens": limits.get("max_new_tokens")}


def run_settings(trajectories: Iterable[Trajectory]) -> list[tuple[dict[str, Any], int]]:
    """The distinct settings of the episodes, most common first, with how many episodes ran each."""
    counts = Counter(json.dumps(episode_setting(t), sort_keys=True) for t in trajectories)
    return [(json.loads(k), n) for k, n in counts.most_common()]


def requested_setting(decoding_values: dict[str, Any], context_tokens: int, max_turns: int,
                      max_new_tokens: int) -> dict[str, Any]:
    """The setting a run asks for, in `episode_setting`'s shape."""
    return {"decoding": dict(decoding_values), "context_tokens": context_tokens, "max_turns": max_turns,
            "max_new_tokens": max_new_tokens}


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
