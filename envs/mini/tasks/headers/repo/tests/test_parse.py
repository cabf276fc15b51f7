import pytest

from headers import HeaderParseError, parse_headers


def test_parse_basic_block():
    h = parse_headers("Content-Type: text/html\r\nX-Trace: 1\r\n\r\nbody")
    assert h.to_lines() == ["Content-Type: text/html", "X-Trace: 1"]


def test_continuation_lines():
    h = parse_headers("x-note: first\n  second\n")
    assert h["X-Note"] == "first second"


def test_repeated_lowercase_headers_are_combined():
    h = parse_headers("x-forwarded-for: 10.0.0.1\nx-forwarded-for: 10.0.0.2\n")
    assert h["x-forwarded-for"] == "10.0.0.1, 10.0.0.2"


@pytest.mark.parametrize(
    "raw",
    ["no colon here\n", " leading: space\n", "Bad Name : x\n", ": empty\n"],
    ids=["no-colon", "leading-space", "space-before-colon", "empty-name"],
)
def test_malformed_lines(raw):
    with pytest.raises(HeaderParseError):
        parse_headers(raw)
