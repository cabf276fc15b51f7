"""Track items and stock levels."""

from .item import Item
from .store import Inventory, OutOfStock

__all__ = ["Inventory", "Item", "OutOfStock"]
