"""Parse and load .env files."""

from .loader import apply, interpolate, load
from .parser import ParseError, parse, parse_line

__all__ = ["ParseError", "apply", "interpolate", "load", "parse", "parse_line"]
