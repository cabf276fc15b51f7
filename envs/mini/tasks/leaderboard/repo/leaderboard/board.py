"""Track each player's best score and rank the players."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    player: str
    score: int
    at: int  # when the score was submitted


class Leaderboard:
    def __init__(self) -> None:
        self._best: dict[str, Entry] = {}

    def submit(self, player: str, score: int, at: int) -> bool:
        """Record a score; returns True if it is the player's new best.

        Matching a previous best does not count: the earlier submission is kept.
        """
        current = self._best.get(player)
        if current is not None and score <= current.score:
            return False
        self._best[player] = Entry(player, score, at)
        return True

    def ranked(self) -> list[Entry]:
        """Best entries, highest score first; ties go to whoever reached the score first."""
        return sorted(self._best.values(), key=lambda e: (e.score, e.at), reverse=True)

    def top(self, n: int) -> list[Entry]:
        return self.ranked()[:n]

    def rank_of(self, player: str) -> int | None:
        """1-based position of `player`, or None if they have no score."""
        for position, entry in enumerate(self.ranked(), start=1):
            if entry.player == player:
                return position
        return None

    def __len__(self) -> int:
        return len(self._best)
