"""Jobs (``j`` anywhere), as k9s lists pods: the runs, tunes and soaks of this session and the tunes
other processes noted in the store (``tui tune``, another cockpit), in flight first, then the most
recent; status and elapsed time, redrawn every second. The work goes on while it is open (and while
any screen is browsed); ``x`` cancels the highlighted job in flight, where it is this cockpit's."""

from __future__ import annotations

import os
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.widgets.fit_table import fill_table
from tui.widgets.jobs_table import COLUMNS, JobRecord, from_tune_job, job_cells

REFRESH_S = 1.0
STORE_REFRESH_S = 2.0
"""How often the store's tunes (other processes') are read again while the view is open."""


class JobsScreen(ModalScreen[None]):
    """Reads ``app.jobs`` on a timer (attributes down) and the store's tunes in a worker (messages
    up); cancels through ``app.work``."""

    class StoreJobs(Message):
        """The tunes other processes noted in the store (from the worker), or why it was not read."""

        def __init__(self, jobs: list[JobRecord], problem: str | None) -> None:
            super().__init__()
            self.jobs, self.problem = jobs, problem

    def __init__(self) -> None:
        super().__init__()
        self.store_jobs: list[JobRecord] = []
        self.store_problem: str | None = None

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
        store = getattr(self.app, "store", None)
        if store is not None:
            self.read_store(store)
            self.set_interval(STORE_REFRESH_S, lambda: self.read_store(store))
        self.query_one("#jobs-table", DataTable).focus()

    @work(thread=True, exclusive=True, exit_on_error=False, group="jobs-store")
    def read_store(self, store: Any) -> None:
        from engine import recent_tunes

        try:
            jobs = [from_tune_job(t) for t in recent_tunes(store, other_than_pid=os.getpid())]
        except Exception as exc:  # a damaged or unreadable store: this session's jobs still list
            self.post_message(self.StoreJobs([], f"tunes of other processes not read: {exc}"))
            return
        self.post_message(self.StoreJobs(jobs, None))

    def on_jobs_screen_store_jobs(self, message: StoreJobs) -> None:
        self.store_jobs, self.store_problem = message.jobs, message.problem
        self.fill()

    def ordered(self) -> list[JobRecord]:
        jobs = sorted([*self.app.jobs, *self.store_jobs], key=lambda j: j.started)  # type: ignore[attr-defined]
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
        if self.store_problem:
            note += f"\n{self.store_problem}"
        self.query_one("#jobs-note", Static).update(note)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_cancel_job(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        jobs = self.ordered()
        if not jobs or not table.row_count:
            return
        job = jobs[min(table.cursor_row, len(jobs) - 1)]
        if job.pid is not None:
            self.notify(f"That tune runs in another process (pid {job.pid}): stop it there (ctrl+c).",
                        severity="warning") if job.in_flight else self.notify("That job has ended.", severity="warning")
            return
        cancel = self.app.work.get(job.kind) if job.in_flight else None  # type: ignore[attr-defined]
        if cancel is None:
            self.notify("That job has ended.", severity="warning")
            return
        cancel.set()
        self.notify(f"Cancelling the {job.kind}...", title="Jobs")
