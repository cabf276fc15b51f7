"""Time-tracking logs and reports."""

from .log import Entry, parse_duration, parse_log
from .report import entries_between, minutes_by_project, week_bounds, weekly_minutes

__all__ = ["Entry", "entries_between", "minutes_by_project", "parse_duration", "parse_log",
           "week_bounds", "weekly_minutes"]
