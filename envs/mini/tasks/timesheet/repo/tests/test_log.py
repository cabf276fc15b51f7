from datetime import date

import pytest

from timesheet import Entry, parse_duration, parse_log


@pytest.mark.parametrize("text,minutes", [("1h30m", 90), ("45m", 45), ("2h", 120), ("0h5m", 5)])
def test_parse_duration(text, minutes):
    assert parse_duration(text) == minutes


@pytest.mark.parametrize("text", ["m", "h", "90", "1m30h", "1.5h"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_parse_log_skips_comments_and_blanks():
    text = "# March\n2024-03-04 acme 1h30m\n\n2024-03-05 internal 45m  # standup\n"
    assert parse_log(text) == [
        Entry(date(2024, 3, 4), "acme", 90),
        Entry(date(2024, 3, 5), "internal", 45),
    ]


def test_parse_log_reports_bad_lines():
    with pytest.raises(ValueError, match="line 2"):
        parse_log("2024-03-04 acme 1h\n2024-03-05 acme\n")
