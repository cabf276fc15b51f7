"""Catalogue items."""

from __future__ import annotations


class Item:
    def __init__(self, sku: str, name: str, price_cents: int, tags: list[str] = []):
        if price_cents < 0:
            raise ValueError("price_cents must not be negative")
        self.sku = sku
        self.name = name
        self.price_cents = price_cents
        self.tags = tags

    def add_tag(self, tag: str) -> None:
        """Add a tag (normalized to lower case); duplicates are ignored."""
        tag = tag.strip().lower()
        if tag and tag not in self.tags:
            self.tags.append(tag)

    def has_tag(self, tag: str) -> bool:
        return tag.strip().lower() in self.tags

    def __repr__(self) -> str:
        return f"Item({self.sku!r}, {self.name!r})"
