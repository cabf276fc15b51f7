"""Best-score leaderboards."""

from .board import Entry, Leaderboard
from .render import render

__all__ = ["Entry", "Leaderboard", "render"]
