"""Invoice lines, totals and installment plans."""

from __future__ import annotations

from dataclasses import dataclass, field

from .money import format_amount, split_evenly


@dataclass
class Line:
    description: str
    unit_cents: int
    quantity: int = 1

    @property
    def total_cents(self) -> int:
        return self.unit_cents * self.quantity


@dataclass
class Invoice:
    number: str
    tax_bp: int = 0  # tax rate in basis points: 800 == 8%
    lines: list[Line] = field(default_factory=list)

    def add(self, description: str, unit_cents: int, quantity: int = 1) -> Line:
        line = Line(description, unit_cents, quantity)
        self.lines.append(line)
        return line

    @property
    def subtotal_cents(self) -> int:
        return sum(line.total_cents for line in self.lines)

    @property
    def tax_cents(self) -> int:
        # Round half up to the cent.
        return (self.subtotal_cents * self.tax_bp + 5000) // 10000

    @property
    def total_cents(self) -> int:
        return self.subtotal_cents + self.tax_cents

    def installments(self, count: int) -> list[int]:
        return split_evenly(self.total_cents, count)

    def render(self) -> str:
        rows = [f"Invoice {self.number}"]
        rows += [f"  {l.description} x{l.quantity}: {format_amount(l.total_cents)}" for l in self.lines]
        rows.append(f"  Tax: {format_amount(self.tax_cents)}")
        rows.append(f"  Total: {format_amount(self.total_cents)}")
        return "\n".join(rows)
