"""Jobs (``j`` anywhere), as k9s lists pods: the runs, tunes and soaks of this session, in flight
first, then the most recent; status and elapsed time, redrawn every second. The work goes on while
it is open (and while any screen is browsed); ``x`` cancels the highlighted job in flight."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.widgets.fit_table import fill_table
from tui.widgets.jobs_table import COLUMNS, job_cells

REFRESH_S = 1.0


class JobsScreen(ModalScreen[None]):
    """Reads ``app.jobs`` on a timer (attributes down); cancels through ``app.work``."""

    BINDINGS = [
        Binding("escape", "close", "Close", tooltip="Close the jobs list"),
        Binding("j", "close", "Close", show=False, tooltip="Close the jobs list"),
        Binding("x", "cancel_job", "Cancel job", tooltip="Cancel the highlighted job in flight"),
    ]
    DEFAULT_CSS = """
    #jobs-box { height: auto; max-height: 90%; }
    #jobs-table { height: auto; max-height: 20; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="jobs-box", classes="overlay"):
            yield Static(Text("Jobs  (esc closes; x cancels one in flight)", style="bold"), classes="overlay-title")
            yield DataTable(id="jobs-table", cursor_type="row")
            yield Static(id="jobs-note", classes="log")

    def on_mount(self) -> None:
        self.fill()
        self.set_interval(REFRESH_S, self.fill)
        self.query_one("#jobs-table", DataTable).focus()

    def ordered(self) -> list:
        jobs = list(self.app.jobs)  # type: ignore[attr-defined]
        return [j for j in reversed(jobs) if j.in_flight] + [j for j in reversed(jobs) if not j.in_flight]

    def fill(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        row = table.cursor_row if table.row_count else 0
        jobs = self.ordered()
        width = table.size.width or min(100, self.app.size.width) - 4
        fill_table(table, COLUMNS, [job_cells(j) for j in jobs], width, [str(i) for i in range(len(jobs))])
        if jobs:
            table.move_cursor(row=min(row, len(jobs) - 1), animate=False)
        running = sum(1 for j in jobs if j.in_flight)
        note = ("No job yet: r on 4 Run, t then r on 3 Tune, r on 9 Soak." if not jobs else
                f"{running} in flight, {len(jobs) - running} ended · work goes on while you browse")
        self.query_one("#jobs-note", Static).update(note)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_cancel_job(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        jobs = self.ordered()
        if not jobs or not table.row_count:
            return
        job = jobs[min(table.cursor_row, len(jobs) - 1)]
        cancel = self.app.work.get(job.kind) if job.in_flight else None  # type: ignore[attr-defined]
        if cancel is None:
            self.notify("That job has ended.", severity="warning")
            return
        cancel.set()
        self.notify(f"Cancelling the {job.kind}...", title="Jobs")
