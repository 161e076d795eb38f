"""Tables for a terminal or a pipe that never cut a cell: every column as wide as its widest cell,
no wrapping, and where the table is wider than the console the least useful columns are left out
whole (named under the table; ``--json`` has them all), the id and the key figures last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BORDER = 3
"""What each column adds to its content in rich's default box: a space either side and a rule."""


@dataclass(frozen=True)
class Column:
    header: str
    keep: int
    """Higher stays longer: the columns with the lowest ``keep`` are left out first."""
    right: bool = False


def fit(columns: list[Column], rows: list[list[str]], width: int) -> list[int]:
    """Indices of the columns that fit in ``width`` whole, in their order."""
    need = [max([len(c.header)] + [len(r[i]) for r in rows]) + BORDER for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    for i in sorted(shown, key=lambda i: columns[i].keep):
        if sum(need[j] for j in shown) + 1 <= width or len(shown) == 1:
            break
        shown.remove(i)
    return shown


def render(title: Any, columns: list[Column], rows: list[list[str]], width: int) -> tuple[Any, list[str]]:
    """A rich Table of the columns that fit, and the headers of those left out."""
    from rich.table import Table
    from rich.text import Text

    shown = fit(columns, rows, width)
    t = Table(title=title)
    for i in shown:
        t.add_column(columns[i].header, no_wrap=True, justify="right" if columns[i].right else "left")
    for r in rows:
        t.add_row(*(Text(r[i]) for i in shown))
    return t, [c.header for i, c in enumerate(columns) if i not in shown]


def short_ms(ms: float | None) -> str:
    """A time in milliseconds, four significant figures and never an exponent: 0.2187, 12.35, 1234."""
    if ms is None:
        return "-"
    if ms >= 1000:
        return f"{ms:.0f}"
    return f"{ms:.4g}" if ms >= 0.001 else f"{ms:.6f}".rstrip("0")
