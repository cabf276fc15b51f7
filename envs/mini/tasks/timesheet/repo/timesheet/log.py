"""Parse log lines of the form ``YYYY-MM-DD project 1h30m``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?$")


@dataclass(frozen=True)
class Entry:
    day: date
    project: str
    minutes: int


def parse_duration(text: str) -> int:
    """``"1h30m" -> 90``, ``"45m" -> 45``, ``"2h" -> 120``."""
    match = _DURATION_RE.match(text.strip())
    if not match or not any(match.groups()):
        raise ValueError(f"invalid duration: {text!r}")
    hours, minutes = (int(g or 0) for g in match.groups())
    return hours * 60 + minutes


def parse_log(text: str) -> list[Entry]:
    entries = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"line {lineno}: expected 'DATE PROJECT DURATION', got {line!r}")
        day, project, duration = parts
        entries.append(Entry(date.fromisoformat(day), project, parse_duration(duration)))
    return entries
