"""Check a version against constraints such as ``>=1.2.0, <2.0.0``, ``^1.4.0`` or ``~2.1.0``."""

from __future__ import annotations

import operator

from .version import Version

_OPERATORS = [(">=", operator.ge), ("<=", operator.le), ("==", operator.eq),
              (">", operator.gt), ("<", operator.lt), ("=", operator.eq)]


def _upper_bound(kind: str, base: Version) -> Version:
    """First version that no longer matches ``^base`` or ``~base``."""
    if kind == "^" and base.major > 0:
        return base.bump("major")
    return base.bump("minor")


def _matches(version: Version, clause: str) -> bool:
    if clause[0] in "^~":
        base = Version.parse(clause[1:])
        return base <= version <= _upper_bound(clause[0], base)
    for symbol, compare in _OPERATORS:
        if clause.startswith(symbol):
            return compare(version, Version.parse(clause[len(symbol):]))
    return version == Version.parse(clause)


def satisfies(version: str | Version, constraint: str) -> bool:
    """True if `version` matches every comma-separated clause of `constraint`."""
    if not isinstance(version, Version):
        version = Version.parse(version)
    clauses = [c.strip() for c in constraint.split(",") if c.strip()]
    if not clauses:
        raise ValueError("empty constraint")
    return all(_matches(version, clause) for clause in clauses)
