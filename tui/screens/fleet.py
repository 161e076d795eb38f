"""Fleet: the reports fleet jobs wrote into a folder (``tui export k8s|slurm`` run ``tui
fleet-report``), as one table of GPUs with the outliers marked, the same view as ``tui fleet DIR``.
The folder comes from the field at the top (Enter reads it), remembered in the preferences; else
``SOL_FLEET_DIR``; else the Kubernetes export's default node folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from engine import CockpitError, load_fleet
from tui.screens.base import CockpitScreen
from tui.widgets.fit_table import Column, fill_table, matches

DEFAULT_DIR = "/var/lib/sol-cockpit/reports"
PREF_KEY = "fleet_dir"
COLUMNS = (("mark", " "), ("host", "host"), ("gpu", "GPU"), ("driver", "driver"), ("checks", "failed checks"),
           ("median", "median ms"), ("sol", "SOL %"), ("group", "group SOL %"), ("spread", "host spread"))


FIT_COLUMNS = (Column("mark", " ", hide=1), Column("host", "host", min_width=8), Column("gpu", "GPU", min_width=6),
               Column("driver", "driver", hide=6), Column("checks", "failed checks", min_width=6),
               Column("median", "median ms", key_figure=True), Column("sol", "SOL %", key_figure=True),
               Column("group", "group SOL %", hide=4), Column("spread", "host spread", hide=5))
"""``COLUMNS`` and how each gives way at 80 columns (``tui.widgets.fit_table``): the GPU's median and
SOL % are never cut."""


def _pct(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:.1f}{unit}"


def row_cells(row: Any) -> list[Text]:
    """One GPU's cells, in ``COLUMNS`` order (a pure function: tested without an app)."""
    name = (row.gpu_name or "").replace("NVIDIA ", "")
    sol = Text(_pct(row.sol_pct), justify="right") if row.sol_pct is not None else Text(row.status, style="red")
    if row.outlier and row.sol_pct is not None and row.group_median_pct and row.reasons[0].startswith("SOL"):
        sol.stylize("bold red")
    return [Text("!", style="bold red") if row.outlier else Text(" "),
            Text(row.host) + (Text(" SIM", style="reverse yellow") if row.simulated else Text("")),
            Text(f"{row.gpu} {name}".strip()),
            Text(row.driver or "-"),
            Text(", ".join(row.failed_checks) or "-", style="red" if row.failed_checks else ""),
            Text("-" if row.median_ms is None else f"{row.median_ms:.4g}", justify="right"),
            sol,
            Text(_pct(row.group_median_pct), justify="right"),
            Text(_pct(row.host_spread_pct, " %"), justify="right")]


