"""History: stored runs, filtered by kernel and profile, sorted by any column (``s``, ``o`` or a
click on a header); mark two and compare them side by side (``tui.screens.compare``)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Select, Static

from engine import CockpitError, baseline_marks, kernel_names
from tui.screens.base import CockpitScreen
from tui.screens.compare import CompareScreen
from tui.widgets.fit_table import fill_table, matches
from tui.widgets.history_rows import COLUMNS, FIT_COLUMNS, SORTABLE, history_row, row_cells, sort_rows

LIMIT = 500
"""Runs listed at most (newest first from the store, then sorted here)."""
LABELS = dict(COLUMNS)


class HistoryScreen(CockpitScreen):
    """Reads the results store in a worker; sorts and marks on the UI thread."""

    MODE = "history"
    FILTERABLE = True
    BINDINGS = [
        Binding("space", "mark", "Mark", tooltip="Mark the highlighted run for comparison (two at most)"),
        Binding("c", "compare", "Compare",
                tooltip="Compare the two marked runs (or the highlighted one and the previous run of its task)"),
        Binding("s", "next_sort", "Sort", tooltip="Sort by the next column (a click on a header sorts by it)"),
        Binding("o", "reverse_sort", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("u", "reload", "Reload", show=False, tooltip="Read the results store again"),
    ]

    class Loaded(Message):
        def __init__(self, rows: list[dict[str, Any]], problem: str | None) -> None:
            super().__init__()
            self.rows, self.problem = rows, problem

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[int] = []
        self.rows: list[dict[str, Any]] = []
        self.sort_column = "id"
        self.sort_reverse = True
        self.problem: str | None = None
        self.shown_columns: list[str] = []

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="hist-filters"):
            yield Select([(k, k) for k in kernel_names()], prompt="all kernels", id="hist-kernel", compact=True)
            yield Select([], prompt="all profiles", id="hist-profile", compact=True)
            yield Static(id="hist-sort")
        with Vertical(id="hist-body"):
            yield DataTable(id="hist-table", cursor_type="row")
            yield Static(id="hist-note", classes="panel")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#hist-profile", Select).set_options([(n, n) for n in self.app.profiles.names()])
        self.query_one("#hist-table", DataTable).focus()

    def on_resize(self, event) -> None:
        super().on_resize(event)
        if self.rows:
            self.call_after_refresh(self.fill)

    def apply_filter(self) -> None:
        self.fill()

    def refresh_view(self) -> None:
        self.action_reload()

    def _filter(self, sel_id: str) -> str | None:
        select = self.query_one(sel_id, Select)
        return None if select.is_blank() else str(select.value)

    def action_reload(self) -> None:
        self._load(self._filter("#hist-kernel"), self._filter("#hist-profile"))

    def on_select_changed(self, event: Select.Changed) -> None:
        self.action_reload()

    @work(thread=True, exclusive=True, exit_on_error=False, group="history")
    def _load(self, kernel: str | None, profile: str | None) -> None:
        store = self.app.store
        try:
            records = store.list(kernel=kernel, profile=profile, limit=LIMIT)
            marks = baseline_marks(store, records)  # runs slower than their baseline (tui baseline)
            rows = [history_row(r, store.get(r.id), marks.get(r.id)) for r in records]
        except CockpitError as exc:
            self.post_message(self.Loaded([], exc.message))
            return
        self.post_message(self.Loaded(rows, None))

    def on_history_screen_loaded(self, message: Loaded) -> None:
        self.rows, self.problem = message.rows, message.problem
        self.fill()

    # --- the table from the screen's state ----------------------------------------------------------
    def fill(self) -> None:
        table = self.query_one("#hist-table", DataTable)
        keep = self.highlighted()
        ordered = sort_rows(self.rows, self.sort_column, self.sort_reverse)
        cells = [row_cells(row, row["id"] in self.marked) for row in ordered]
        kept = [(row, c) for row, c in zip(ordered, cells, strict=True) if matches(c, self.filter_text)]
        width = table.size.width or self.size.width or self.app.size.width
        self.shown_columns = fill_table(table, FIT_COLUMNS, [c for _, c in kept], width,
                                        [str(row["id"]) for row, _ in kept])
        if keep is not None and any(r["id"] == keep for r, _ in kept):
            table.move_cursor(row=table.get_row_index(str(keep)), animate=False)
        arrow = "▼" if self.sort_reverse else "▲"
        self.query_one("#hist-sort", Static).update(
            Text(f" sort: {LABELS[self.sort_column].strip() or 'run'} {arrow} (s, o)", style="dim"))
        shown = f"{len(kept)} of {len(self.rows)} runs match /{self.filter_text}" if self.filter_text \
            else f"{len(self.rows)} runs"
        hidden = len(COLUMNS) - len(self.shown_columns)
        note = self.problem or ("No stored runs yet: run a task on 4 Run." if not self.rows else
                                f"{shown} · space marks two, c compares them"
                                + (f" · {hidden} columns hidden" if hidden else ""))
        self.query_one("#hist-note", Static).update(Text(note, style="red" if self.problem else "dim"))

    def highlighted(self) -> int | None:
        table = self.query_one("#hist-table", DataTable)
        if table.row_count == 0:
            return None
        return int(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    # --- keys and clicks -----------------------------------------------------------------------------
    def sort_by(self, column: str, reverse: bool) -> None:
        self.sort_column, self.sort_reverse = column, reverse
        self.fill()

    def action_next_sort(self) -> None:
        nxt = SORTABLE[(SORTABLE.index(self.sort_column) + 1) % len(SORTABLE)] \
            if self.sort_column in SORTABLE else SORTABLE[0]
        self.sort_by(nxt, False)

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort_column, not self.sort_reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column in SORTABLE:
            self.sort_by(column, not self.sort_reverse if column == self.sort_column else False)

    def action_mark(self) -> None:
        rid = self.highlighted()
        if rid is None:
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked = (self.marked + [rid])[-2:]
        self.fill()

    def previous_of(self, rid: int) -> int | None:
        """The newest listed run before ``rid`` of the same kernel, shape and dtype."""
        row = next((r for r in self.rows if r["id"] == rid), None)
        if row is None:
            return None
        same = [r["id"] for r in self.rows if r["id"] < rid and
                (r["kernel"], r["shape"], r["dtype"]) == (row["kernel"], row["shape"], row["dtype"])]
        return max(same) if same else None

    def action_compare(self) -> None:
        ids = list(self.marked)
        if len(ids) < 2:
            rid = self.highlighted()
            prev = None if rid is None else self.previous_of(rid)
            if prev is None:
                self.notify("No earlier run of this kernel, shape and dtype: mark two runs with space.",
                            severity="warning")
                return
            ids = [prev, rid]
        try:
            a, b = (self.app.store.get(i) for i in sorted(ids))
        except CockpitError as exc:
            self.notify(exc.message, severity="error")
            return
        if a is None or b is None:
            self.notify("A marked run is no longer in the store.", severity="error")
            return
        self.app.push_screen(CompareScreen(a, b))
