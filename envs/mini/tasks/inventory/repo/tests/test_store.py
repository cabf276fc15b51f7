import pytest

from inventory import Inventory, Item, OutOfStock


@pytest.fixture
def inv():
    inv = Inventory()
    inv.add(Item("A-100", "Anvil", 4999, tags=["heavy"]), qty=3)
    inv.add(Item("B-200", "Bucket", 250, tags=["garden"]), qty=10)
    return inv


def test_quantities_accumulate(inv):
    inv.add(Item("B-200", "Bucket", 250), qty=5)
    assert inv.quantity("B-200") == 15
    assert inv.quantity("Z-999") == 0


def test_remove_and_out_of_stock(inv):
    inv.remove("A-100", 2)
    assert inv.quantity("A-100") == 1
    with pytest.raises(OutOfStock):
        inv.remove("A-100", 2)


def test_total_value(inv):
    assert inv.total_value_cents() == 3 * 4999 + 10 * 250


def test_low_stock(inv):
    inv.remove("B-200", 9)
    assert inv.low_stock() == ["B-200"]
    assert inv.low_stock(threshold=4) == ["A-100", "B-200"]


def test_tagged(inv):
    assert [item.sku for item in inv.tagged("HEAVY")] == ["A-100"]
