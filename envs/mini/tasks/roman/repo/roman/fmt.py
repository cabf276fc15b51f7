"""Formatting helpers built on `to_roman`."""

from __future__ import annotations

from typing import Iterable

from .convert import to_roman


def copyright_years(start: int, end: int | None = None) -> str:
    """``copyright_years(2019, 2024) == "MMXIX-MMXXIV"``; a single year when end is missing or equal."""
    if end is None or end == start:
        return to_roman(start)
    if end < start:
        raise ValueError(f"end year {end} is before start year {start}")
    return f"{to_roman(start)}-{to_roman(end)}"


def numbered(items: Iterable[str], lower: bool = False) -> list[str]:
    """Prefix each item with a Roman list number: ``["I. a", "II. b", ...]``."""
    lines = []
    for index, item in enumerate(items, start=1):
        label = to_roman(index)
        lines.append(f"{label.lower() if lower else label}. {item}")
    return lines
