"""The History table as pure functions: a stored run as a row (plain dict), its cells, and the
sort orders of every column. Tested without an app."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text

from engine import tuned_here
from tui.widgets.fit_table import Column
from tui.widgets.format import fmt, fmt_ms, fmt_shape

FIT_COLUMNS = (
    Column("mark", " ", hide=1), Column("id", "run", key_figure=True), Column("when", "time", hide=8),
    Column("status", "status", min_width=9), Column("kernel", "kernel", min_width=8),
    Column("shape", "shape", min_width=9), Column("dtype", "dtype", hide=6), Column("block_size", "BLOCK", hide=9),
    Column("pipe", "pipe", hide=10), Column("iterations", "iters", hide=11),
    Column("median_ms", "median", key_figure=True), Column("sol_pct", "SOL %", key_figure=True),
    Column("simulated", "sim", hide=5), Column("tuned", "tuned", hide=12), Column("profile", "profile", hide=7),
)
"""Every column, left to right, and how it gives way on a narrow terminal (``tui.widgets.fit_table``):
the run's id, its median and SOL % are never cut; the knobs, iterations and time hide first."""
COLUMNS = tuple((c.key, c.label) for c in FIT_COLUMNS)
"""(key, header) of every column, left to right."""
SORTABLE = tuple(key for key, _ in COLUMNS if key != "mark")
"""The columns ``s`` cycles through (a click on any header sorts by it too)."""


def when_text(created_at: str | None) -> str:
    """'05-14 13:02' in local time from the store's ISO time; '-' when missing or unreadable."""
    if not created_at:
        return "-"
    try:
        return datetime.fromisoformat(created_at).astimezone().strftime("%m-%d %H:%M")
    except ValueError:
        return "-"


def history_row(record: Any, result: Any = None, mark: dict[str, Any] | None = None) -> dict[str, Any]:
    """A stored run (the store's summary record, and its full result when read) as a row.
    ``tuned``: whether the knobs came from this GPU's tuning cache (the plan's source label starts
    'tuned on this GPU', ``engine.tuned_knobs.tuned_here``); None while the result does not record it (``RunResult.knobs_from``, requested).
    ``mark``: the run against its baseline (``engine.baseline.marks``), None without one."""
    knobs_from = getattr(result, "knobs_from", None)
    soak = getattr(record, "kind", "bench") == "soak"  # a soak times windows for a duration, not iterations
    iterations = None if result is None or soak else result.task.iterations
    return {
        "id": record.id, "created_at": record.created_at, "status": ("soak " if soak else "") + record.status,
        "kind": "soak" if soak else "bench", "kernel": record.kernel,
        "shape": record.shape, "dtype": record.dtype, "block_size": record.block_size,
        "pipe": record.memory_pipelining, "iterations": iterations, "median_ms": record.median_ms,
        "sol_pct": record.sol_pct, "profile": record.profile, "simulated": record.simulated,
        "tuned": None if knobs_from is None else tuned_here(knobs_from),
        "baseline_ratio": (mark or {}).get("ratio"), "regression": bool((mark or {}).get("regression")),
    }


def row_cells(row: dict[str, Any], marked: bool) -> tuple[Any, ...]:
    """The cells of one row, in ``COLUMNS`` order."""
    pipe = row.get("pipe")
    tuned = row.get("tuned")
    status = Text(row["status"], style="green" if row["status"].removeprefix("soak ") == "ok" else "red")
    if row.get("regression"):  # slower than its baseline by more than the tolerance
        status = Text(f"{row['status']} REGR {(row['baseline_ratio'] - 1) * 100:+.0f}%", style="bold red")
    return (
        "*" if marked else " ", f"#{row['id']}", when_text(row.get("created_at")),
        status, row["kernel"],
        fmt_shape(row.get("shape")), row.get("dtype") or "-", row.get("block_size") or "-",
        "-" if pipe is None else ("off" if pipe == 0 else str(pipe)),
        "-" if row.get("iterations") is None else str(row["iterations"]),
        fmt_ms(row.get("median_ms")), fmt(row.get("sol_pct"), digits=1),
        Text("SIM", style="magenta") if row.get("simulated") else "GPU",
        "-" if tuned is None else ("yes" if tuned else "no"), row.get("profile") or "-",
    )


def _shape_key(shape: Any) -> tuple[int, ...]:
    return tuple(shape.values()) if isinstance(shape, dict) else ()


def sort_rows(rows: list[dict[str, Any]], column: str, reverse: bool = False) -> list[dict[str, Any]]:
    """``rows`` ordered by ``column``; missing values go last either way, ties newest first."""
    key_of = {"when": "created_at", "pipe": "pipe"}.get(column, column)

    def value(row: dict[str, Any]) -> Any:
        v = row.get(key_of)
        if column == "shape":
            return _shape_key(v)
        if isinstance(v, bool):
            return int(v)
        return v

    present = [r for r in rows if value(r) is not None]
    missing = [r for r in rows if value(r) is None]
    present.sort(key=lambda r: -r["id"])
    present.sort(key=value, reverse=reverse)
    return present + sorted(missing, key=lambda r: -r["id"])
