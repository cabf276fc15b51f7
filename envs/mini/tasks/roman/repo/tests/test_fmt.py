import pytest

from roman import copyright_years, numbered


def test_copyright_single_year():
    assert copyright_years(2024) == "MMXXIV"
    assert copyright_years(2024, 2024) == "MMXXIV"


def test_copyright_range():
    assert copyright_years(2019, 2024) == "MMXIX-MMXXIV"


def test_copyright_reversed_range():
    with pytest.raises(ValueError):
        copyright_years(2024, 2019)


def test_numbered():
    assert numbered(["a", "b", "c", "d"]) == ["I. a", "II. b", "III. c", "IV. d"]
    assert numbered(["x"], lower=True) == ["i. x"]
