"""The tune's table rows and progress line as pure functions of the trials (dicts as the engine's
``TrialEvent`` carries them): labels, sort orders, the best row, the cells of a row."""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text

from engine import Trial
from tui.widgets.fit_table import Column

SORTS = ("time", "knobs", "status", "order")
"""Sort orders of the table, in the order ``s`` cycles through them."""
FILTERS = ("all", "ok", "failed", "skipped")
"""Row filters of the table, in the order ``f`` cycles through them: every candidate, the correct
timed ones, those that failed (incorrect, compile/launch error, timeout, crash), the skipped."""
FIT_COLUMNS = (Column("n", "#", key_figure=True), Column("knobs", "knobs", min_width=12),
               Column("ms", "ms", key_figure=True), Column("sol", "SOL %", key_figure=True),
               Column("status", "status", min_width=12))
"""The candidates' columns (``tui.widgets.fit_table``): the knobs and the status are cut with an
ellipsis so that ms and SOL % always show whole; the highlighted row is shown in full below."""
COLUMN_SORT = {"n": "order", "knobs": "knobs", "ms": "time", "sol": "time", "status": "status"}
"""The sort a click on a column header picks."""
STATUS_RANK = {"ok": 0, "incorrect": 1, "running": 2, "compile_error": 3, "launch_error": 4, "timeout": 5,
               "crashed": 6, "skipped": 7}
REASON_CHARS = 200


def trial_label(trial: dict[str, Any]) -> str:
    """The engine's own label of a trial's knobs, e.g. '128x128/5 consumers=pingpong'."""
    return Trial.from_dict(trial).key


def keep(mode: str, e: dict[str, Any]) -> bool:
    """Whether a table entry passes a filter of ``FILTERS`` (a running candidate shows under 'all')."""
    status = e.get("status")
    if mode == "ok":
        return status == "ok"
    if mode == "failed":
        return status not in ("ok", "skipped", "running", None)
    if mode == "skipped":
        return status == "skipped"
    return True


def sort_key(mode: str):
    """The key function of a sort order over table entries (trial dicts with ``seq`` and ``n``)."""
    def by_time(e):
        ms = e.get("median_ms") if e.get("status") == "ok" else None
        return (ms is None, ms or 0.0, e["seq"])

    def by_knobs(e):
        tile = tuple(int(d) for d in re.findall(r"\d+", str(e.get("block_size"))))
        return (tile, int(e.get("memory_pipelining") or 0), sorted(map(str, (e.get("schedule") or {}).items())))

    def by_status(e):
        return (STATUS_RANK.get(e.get("status"), 9), by_time(e))

    def by_order(e):
        return (e.get("n") is None, e["seq"])

    return {"time": by_time, "knobs": by_knobs, "status": by_status, "order": by_order}[mode]


def best_entry(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fastest correct timed trial (as ``TuneResult.best`` picks it)."""
    ok = [e for e in entries if e.get("status") == "ok" and e.get("median_ms") is not None]
    return min(ok, key=lambda e: e["median_ms"]) if ok else None


def row_cells(entry: dict[str, Any], best: bool) -> tuple[Text, ...]:
    """#, knobs, ms, SOL %, status of one table row; the best row starred and bold."""
    status = entry.get("status", "")
    style = "bold green" if best else {"ok": "", "skipped": "dim", "running": "yellow",
                                       "incorrect": "red"}.get(status, "red")
    n = "-" if entry.get("n") is None else str(entry["n"])
    ms, sol = entry.get("median_ms"), entry.get("sol_pct")
    what = status + (", default" if entry.get("default") else "")
    reason = entry.get("reason") or ""
    if status != "ok" and reason:
        what += ": " + (reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…")
    return (Text(n + ("★" if best else " "), style=style, justify="right"), Text(trial_label(entry), style=style),
            Text("" if ms is None else f"{ms:.4f}", style=style, justify="right"),  # never "0.1": 4 decimals
            Text("" if sol is None else f"{sol:.1f}", style=style, justify="right"), Text(what, style=style))


def progress_text(state: str, step: tuple[str, int, int] | None, done: int, total: int,
                  best: dict[str, Any] | None, elapsed_s: float, budget_s: float, in_flight: str | None) -> Text:
    """While running, the step of the search with its own count, whose denominator is fixed when the
    step starts ('running · variations round 2: 3/8 · 161 timed, best 0.1441 ms (128x128/5), elapsed
    14 s / 60 s'); once ended, the candidates timed of those known ('done · 166 of 166 candidates
    timed, ...'). The candidates known grow as the rounds add variations, so the running line never
    divides by them."""
    style = {"running": "bold yellow", "done": "bold green", "cancelled": "bold magenta"}.get(state, "bold red")
    out = Text(state, style=style)
    if state == "running":
        if step is not None and step[0]:
            out.append(f" · {step[0]}: {step[1]}/{step[2]}")
        out.append(f" · {done} timed")
    else:
        out.append(f" · {done} of {max(done, total)} candidates timed")
    if best is not None:
        out.append(", best ")
        out.append(f"{best['median_ms']:.4f} ms", style="bold")
        out.append(f" ({trial_label(best)})")
    out.append(f", elapsed {elapsed_s:.0f} s / {budget_s:g} s")
    if state == "running" and in_flight:
        out.append(f", timing {in_flight}", style="dim")
    return out


def row_detail(entry: dict[str, Any]) -> Text:
    """The highlighted candidate in full: its knobs, time, SOL % and status or skip reason."""
    out = Text(trial_label(entry), style="bold")
    ms, sol = entry.get("median_ms"), entry.get("sol_pct")
    if ms is not None:
        out.append(f"  {ms:.4f} ms")
    if sol is not None:
        out.append(f"  SOL {sol:.1f} %")
    status = str(entry.get("status", ""))
    out.append(f"  {status}", style="" if status == "ok" else "yellow")
    if entry.get("reason"):
        out.append(f": {entry['reason']}", style="yellow")
    return out
