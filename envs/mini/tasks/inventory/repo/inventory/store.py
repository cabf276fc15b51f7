"""Stock levels per SKU."""

from __future__ import annotations

from .item import Item


class OutOfStock(Exception):
    pass


class Inventory:
    def __init__(self) -> None:
        self._items: dict[str, Item] = {}
        self._quantities: dict[str, int] = {}

    def add(self, item: Item, qty: int = 1) -> None:
        if qty < 1:
            raise ValueError("qty must be at least 1")
        self._items[item.sku] = item
        self._quantities[item.sku] = self._quantities.get(item.sku, 0) + qty

    def remove(self, sku: str, qty: int = 1) -> None:
        available = self._quantities.get(sku, 0)
        if qty > available:
            raise OutOfStock(f"{sku}: wanted {qty}, only {available} in stock")
        self._quantities[sku] = available - qty

    def quantity(self, sku: str) -> int:
        return self._quantities.get(sku, 0)

    def tagged(self, tag: str) -> list[Item]:
        return [item for item in self._items.values() if item.has_tag(tag)]

    def total_value_cents(self) -> int:
        return sum(item.price_cents * self._quantities[sku] for sku, item in self._items.items())

    def low_stock(self, threshold: int = 3) -> list[str]:
        """SKUs with fewer than `threshold` units left, sorted."""
        return sorted(sku for sku, qty in self._quantities.items() if qty < threshold)
