import pytest

from semver import satisfies


def test_comparison_operators():
    assert satisfies("1.4.2", ">=1.4.2")
    assert satisfies("1.4.2", ">1.4.1")
    assert not satisfies("1.4.2", "<1.4.2")
    assert satisfies("1.4.2", "<=1.4.2")
    assert satisfies("1.4.2", "==1.4.2") and satisfies("1.4.2", "1.4.2")


def test_combined_clauses():
    assert satisfies("1.4.2", ">=1.2.0, <1.5.0")
    assert not satisfies("1.5.0", ">=1.2.0, <1.5.0")


def test_caret_matches_later_minor_and_patch():
    assert satisfies("1.9.3", "^1.2.0")
    assert satisfies("1.2.0", "^1.2.0")
    assert not satisfies("1.1.9", "^1.2.0")


def test_tilde_matches_later_patch():
    assert satisfies("1.4.7", "~1.4.0")
    assert not satisfies("1.3.9", "~1.4.0")


def test_empty_constraint_is_an_error():
    with pytest.raises(ValueError):
        satisfies("1.0.0", " , ")
