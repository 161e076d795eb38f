"""Run: launch the task in the engine process, follow its stages, read the result, whether its
conditions were valid (the badge), the SOL bars, the peers in the same table, the roofline, and
the change against the previous stored run of the same task. Renderers are in
``tui.widgets.run_report``, ``tui.widgets.validity`` and ``tui.widgets.roofline``."""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import ProgressBar, Static

from engine import CockpitError, RecordedTask, RunResult, RunStatus, prepare, run_prepared, tuned_lookup
from tui import diagnostics
from tui.screens.base import WIDE_COLUMNS, CockpitScreen
from tui.widgets.roofline import RooflinePlot, roofline_data
from tui.widgets.run_report import (  # noqa: F401 (summary_text and comparison_table: tests import them here)
    comparison_table,
    failure_text,
    knobs_of,
    resolved_knobs,
    result_table,
    summary_text,
    task_identity,
)
from tui.widgets.solbar import render_sol_bars
from tui.widgets.stages import StageTracker
from tui.widgets.validity import validity_badge

REPORT_PARTS = ("#run-summary", "#run-cols", "#run-table", "#run-log")
"""What the roofline takes the place of below ``WIDE_COLUMNS`` columns."""


def previous_run(store: Any, result: RunResult) -> RunResult | None:
    """The run "vs previous" compares with (``ResultStore.previous``: an ok bench, never an
    incorrect run or a soak), from this session or an earlier one."""
    try:
        return store.previous(result)
    except CockpitError:
        return None


