import pytest

from invoice import format_amount, parse_amount, split_evenly


@pytest.mark.parametrize(
    "text,cents",
    [("12.5", 1250), ("$1,000", 100000), ("-3.05", -305), ("0.99", 99), ("7", 700)],
)
def test_parse_amount(text, cents):
    assert parse_amount(text) == cents


def test_parse_amount_rejects_garbage():
    with pytest.raises(ValueError):
        parse_amount("12.345")


def test_format_amount():
    assert format_amount(123456789) == "$1,234,567.89"
    assert format_amount(-5) == "-$0.05"
    assert format_amount(100, symbol="EUR ") == "EUR 1.00"


def test_split_evenly_exact():
    assert split_evenly(900, 3) == [300, 300, 300]
    assert split_evenly(500, 1) == [500]


def test_split_evenly_needs_a_part():
    with pytest.raises(ValueError):
        split_evenly(100, 0)
