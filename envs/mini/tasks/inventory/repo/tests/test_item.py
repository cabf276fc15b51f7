import pytest

from inventory import Item


def test_item_fields():
    item = Item("A-100", "Anvil", 4999)
    assert (item.sku, item.name, item.price_cents) == ("A-100", "Anvil", 4999)
    assert repr(item) == "Item('A-100', 'Anvil')"


def test_negative_price_rejected():
    with pytest.raises(ValueError):
        Item("A-100", "Anvil", -1)


def test_new_item_has_no_tags():
    assert Item("B-200", "Bucket", 250).tags == []


def test_add_tag_normalizes_and_deduplicates():
    item = Item("C-300", "Crate", 1200, tags=["wood"])
    item.add_tag(" Fragile ")
    item.add_tag("fragile")
    item.add_tag("   ")
    assert item.tags == ["wood", "fragile"]
    assert item.has_tag("FRAGILE")
