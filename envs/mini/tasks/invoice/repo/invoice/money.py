"""Money helpers. Amounts are integers in cents so that sums are exact."""

from __future__ import annotations

import re

_AMOUNT_RE = re.compile(r"^(-)?\$?(\d+)(?:\.(\d{1,2}))?$")


def parse_amount(text: str) -> int:
    """``"12.5" -> 1250``, ``"$1,000" -> 100000``, ``"-3.05" -> -305``."""
    match = _AMOUNT_RE.match(text.strip().replace(",", ""))
    if not match:
        raise ValueError(f"invalid amount: {text!r}")
    sign, whole, frac = match.groups()
    cents = int(whole) * 100 + int((frac or "0").ljust(2, "0"))
    return -cents if sign else cents


def format_amount(cents: int, symbol: str = "$") -> str:
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{symbol}{whole:,}.{frac:02d}"


def split_evenly(cents: int, parts: int) -> list[int]:
    """Split `cents` into `parts` shares that add up to `cents`.

    Shares differ by at most one cent; the earlier shares carry the extra cents.
    """
    if parts < 1:
        raise ValueError("parts must be at least 1")
    share = cents // parts
    return [share] * parts
