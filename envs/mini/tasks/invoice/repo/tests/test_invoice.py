from invoice import Invoice


def make_invoice():
    inv = Invoice("2024-017", tax_bp=800)
    inv.add("Consulting", unit_cents=12500, quantity=4)
    inv.add("Travel", unit_cents=4000)
    return inv


def test_totals():
    inv = make_invoice()
    assert inv.subtotal_cents == 54000
    assert inv.tax_cents == 4320
    assert inv.total_cents == 58320


def test_tax_rounds_half_up():
    inv = Invoice("r", tax_bp=500)
    inv.add("Widget", unit_cents=10)  # 5% of 10 cents = 0.5 cents
    assert inv.tax_cents == 1


def test_installments_of_an_even_total():
    assert make_invoice().installments(4) == [14580] * 4


def test_render():
    assert make_invoice().render().splitlines() == [
        "Invoice 2024-017",
        "  Consulting x4: $500.00",
        "  Travel x1: $40.00",
        "  Tax: $43.20",
        "  Total: $583.20",
    ]
