"""Totals over date ranges. All ranges include both the start and the end day."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from typing import Iterable

from .log import Entry


def entries_between(entries: Iterable[Entry], start: date, end: date) -> list[Entry]:
    """Entries dated from `start` to `end`, inclusive."""
    if end < start:
        raise ValueError(f"end {end} is before start {start}")
    return [e for e in entries if start <= e.day < end]


def minutes_by_project(entries: Iterable[Entry], start: date, end: date) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for entry in entries_between(entries, start, end):
        totals[entry.project] += entry.minutes
    return dict(sorted(totals.items()))


def week_bounds(day: date) -> tuple[date, date]:
    """Monday and Sunday of the ISO week containing `day`."""
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def weekly_minutes(entries: Iterable[Entry], day: date) -> int:
    return sum(e.minutes for e in entries_between(entries, *week_bounds(day)))
