import pytest

from envfile import ParseError, parse, parse_line


def test_simple_assignments():
    assert parse("A=1\nB = two\n") == {"A": "1", "B": "two"}


def test_blank_lines_and_comments_are_skipped():
    assert parse("\n# comment\n   \nA=1\n") == {"A": "1"}
    assert parse_line("   # indented comment") is None


def test_export_prefix():
    assert parse_line("export PATH_EXTRA=/opt/bin") == ("PATH_EXTRA", "/opt/bin")


def test_quoted_values():
    text = 'A="hello world"\n' "B='no \\n escapes'\n" 'C="two\\nlines"\n'
    assert parse(text) == {"A": "hello world", "B": "no \\n escapes", "C": "two\nlines"}


def test_inline_comment_after_unquoted_value():
    assert parse("DEBUG=1  # local only\nHASH='a #b'\n") == {"DEBUG": "1", "HASH": "a #b"}


def test_later_assignment_wins():
    assert parse("A=1\nA=2\n") == {"A": "2"}


def test_invalid_key():
    with pytest.raises(ParseError, match="line 2: invalid key"):
        parse("OK=1\n1BAD=2\n")


def test_missing_equals_sign():
    with pytest.raises(ParseError, match="line 1"):
        parse("JUSTAWORD\n")
