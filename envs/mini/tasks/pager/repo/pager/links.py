"""Render a compact list of page links such as ``1 ... 4 5 [6] 7 8 ... 20``."""

from __future__ import annotations

from .paginator import Page


def page_links(page: Page, window: int = 2) -> list[str]:
    """Links around `page`: the first and last page are always shown, gaps become "..."."""
    last = page.paginator.num_pages
    lo = max(1, page.number - window)
    hi = min(last, page.number + window)
    links: list[str] = []
    if lo > 1:
        links.append("1")
        if lo > 2:
            links.append("...")
    for n in range(lo, hi + 1):
        links.append(f"[{n}]" if n == page.number else str(n))
    if hi < last:
        if hi < last - 1:
            links.append("...")
        links.append(str(last))
    return links
