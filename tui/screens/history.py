"""History: stored runs, filtered by kernel and profile; mark two and compare them side by side."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Select, Static

from engine import CockpitError, format_pipelining, kernel_names
from tui.screens.base import CockpitScreen
from tui.widgets.format import fmt, fmt_delta_pct, fmt_ms

COMPARE_FIELDS = (
    ("status", "status", None), ("block_size", "BLOCK_SIZE", None), ("memory_pipelining", "MEMORY_PIPELINING", None),
    ("time_ms.median", "median", True), ("time_ms.p10", "p10", True), ("time_ms.p90", "p90", True),
    ("tflops", "TFLOP/s", False), ("gbps", "GB/s", False), ("sol_pct", "SOL %", False),
    ("solexec_score", "score", False), ("bound", "bound", None), ("correct", "correct", None),
    ("profile", "profile", None), ("simulated", "simulated", None),
)


def _get(d: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part) if part not in ("block_size", "memory_pipelining") else (d.get("knobs") or {}).get(part)
    return d


def compare_runs(a: Any, b: Any) -> Table:
    """Two stored results side by side with the change from ``a`` to ``b``."""
    ja, jb = a.summary_json(), b.summary_json()
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("", no_wrap=True)
    t.add_column(f"#{a.run_id}", justify="right", no_wrap=True)
    t.add_column(f"#{b.run_id}", justify="right", no_wrap=True)
    t.add_column("change", no_wrap=True)
    for path, label, lower_better in COMPARE_FIELDS:
        va, vb = _get(ja, path), _get(jb, path)
        if path.startswith("time_ms"):
            sa, sb = fmt_ms(va), fmt_ms(vb)
        elif isinstance(va, float) or isinstance(vb, float):
            sa, sb = fmt(va, digits=2), fmt(vb, digits=2)
        else:
            sa, sb = str(va), str(vb)
        change = fmt_delta_pct(vb, va, lower_better) if lower_better is not None else ("differs" if va != vb else "")
        t.add_row(label, sa, sb, change, style="yellow" if va != vb and lower_better is None else "")
    return t


class HistoryScreen(CockpitScreen):
    """Reads the results store in a worker; the table is the screen's only state."""

    MODE = "history"
    BINDINGS = [
        Binding("space", "mark", "Mark", tooltip="Mark the highlighted run for comparison (two at most)"),
        Binding("c", "compare", "Compare", tooltip="Compare the two marked runs (or the highlighted and previous)"),
        Binding("u", "reload", "Reload", tooltip="Read the results store again"),
    ]

    class Loaded(Message):
        def __init__(self, records: list[Any], problem: str | None) -> None:
            super().__init__()
            self.records, self.problem = records, problem

    def __init__(self) -> None:
        super().__init__()
        self.marked: list[int] = []
        self.records: list[Any] = []

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="hist-filters"):
            yield Select([(k, k) for k in kernel_names()], prompt="all kernels", id="hist-kernel", compact=True)
            yield Select([], prompt="all profiles", id="hist-profile", compact=True)
        with Vertical(id="hist-body"):
            yield DataTable(id="hist-table", cursor_type="row")
            yield Static(id="hist-compare", classes="panel")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#hist-profile", Select).set_options([(n, n) for n in self.app.profiles.names()])
        self.query_one("#hist-table", DataTable).add_columns(
            " ", "run", "status", "kernel", "dtype", "BLOCK_SIZE", "pipe", "median", "SOL %", "profile")
        self.query_one("#hist-table", DataTable).focus()

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
        try:
            records = self.app.store.list(kernel=kernel, profile=profile, limit=500)
        except CockpitError as exc:
            self.post_message(self.Loaded([], exc.message))
            return
        self.post_message(self.Loaded(records, None))

    def on_history_screen_loaded(self, message: Loaded) -> None:
        self.records = message.records
        table = self.query_one("#hist-table", DataTable)
        table.clear()
        for r in self.records:
            pl = r.memory_pipelining
            table.add_row("*" if r.id in self.marked else " ", f"#{r.id}",
                          Text(r.status, style="green" if r.status == "ok" else "red"), r.kernel, r.dtype or "",
                          r.block_size or "", format_pipelining(pl), fmt_ms(r.median_ms),
                          fmt(r.sol_pct, digits=1), r.profile + (" SIM" if r.simulated else ""), key=str(r.id))
        note = message.problem or ("No stored runs yet: run a task on 4 Run." if not self.records else
                                   "space marks two runs, c compares them.")
        self.query_one("#hist-compare", Static).update(Text(note, style="red" if message.problem else "dim"))

    def highlighted(self) -> int | None:
        table = self.query_one("#hist-table", DataTable)
        if table.row_count == 0:
            return None
        return int(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_mark(self) -> None:
        rid = self.highlighted()
        if rid is None:
            return
        if rid in self.marked:
            self.marked.remove(rid)
        else:
            self.marked = (self.marked + [rid])[-2:]
        table = self.query_one("#hist-table", DataTable)
        for r in self.records:
            table.update_cell(str(r.id), table.ordered_columns[0].key, "*" if r.id in self.marked else " ")

    def action_compare(self) -> None:
        ids = list(self.marked)
        if len(ids) < 2:
            rid = self.highlighted()
            pos = [r.id for r in self.records]
            if rid is not None and rid in pos and pos.index(rid) + 1 < len(pos):
                ids = [pos[pos.index(rid) + 1], rid]
        if len(ids) < 2:
            self.notify("Mark two runs with space first.", severity="warning")
            return
        a, b = (self.app.store.get(i) for i in sorted(ids))
        if a is None or b is None:
            self.notify("A marked run is no longer in the store.", severity="error")
            return
        self.query_one("#hist-compare", Static).update(compare_runs(a, b))
