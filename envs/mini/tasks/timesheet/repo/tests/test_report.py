from datetime import date

import pytest

from timesheet import entries_between, minutes_by_project, parse_log, week_bounds, weekly_minutes

LOG = """
2024-03-01 acme 3h
2024-03-04 acme 1h30m
2024-03-04 internal 45m
2024-03-06 acme 2h
2024-03-12 acme 1h
"""


def test_entries_between_middle_of_range():
    entries = parse_log(LOG)
    assert [e.day.day for e in entries_between(entries, date(2024, 3, 2), date(2024, 3, 8))] == [4, 4, 6]


def test_entries_between_rejects_reversed_range():
    with pytest.raises(ValueError):
        entries_between([], date(2024, 3, 8), date(2024, 3, 2))


def test_minutes_by_project():
    totals = minutes_by_project(parse_log(LOG), date(2024, 3, 2), date(2024, 3, 9))
    assert totals == {"acme": 210, "internal": 45}


def test_week_bounds():
    assert week_bounds(date(2024, 3, 6)) == (date(2024, 3, 4), date(2024, 3, 10))
    assert week_bounds(date(2024, 3, 4)) == (date(2024, 3, 4), date(2024, 3, 10))


def test_weekly_minutes():
    assert weekly_minutes(parse_log(LOG), date(2024, 3, 7)) == 255
