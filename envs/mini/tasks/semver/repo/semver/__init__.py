"""Semantic version parsing, ordering and constraint matching."""

from .ranges import satisfies
from .version import Version

__all__ = ["Version", "satisfies"]
