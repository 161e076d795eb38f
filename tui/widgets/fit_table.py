"""Tables that never cut the number: one layout for every table of the cockpit (History, the tune's
candidates, Fleet, the checks).

Each column says how it may give way when the table is wider than its room. A *key* column (the
id, the median, SOL %) is never cut and never hidden; a *label* column (knobs, kernel, a reason)
is cut with an ellipsis down to its ``min_width``; any other column is hidden whole, lowest value
first (``hide`` order). Low-value columns (``hide`` at least ``LOW_VALUE``) go first, then labels
are cut, then the rest hide, so at 80 columns a number is never touched. Columns
are as wide as their widest cell, not wider. ``/`` filters the rows (``matches``). Pure functions:
the tests render every table at 80 and 120 columns without an app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

CELL_PAD = 2
"""Cells a DataTable adds to each column (one space each side)."""
EDGE = 2
"""Cells the table's own edge takes (the focus bar, the scrollbar's gutter)."""
LOW_VALUE = 5
"""Columns whose ``hide`` is at least this go before any label is cut."""


@dataclass(frozen=True)
class Column:
    """One column and how it gives way (see the module's docstring)."""

    key: str
    label: str
    key_figure: bool = False
    """Never cut, never hidden (the id, the median, SOL %)."""
    min_width: int = 0
    """A label column: cut with an ellipsis down to this width (0: not a label; hidden whole)."""
    hide: int = 0
    """Hiding order among the other columns: the highest goes first (0: hidden last)."""


def cell_text(cell: Any) -> Text:
    return cell.copy() if isinstance(cell, Text) else Text(str(cell))


def natural_widths(columns: Sequence[Column], rows: Sequence[Sequence[Any]]) -> list[int]:
    """Each column's widest cell, header included."""
    widths = [len(c.label) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_text(cell).cell_len)
    return widths


def layout(columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: int) -> list[tuple[int, int]]:
    """(column index, width) of the columns shown in ``width`` cells: low-value columns hidden first,
    then labels cut (the widest first, down to their ``min_width``), then the other columns hidden in
    ``hide`` order; key figures stay."""
    widths = natural_widths(columns, rows)
    shown = list(range(len(columns)))

    def total() -> int:
        return sum(widths[i] + CELL_PAD for i in shown) + EDGE

    while total() > width:
        low = [i for i in shown if not columns[i].key_figure and columns[i].hide >= LOW_VALUE]
        if low:
            shown.remove(max(low, key=lambda j: (columns[j].hide, j)))
            continue
        labels = [i for i in shown if columns[i].min_width and widths[i] > columns[i].min_width]
        if labels:
            i = max(labels, key=lambda j: widths[j] - columns[j].min_width)
            widths[i] = max(columns[i].min_width, widths[i] - (total() - width))
            continue
        hideable = [i for i in shown if not columns[i].key_figure]
        if not hideable:
            break
        shown.remove(max(hideable, key=lambda j: (columns[j].hide, j)))
    return [(i, widths[i]) for i in shown]


def fit_cell(cell: Any, width: int) -> Text:
    """``cell`` in at most ``width`` cells, cut with an ellipsis."""
    text = cell_text(cell)
    text.no_wrap = True
    if text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


def matches(row: Sequence[Any], needle: str) -> bool:
    """Whether a row holds ``needle`` (case-insensitive) in any cell: what ``/`` keeps."""
    if not needle:
        return True
    low = needle.lower()
    return any(low in cell_text(c).plain.lower() for c in row)


def fill_table(table: Any, columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: int,
               keys: Sequence[str] | None = None) -> list[str]:
    """Refill the DataTable ``table`` with ``rows`` laid out for ``width`` cells (``keys``: each
    row's key). Returns the keys of the columns shown."""
    plan = layout(columns, rows, width)
    table.clear(columns=True)
    for i, w in plan:
        c = columns[i]
        table.add_column(Text(c.label, justify="right" if c.key_figure and c.key != "id" else "left"),
                         key=c.key, width=w)
    for n, row in enumerate(rows):
        table.add_row(*(fit_cell(row[i], w) for i, w in plan), key=None if keys is None else keys[n])
    return [columns[i].key for i, _ in plan]
