"""The cockpit's background work, kept on the app so that it goes on whatever screen is shown: the
environment checks (run at start and on ``a``/``r`` on Checks; Diagnose and the checklist read them)
and the runs, tunes and soaks in flight with their job records (the Jobs view, ``j``). The base of
``tui.app.CockpitApp``: it uses the app's ``store``, ``profile_name``, ``task_spec`` and
``refresh_header``."""

from __future__ import annotations

import threading
import time
from typing import Any

from textual import work as in_worker
from textual.app import App, ScreenStackError
from textual.css.query import NoMatches
from textual.message import Message

from tui import diagnostics
from tui.screens.jobs import JobsScreen
from tui.widgets.jobs_table import KEEP as JOBS_KEPT
from tui.widgets.jobs_table import JobRecord, ended_message

WORK_NAMES = {"run": "a run", "tune": "a tune", "soak": "a soak"}
JOB_SCREENS = {"run": "run", "tune": "tune", "soak": "soak"}
"""The screen that shows each kind of job: no notification while it is shown."""


class ChecksDone(Message):
    """The environment checks' results from the app's worker (or why they could not run)."""

    def __init__(self, results: list[Any], problem: str | None, only: str | None = None) -> None:
        super().__init__()
        self.results, self.problem, self.only = results, problem, only


class BackgroundWork(App):
    """Checks and jobs for ``CockpitApp`` (see the module's docstring); the app's attributes it
    reads are declared here."""

    store: Any
    profile_name: str | None
    task_spec: Any
    check_results: list[Any]
    checks_state: str
    checks_problem: str | None
    work: dict[str, threading.Event]
    jobs: list[JobRecord]

    def refresh_header(self) -> None:
        """Redraw the header now (the app's own, ``CockpitApp.refresh_header``)."""

    # --- environment checks (run by the app, so that they run whatever screen is shown) -----------
    def run_checks(self, only: str | None = None) -> None:
        """Run every environment check (or ``only`` that one) in a worker; ``ChecksDone`` follows."""
        self.checks_state = "running"
        self._run_checks(self.profile_name, only)
        self._checks_changed()

    @in_worker(thread=True, exclusive=True, exit_on_error=False, group="checks")
    def _run_checks(self, profile_name: str | None, only: str | None) -> None:
        try:
            results = diagnostics.run_checks(profile_name, [only] if only else None)
            if not only:
                diagnostics.record_checks(self.store, results)
        except diagnostics.NotAvailable as exc:
            self.post_message(ChecksDone([], f"checks not available: {exc}"))
            return
        except Exception as exc:
            self.post_message(ChecksDone([], f"the checks failed to run: {type(exc).__name__}: {exc}"))
            return
        self.post_message(ChecksDone(results, None, only))

    def on_checks_done(self, message: ChecksDone) -> None:
        results = message.results
        if message.only and self.check_results:
            fresh = {diagnostics.check_view(r)["id"]: r for r in results}
            results = [fresh.get(diagnostics.check_view(r)["id"], r) for r in self.check_results]
        if results:
            self.check_results = results
        self.checks_problem = message.problem
        self.checks_state = "done" if self.check_results else "not available"
        self._checks_changed()

    def _checks_changed(self) -> None:
        """The shown screen re-reads the checks (a screen not mounted yet reads them when it is)."""
        self.call_after_refresh(self._tell_screen_checks)

    def _tell_screen_checks(self) -> None:
        try:
            changed = getattr(self.screen, "checks_changed", None)
            if changed is not None:
                changed()
        except (ScreenStackError, NoMatches):  # not composed yet: it reads the checks when it mounts
            pass

    # --- work in flight ---------------------------------------------------------------------------
    def work_started(self, name: str, cancel: threading.Event, what: str | None = None) -> None:
        """A screen started ``name`` ('run', 'tune', 'soak') of ``what`` (the task's label by
        default); ``cancel`` stops it when the cockpit quits. Listed in the Jobs view (``j``)."""
        self.work[name] = cancel
        self.jobs.append(JobRecord(name, what or self.task_spec.label()))
        del self.jobs[:-JOBS_KEPT]
        self.refresh_header()

    def work_ended(self, name: str, status: str | None = None, detail: str = "") -> None:
        """``name`` ended; with ``status`` ('ok', 'cancelled', 'refused', ...) its job record says
        how, and a notification says so unless its own screen is shown."""
        self.work.pop(name, None)
        job = next((j for j in reversed(self.jobs) if j.kind == name and j.in_flight), None)
        if job is not None:
            job.ended = time.monotonic()
            job.status = status or "ended"
        if status is not None:
            self.job_result(name, status, detail)
        self.refresh_header()

    def job_result(self, name: str, status: str, detail: str = "") -> None:
        """How the last ``name`` job ended (after ``work_ended``, when the result comes later)."""
        job = next((j for j in reversed(self.jobs) if j.kind == name), None)
        if job is None:
            return
        if job.in_flight:
            job.ended = time.monotonic()
        job.status, job.detail = status, detail
        shown = getattr(self.screen, "MODE", "") if self.is_running else ""
        if shown != JOB_SCREENS.get(name) and not isinstance(self.screen, JobsScreen):
            self.notify(ended_message(job), title="Job ended", severity="information" if status in ("ok", "done")
                        else "warning", timeout=8)

    def action_jobs(self) -> None:
        if not isinstance(self.screen, JobsScreen):
            self.push_screen(JobsScreen())

    def busy_with(self) -> list[str]:
        return [WORK_NAMES.get(name, name) for name, ev in self.work.items() if not ev.is_set()]

    def cancel_work(self) -> None:
        for ev in self.work.values():
            ev.set()

