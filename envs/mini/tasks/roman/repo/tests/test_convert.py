import pytest

from roman import from_roman, to_roman


@pytest.mark.parametrize(
    "number,numeral",
    [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"), (90, "XC"),
     (400, "CD"), (1994, "MCMXCIV"), (2024, "MMXXIV"), (3999, "MMMCMXCIX")],
)
def test_round_trip(number, numeral):
    assert to_roman(number) == numeral
    assert from_roman(numeral) == number


def test_from_roman_is_case_insensitive():
    assert from_roman(" mcmxciv ") == 1994


@pytest.mark.parametrize("text", ["IM", "IIII", "VX", "MMMM", "ABC"])
def test_from_roman_rejects_invalid(text):
    with pytest.raises(ValueError):
        from_roman(text)


def test_to_roman_rejects_too_large():
    with pytest.raises(ValueError):
        to_roman(4000)


def test_to_roman_rejects_non_integers():
    with pytest.raises(TypeError):
        to_roman(3.0)
