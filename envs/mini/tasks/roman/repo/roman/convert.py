"""Convert between integers and Roman numerals (1..3999)."""

from __future__ import annotations

_NUMERALS = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]
MAX_VALUE = 3999


def to_roman(number: int) -> str:
    """Return the Roman numeral for `number`, which must be in 1..3999."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"expected an int, got {type(number).__name__}")
    if number > MAX_VALUE:
        raise ValueError(f"{number} is out of range (1..{MAX_VALUE})")
    parts = []
    for value, numeral in _NUMERALS:
        count, number = divmod(number, value)
        parts.append(numeral * count)
    return "".join(parts)


def from_roman(text: str) -> int:
    """Parse a Roman numeral (case-insensitive); only canonical forms are accepted."""
    numeral = text.strip().upper()
    if not numeral:
        raise ValueError("empty Roman numeral")
    total, pos = 0, 0
    for value, symbol in _NUMERALS:
        while numeral.startswith(symbol, pos):
            total += value
            pos += len(symbol)
    if pos != len(numeral) or total > MAX_VALUE or to_roman(total) != numeral:
        raise ValueError(f"invalid Roman numeral: {text!r}")
    return total
