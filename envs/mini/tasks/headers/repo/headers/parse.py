"""Parse a raw HTTP header block."""

from __future__ import annotations

from .collection import Headers


class HeaderParseError(ValueError):
    pass


def parse_headers(raw: str) -> Headers:
    """Parse ``Name: value`` lines (CRLF or LF); an empty line ends the block.

    Lines starting with whitespace continue the previous header. A header that occurs more
    than once is combined into a single comma-separated value.
    """
    headers = Headers()
    last = None
    for line in raw.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            break
        if line[0] in " \t":
            if last is None:
                raise HeaderParseError(f"continuation line without a header: {line!r}")
            headers[last] = f"{headers[last]} {line.strip()}"
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or name != name.rstrip():
            raise HeaderParseError(f"malformed header line: {line!r}")
        if name in headers:
            headers[name] = f"{headers[name]}, {value.strip()}"
        else:
            headers[name] = value.strip()
        last = name
    return headers
