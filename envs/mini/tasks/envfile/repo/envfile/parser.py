"""Parse ``.env`` style text: ``KEY=value`` lines, comments and quoted values."""

from __future__ import annotations

import re

_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ParseError(ValueError):
    def __init__(self, lineno: int, message: str):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        # Double quotes understand \n escapes, single quotes are taken literally.
        return inner.replace("\\n", "\n") if value[0] == '"' else inner
    if " #" in value:  # inline comment after an unquoted value
        value = value.split(" #", 1)[0]
    return value.strip()


def parse_line(line: str, lineno: int = 1) -> tuple[str, str] | None:
    """Return ``(key, value)`` for an assignment, None for blank and comment lines."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if text.startswith("export "):
        text = text[len("export "):].lstrip()
    if "=" not in text:
        raise ParseError(lineno, f"expected KEY=value, got {text!r}")
    key, value = text.rsplit("=", 1)
    key = key.strip()
    if not _KEY_RE.match(key):
        raise ParseError(lineno, f"invalid key {key!r}")
    return key, _unquote(value.strip())


def parse(text: str) -> dict[str, str]:
    """Parse a whole file; later assignments win."""
    result: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        pair = parse_line(line, lineno)
        if pair is not None:
            result[pair[0]] = pair[1]
    return result
