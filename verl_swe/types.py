"""Typed values shared across verl_swe (no torch, ray or verl imports here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecResult:
    """What one command in a sandbox produced.

    `output` is stdout and stderr interleaved, decoded as UTF-8 with replacement; when `truncated`,
    its head and tail are kept and the cut is said in the text.
    """

    exit_code: int
    output: str
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
