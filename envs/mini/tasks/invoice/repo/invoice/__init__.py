"""Invoices with integer-cent amounts."""

from .invoice import Invoice, Line
from .money import format_amount, parse_amount, split_evenly

__all__ = ["Invoice", "Line", "format_amount", "parse_amount", "split_evenly"]