class RunScreen(CockpitScreen):
    """Runs are started here; the worker posts engine events back as messages."""

    MODE = "run"
    BINDINGS = [
        Binding("r", "start_run", "Run", tooltip="Run the task in the engine process"),
        Binding("x", "cancel_run", "Cancel", tooltip="Cancel the run in flight (kills the engine process)"),
        Binding("p", "toggle_plot", "Roofline",
                tooltip="Show or hide the roofline of the last result (in place of the report when narrow)"),
    ]

    class EngineEvent(Message):
        """An engine event (stage, progress, log), posted from the run worker thread."""

        def __init__(self, event: Any) -> None:
            super().__init__()
            self.event = event

        def can_replace(self, message: Message) -> bool:
            return (isinstance(message, RunScreen.EngineEvent) and getattr(self.event, "kind", "") == "progress"
                    and getattr(message.event, "kind", "") == "progress")

    class Started(Message):
        """A run was accepted and its engine process is starting (bubbles to the app); ``knobs``:
        the knobs line of the task as prepared, with where they came from."""

        def __init__(self, backend: str, notices: list[str], knobs: str = "") -> None:
            super().__init__()
            self.backend, self.notices, self.knobs = backend, notices, knobs

    class Finished(Message):
        """A run ended, well or badly (bubbles to the app, which records it); ``previous``: the
        stored run of the same task it is compared with."""

        def __init__(self, result: RunResult, previous: RunResult | None = None) -> None:
            super().__init__()
            self.result, self.previous = result, previous

    class Rejected(Message):
        """The task was refused before anything ran (validation, no backend)."""

        def __init__(self, message: str, fix: str | None) -> None:
            super().__init__()
            self.message_text, self.fix = message, fix

    def __init__(self) -> None:
        super().__init__()
        self.tracker = StageTracker()
        self._cancel = threading.Event()
        self.log_lines: list[str] = []
        self.plot_wanted: bool | None = None
        """The roofline as ``p`` left it; None: shown on wide terminals, hidden on narrow ones."""
        self.shown_result: RunResult | None = None
        """The result the report shows (the badge and the roofline are of it)."""

    def compose_body(self) -> ComposeResult:
        with Vertical(id="run-top"):
            yield Static(id="run-task")
            yield Static(id="run-stages")
            yield ProgressBar(id="run-progress", total=100, show_eta=False)
        with VerticalScroll(id="run-body"):
            yield Static("Press r to run the task.", id="run-summary")
            yield Static(id="run-validity")
            with Horizontal(id="run-cols"):
                yield Static(id="run-sol", classes="panel")
                yield Static(id="run-compare", classes="panel")
            yield Static(id="run-table", classes="panel")
            yield RooflinePlot(id="run-plot")
            yield Static(id="run-log", classes="log")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#run-validity", Static).display = False
        self.layout_plot()

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self.layout_plot(event.size.width >= WIDE_COLUMNS)
        self.call_after_refresh(self.refresh_badge)

    def on_screen_resume(self, event) -> None:
        super().on_screen_resume(event)
        last = self.app.last_result
        if last is not None and last is not self.shown_result and "run" not in self.app.work:
            self.show_result(last, previous_run(self.app.store, last))  # a result set by another screen

    def plot_shown(self, wide: bool | None = None) -> bool:
        """Whether the roofline shows: as ``p`` left it, else on wide terminals; never without data."""
        wide = self.has_class("-wide") if wide is None else wide
        has = self.query_one("#run-plot", RooflinePlot).has_data
        return has and (self.plot_wanted if self.plot_wanted is not None else wide)

    def layout_plot(self, wide: bool | None = None) -> None:
        """The roofline below the peers on wide terminals; on narrow ones in place of the report
        (summary, bars, comparison, table, log), under the badge, as tall as the body."""
        wide = self.has_class("-wide") if wide is None else wide
        shown = self.plot_shown(wide)
        plot = self.query_one("#run-plot", RooflinePlot)
        plot.display = shown
        plot.set_class(shown and not wide, "-alone")
        for sel in REPORT_PARTS:
            self.query_one(sel).display = wide or not shown

    def refresh_view(self, knobs: str | None = None) -> None:
        """The task line; ``knobs``: the prepared run's knobs line (else planned here the same way,
        with the store's tuning cache, as ``prepare`` will)."""
        task = self.app.task_spec
        prof = self.app.effective_profile()
        if knobs is None:
            choice = self.app.backend_choice
            tuned = None if prof is None or choice is None else tuned_lookup(
                self.app.store, choice.device_name, prof, choice.name == "sim")
            knobs = knobs_of(resolved_knobs(task, prof, tuned))
        text = Text()
        text.append(task.label(), style="bold")
        text.append(f"  {knobs}  warm-up {task.warmup} x{task.iterations}")
        text.append(f"  on {prof.name if prof else '?'}", style="dim")
        if task.fault.value != "none":
            text.append(f"  fault={task.fault.value}", style="bold red")
        problem = self.app.form_error()
        if problem:
            text.append(f"\n✗ {problem}: r will not run until it is fixed", style="bold red")
        self.query_one("#run-task", Static).update(text)
        self.query_one("#run-stages", Static).update(self.tracker.render())

    # --- actions -------------------------------------------------------------------------------
    def action_start_run(self) -> None:
        if self.app.run_active or "run" in self.app.work:
            self.notify("A run is already in flight; x cancels it.", severity="warning")
            return
        if not self.has_class("-wide"):  # the report shows how the run goes; p shows the roofline again
            self.plot_wanted = None
            self.layout_plot()
        problem = self.app.form_error()
        if problem:
            self.clear_report(Text(f"Not run: {problem}.", style="bold red"))
            self.refresh_view()
            return
        self.log_lines = []
        self._cancel = threading.Event()
        self.clear_report(Text("Starting the engine process...", style="yellow"))
        self.refresh_view()
        self.app.work_started("run", self._cancel, self.app.task_spec.label())
        self._run(self.app.task_spec, self.app.profile_name, self.app.backend_choice, self._cancel, self.app.store)

    def action_toggle_plot(self) -> None:
        if not self.query_one("#run-plot", RooflinePlot).has_data:
            self.notify("No roofline yet: r runs the task, and a run with a time draws one.", severity="warning")
            return
        self.plot_wanted = not self.plot_shown()
        self.layout_plot()

    def action_cancel_run(self) -> None:
        if "run" in self.app.work:  # also while the engine process is still starting
            self._cancel.set()
            self.query_one("#run-summary", Static).update(Text("Cancelling...", style="yellow"))
        else:
            self.notify("No run in flight.", severity="warning")

    @work(thread=True, exclusive=True, exit_on_error=False, group="run")
    def _run(self, task, profile_name, choice, cancel: threading.Event, store: Any) -> None:
        try:
            prep = prepare(task, profile_name, profiles=self.app.profiles, backend_choice=choice, store=store)
        except CockpitError as exc:
            self.post_message(self.Rejected(exc.message, exc.fix))
            return
        except Exception as exc:  # an engine bug must not end the cockpit
            self.post_message(self.Rejected(f"internal error while preparing: {type(exc).__name__}: {exc}", None))
            return
        knobs = prep.task.model_dump(mode="json")
        knobs["knobs_from"] = prep.plan.source_label if prep.plan is not None else ""
        self.post_message(self.Started(prep.backend, prep.notices, knobs_of(knobs)))
        try:
            result = run_prepared(prep, on_event=lambda ev: self.post_message(self.EngineEvent(ev)),
                                  cancel=cancel, store=store)
        except Exception as exc:

            msg = exc.message if isinstance(exc, CockpitError) else f"{type(exc).__name__}: {exc}"
            result = RunResult(status=RunStatus.crashed, simulated=prep.simulated,
                               task=RecordedTask.of(prep.task), profile=prep.profile.name,
                               error=f"the run could not complete: {msg}", error_kind="crashed")
        self.post_message(self.Finished(result, previous_run(store, result)))

    # --- messages from the worker ---------------------------------------------------------------
    def on_run_screen_started(self, message: Started) -> None:
        if message.knobs:
            self.refresh_view(knobs=message.knobs)
        for notice in message.notices:
            self.log_lines.append(notice)
        self.query_one("#run-summary", Static).update(
            Text(f"Running on the {'SIMULATED device' if message.backend == 'sim' else 'GPU'}...", style="yellow"))

    def on_run_screen_engine_event(self, message: EngineEvent) -> None:
        ev = message.event
        self.tracker.apply(ev)
        if getattr(ev, "kind", "") == "log":
            self.log_lines.append(ev.message)
        elif getattr(ev, "kind", "") == "stage" and ev.state == "fail" and ev.detail:
            self.log_lines.append(f"{ev.stage}: {ev.detail}")
        self.query_one("#run-stages", Static).update(self.tracker.render())
        self.query_one("#run-progress", ProgressBar).update(progress=100 * self.tracker.fraction())

    def on_run_screen_rejected(self, message: Rejected) -> None:
        self.app.work_ended("run", "refused", message.message_text[:80])
        self.clear_report(None)
        text = Text("Not run: ", style="bold red")
        text.append(message.message_text)
        if message.fix:
            text.append(f"\nfix: {message.fix}", style="green")
        for r in diagnostics.rules_for_text(message.message_text)[:2]:
            text.append(f"\nrule {r.get('id')}: {r.get('title')}", style="bold")
        self.query_one("#run-summary", Static).update(text)

    def on_run_screen_finished(self, message: Finished) -> None:
        self.app.work_ended("run")
        result = message.result
        if not result.ok:
            self.tracker.stop(failed=result.status != RunStatus.cancelled)
        self.query_one("#run-progress", ProgressBar).update(
            progress=100 if result.ok else 100 * self.tracker.fraction())
        self.query_one("#run-stages", Static).update(self.tracker.render())
        self.show_result(result, message.previous)
        log = self.log_lines[-8:]
        self.query_one("#run-log", Static).update(Text("\n".join(log), style="dim"))

    def clear_report(self, summary: Text | None) -> None:
        """No report of an earlier run stays on screen as if it were this one's: a run that starts
        or is refused clears the stages, the progress, the bars, the peers, the badge and the
        roofline (the earlier runs are in 7 History). ``summary``: what the summary line says now
        (None: left as it is)."""
        self.shown_result = None
        self.tracker.reset()
        self.query_one("#run-stages", Static).update(self.tracker.render())
        self.query_one("#run-progress", ProgressBar).update(progress=0)
        if summary is not None:
            self.query_one("#run-summary", Static).update(summary)
        for sel in ("#run-sol", "#run-compare", "#run-table", "#run-log"):
            self.query_one(sel, Static).update("")
        badge = self.query_one("#run-validity", Static)
        badge.update("")
        badge.display = False
        self.query_one("#run-plot", RooflinePlot).show([], [])
        self.layout_plot()

    def refresh_badge(self) -> None:
        """The validity badge of the shown result, worded for the width it has."""
        result = self.shown_result
        if result is None or not (result.ok or result.timing is not None):
            return
        body = self.query_one("#run-body").size.width or self.size.width or 80
        self.query_one("#run-validity", Static).update(validity_badge(result.validity, max(20, body - 3)))

    def show_result(self, result: RunResult, previous: RunResult | None = None) -> None:
        """The report of ``result``: summary, validity badge, SOL bars, comparison with
        ``previous``, the table, and the roofline; or what a failed or cancelled run says."""
        self.shown_result = result
        width = max(40, self.query_one("#run-sol", Static).size.width or 60)
        badge = self.query_one("#run-validity", Static)
        plot = self.query_one("#run-plot", RooflinePlot)
        if result.ok or result.timing is not None:
            self.query_one("#run-summary", Static).update(summary_text(result))
            badge.display = True
            self.refresh_badge()
            valid = result.correctness is None or result.correctness.correct
            self.query_one("#run-sol", Static).update(render_sol_bars(result.sol, result.solexec_score, width, valid))
            self.query_one("#run-table", Static).update(result_table(
                result, wide=self.has_class("-wide"), width=self.query_one("#run-table", Static).size.width))
            self.query_one("#run-compare", Static).update(comparison_table(result, previous))
            plot.show(*roofline_data(result, self.app.effective_profile()))
        else:
            cancelled = result.status == RunStatus.cancelled
            rules = [] if cancelled else result.matched_rules or diagnostics.rules_for_text(result.error or "")
            self.query_one("#run-summary", Static).update(failure_text(result, rules))
            self.query_one("#run-sol", Static).update("")
            self.query_one("#run-table", Static).update("")
            self.query_one("#run-compare", Static).update("")
            badge.update("")
            badge.display = False
            plot.show([], [])
        self.layout_plot()
