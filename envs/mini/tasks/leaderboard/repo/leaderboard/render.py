"""Plain-text rendering of a leaderboard."""

from __future__ import annotations

from .board import Leaderboard


def render(board: Leaderboard, limit: int = 10) -> str:
    entries = board.top(limit)
    if not entries:
        return "(no scores yet)"
    width = max(len(e.player) for e in entries)
    lines = [f"{pos:>2}. {e.player:<{width}}  {e.score:>6}" for pos, e in enumerate(entries, start=1)]
    return "\n".join(lines)
