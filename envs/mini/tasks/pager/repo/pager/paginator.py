"""Split a sequence into numbered pages (page numbers start at 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence


class EmptyPage(LookupError):
    """Raised when a page number is out of range."""


@dataclass(frozen=True)
class Page:
    number: int
    items: list[Any]
    paginator: "Paginator"

    @property
    def has_next(self) -> bool:
        return self.number < self.paginator.num_pages

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def start_index(self) -> int:
        """1-based position of the first item on this page (0 when the page is empty)."""
        if not self.items:
            return 0
        return (self.number - 1) * self.paginator.per_page + 1

    @property
    def end_index(self) -> int:
        """1-based position of the last item on this page (0 when the page is empty)."""
        if not self.items:
            return 0
        return self.start_index + len(self.items) - 1


class Paginator:
    def __init__(self, items: Sequence[Any], per_page: int, allow_empty_first_page: bool = True):
        if per_page < 1:
            raise ValueError("per_page must be at least 1")
        self.items = items
        self.per_page = per_page
        self.allow_empty_first_page = allow_empty_first_page

    @property
    def count(self) -> int:
        return len(self.items)

    @property
    def num_pages(self) -> int:
        if self.count == 0:
            return 1 if self.allow_empty_first_page else 0
        return (self.count + self.per_page) // self.per_page

    def validate_number(self, number: int) -> int:
        if number < 1:
            raise EmptyPage(f"page {number} is less than 1")
        if number > self.num_pages:
            raise EmptyPage(f"page {number} does not exist (there are {self.num_pages} pages)")
        return number

    def page(self, number: int) -> Page:
        number = self.validate_number(number)
        start = (number - 1) * self.per_page
        return Page(number, list(self.items[start : start + self.per_page]), self)

    def __iter__(self) -> Iterator[Page]:
        for number in range(1, self.num_pages + 1):
            yield self.page(number)
