"""Case-insensitive HTTP headers."""

from .collection import Headers
from .parse import HeaderParseError, parse_headers

__all__ = ["HeaderParseError", "Headers", "parse_headers"]
