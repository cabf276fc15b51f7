"""Tiny pagination helpers for lists and query results."""

from .links import page_links
from .paginator import EmptyPage, Page, Paginator

__all__ = ["EmptyPage", "Page", "Paginator", "page_links"]