class FleetScreen(CockpitScreen):
    """Reads the folder in a worker; fills the table on the UI thread."""

    MODE = "fleet"
    FILTERABLE = True
    HELP_TITLE = "Fleet"
    DEFAULT_CSS = """
    #fleet-bar { height: 1; }
    #fleet-dir { width: 1fr; height: 1; border: none; padding: 0 1; }
    #fleet-table { height: 1fr; }
    #fleet-note { height: auto; max-height: 8; }
    """
    BINDINGS = [
        Binding("u", "reload", "Reload", tooltip="Read the reports folder again"),
        Binding("m", "marked_only", "Marked only", tooltip="Show only the marked GPUs, or all of them again"),
    ]

    class Loaded(Message):
        def __init__(self, view: Any, problem: str | None) -> None:
            super().__init__()
            self.view, self.problem = view, problem

    def __init__(self) -> None:
        super().__init__()
        self.view: Any = None
        self.problem: str | None = None
        self.marked_only = False

    def initial_dir(self) -> str:
        prefs = getattr(self.app, "preferences", None)
        saved = prefs.prefs.extra.get(PREF_KEY) if prefs is not None else None
        return str(saved) if isinstance(saved, str) and saved else os.environ.get("SOL_FLEET_DIR") or DEFAULT_DIR

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="fleet-bar"):
            yield Input(self.initial_dir(), placeholder="reports folder (Enter reads it)", id="fleet-dir",
                        compact=True)
        yield DataTable(id="fleet-table", cursor_type="row")
        yield Static(id="fleet-note", classes="panel")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#fleet-table", DataTable).focus()

    def apply_filter(self) -> None:
        self.fill()

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self.call_after_refresh(self.fill)

    def refresh_view(self) -> None:
        self.action_reload()

    @property
    def directory(self) -> str:
        return self.query_one("#fleet-dir", Input).value.strip()

    def action_reload(self) -> None:
        self._load(self.directory)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        prefs = getattr(self.app, "preferences", None)
        if prefs is not None and self.directory:
            prefs.prefs.extra[PREF_KEY] = self.directory
        self.action_reload()
        self.query_one("#fleet-table", DataTable).focus()

    def action_marked_only(self) -> None:
        self.marked_only = not self.marked_only
        self.fill()

    @work(thread=True, exclusive=True, exit_on_error=False, group="fleet")
    def _load(self, directory: str) -> None:
        if not directory:
            self.post_message(self.Loaded(None, "Give the folder the fleet jobs write their reports into."))
            return
        try:
            view = load_fleet(Path(directory))
        except CockpitError as exc:
            self.post_message(self.Loaded(None, exc.message + (f". Fix: {exc.fix}" if exc.fix else "")))
            return
        self.post_message(self.Loaded(view, None))

    def on_fleet_screen_loaded(self, message: Loaded) -> None:
        self.view, self.problem = message.view, message.problem
        self.fill()

    def shown_rows(self) -> list[Any]:
        rows = self.view.rows if self.view is not None else []
        rows = [r for r in rows if r.outlier] if self.marked_only else list(rows)
        return [r for r in rows if matches(row_cells(r), self.filter_text)]

    def fill(self) -> None:
        table = self.query_one("#fleet-table", DataTable)
        rows = self.shown_rows()
        width = table.size.width or self.size.width or self.app.size.width
        fill_table(table, FIT_COLUMNS, [row_cells(r) for r in rows], width, [str(i) for i in range(len(rows))])
        self.show_note()

    def note_text(self) -> Text:
        """The summary under the table: problems first, then the highlighted GPU's reasons."""
        if self.problem:
            return Text(self.problem, style="red")
        view = self.view
        if view is None:
            return Text("Reading the reports...", style="dim")
        text = Text()
        if any(r.simulated for r in view.rows):
            text.append(" SIMULATED ", style="reverse bold yellow")
            text.append(" some reports come from the simulated device.\n")
        text.append(f"{len(view.hosts)} host(s), {len(view.rows)} GPU(s), ")
        text.append(f"{len(view.outliers)} marked", style="bold red" if view.outliers else "green")
        text.append(f" (more than {view.outlier_pct:g} % below the median, failed bench or checks)"
                    + (" · showing marked only (m)" if self.marked_only else ""))
        for task, spread in sorted(view.fleet_spread_pct.items()):
            text.append(f"\nfleet spread {spread:.1f} % for {task}", style="dim")
        for e in view.errors:
            text.append(f"\nnot a readable report: {e.file}: {e.problem}", style="red")
        row = self.highlighted()
        if row is not None and row.reasons:
            text.append(f"\n{row.host} GPU {row.gpu}: " + "; ".join(row.reasons), style="yellow")
        return text

    def show_note(self) -> None:
        self.query_one("#fleet-note", Static).update(self.note_text())

    def highlighted(self) -> Any:
        table = self.query_one("#fleet-table", DataTable)
        rows = self.shown_rows()
        if table.row_count == 0 or not rows:
            return None
        idx = table.cursor_coordinate.row
        return rows[idx] if 0 <= idx < len(rows) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_note()
