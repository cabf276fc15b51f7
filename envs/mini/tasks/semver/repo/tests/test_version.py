import pytest

from semver import Version


def test_parse_and_str_round_trip():
    v = Version.parse("v1.12.3-beta.2")
    assert (v.major, v.minor, v.patch, v.prerelease) == (1, 12, 3, "beta.2")
    assert str(v) == "1.12.3-beta.2"


@pytest.mark.parametrize("text", ["1.2", "1.2.3.4", "one.two.three", ""])
def test_invalid_versions(text):
    with pytest.raises(ValueError):
        Version.parse(text)


def test_numeric_ordering():
    versions = [Version.parse(t) for t in ["1.10.0", "1.2.0", "1.9.9", "0.9.0"]]
    assert [str(v) for v in sorted(versions)] == ["0.9.0", "1.2.0", "1.9.9", "1.10.0"]


def test_prerelease_sorts_before_release():
    assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0-alpha.1") < Version.parse("1.0.0-beta")
    assert Version.parse("1.0.0-rc.2") < Version.parse("1.0.0-rc.10") < Version.parse("1.0.0")


def test_bump():
    v = Version.parse("1.4.2-rc.1")
    assert [str(v.bump(p)) for p in ("major", "minor", "patch")] == ["2.0.0", "1.5.0", "1.4.3"]
