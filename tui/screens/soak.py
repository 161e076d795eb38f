"""Soak: the task on 3 Tune back to back for a duration (``engine.run_soak``, in a worker), its
series plotted as it arrives (launch time and SM clock over time, failed re-verifications marked),
then the summary: drift first minute against last, throttled share, errors and the rule naming them.
Reached with key 9 or the command palette; quitting the cockpit cancels a soak in flight."""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Label, Static

from engine import CockpitError, SoakEvent, SoakOptions, parse_duration, parse_percent, prepare, run_soak
from tui.screens.base import CockpitScreen
from tui.widgets.soak_plot import SoakPlot

REDRAW_S = 0.5


def summary_text(s: Any) -> Text:
    """The summary for people (``engine.soak.SoakSummary``)."""
    style = {"ok": "bold green", "drift": "bold red", "error": "bold red", "cancelled": "bold yellow"}[s.status]
    out = Text()
    if s.simulated:
        out.append(" SIMULATED ", style="reverse bold yellow")
        out.append(" ")
    out.append(f"{s.status.upper()}", style=style)
    out.append(f"  GPU {s.device}: {s.elapsed_s:.1f} of {s.duration_s:g} s, {s.windows} windows, {s.launches} launches")
    if s.drift_pct is not None:
        out.append(f"\nfirst {s.span_s:.0f} s {s.first_ms:.4f} ms, last {s.span_s:.0f} s {s.last_ms:.4f} ms: "
                   f"drift {s.drift_pct:+.2f} % (threshold {s.max_drift_pct:g} %)",
                   style="red" if s.drift_exceeded else "")
    if s.throttled_share_pct is not None:
        out.append(f"\nthrottled {s.throttled_share_pct:.1f} % of the time"
                   + (f" ({', '.join(s.throttle_reasons)})" if s.throttle_reasons else ""))
    out.append(f"\nverifications {s.verifications}, failed {s.verify_failures}")
    if s.findings:
        out.append(f"\ntelemetry rules: {', '.join(s.findings)}", style="yellow")
    if s.error:
        out.append(f"\n{s.error}", style="red")
        if s.rule:
            out.append(f"\nrule {s.rule.get('id')}: {s.rule.get('title')}. Fix: {s.rule.get('fix')}", style="yellow")
    if s.run_id is not None:
        out.append(f"\nstored as run {s.run_id}", style="dim")
    return out


class SoakScreen(CockpitScreen):
    """A form (duration, re-verify interval, drift threshold), the live plot and the summary."""

    MODE = "soak"
    DEFAULT_CSS = """
    #soak-form { height: 3; }
    #soak-form Label { padding: 1 1 0 1; }
    #soak-form Input { width: 12; }
    #soak-plot { height: 1fr; min-height: 8; }
    #soak-summary { height: auto; }
    """
    BINDINGS = [
        Binding("r", "start", "Start soak", tooltip="Soak the task on 3 Tune for the duration"),
        Binding("x", "cancel", "Cancel soak", tooltip="Stop the soak in flight"),
    ]

    class Started(Message):
        def __init__(self, notices: list[str]) -> None:
            super().__init__()
            self.notices = notices

    class Window(Message):
        def __init__(self, window: dict[str, Any]) -> None:
            super().__init__()
            self.window = window

    class Finished(Message):
        def __init__(self, summary: Any = None, error: str | None = None) -> None:
            super().__init__()
            self.summary, self.error = summary, error

    def __init__(self) -> None:
        super().__init__()
        self.series: list[dict[str, Any]] = []
        """The windows received so far (attributes down: the plot reads them on a timer)."""
        self.summary: Any = None
        self.running = False
        self._cancel: threading.Event | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="soak-body"):
            with Horizontal(id="soak-form"):
                yield Label("duration")
                yield Input("60s", id="soak-duration")
                yield Label("re-verify every")
                yield Input("10s", id="soak-verify")
                yield Label("max drift")
                yield Input("5%", id="soak-drift")
            yield Static("r starts a soak of the task on 3 Tune; x cancels it (esc leaves a field).", id="soak-status")
            yield SoakPlot(id="soak-plot")
            yield Static(id="soak-summary")

    def on_mount(self) -> None:
        super().on_mount()
        self._timer = self.set_interval(REDRAW_S, self._redraw)

    def on_screen_suspend(self) -> None:
        self._timer.pause()

    def on_screen_resume(self, event) -> None:
        super().on_screen_resume(event)
        self._timer.resume()

    def _redraw(self) -> None:
        self.query_one(SoakPlot).show(self.series)

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#soak-status", Static).update(Text(text, style=style))

    def options(self) -> SoakOptions:
        """The form as SoakOptions; CockpitError naming the field when one is wrong."""
        return SoakOptions(
            duration_s=parse_duration(self.query_one("#soak-duration", Input).value, "duration"),
            verify_every_s=parse_duration(self.query_one("#soak-verify", Input).value, "re-verify every"),
            max_drift_pct=parse_percent(self.query_one("#soak-drift", Input).value, "max drift"))

    def action_start(self) -> None:
        if self.running:
            self._status("a soak is already running (x cancels it)", "yellow")
            return
        problem = self.app.form_error()
        if problem:
            self._status(problem, "red")
            return
        try:
            opts = self.options()
        except CockpitError as exc:
            self._status(f"{exc.message}" + (f". Fix: {exc.fix}" if exc.fix else ""), "red")
            return
        self.series, self.summary, self.running = [], None, True
        self.query_one("#soak-summary", Static).update("")
        self._cancel = threading.Event()
        self.app.work_started("soak", self._cancel)
        self._status(f"preparing a soak of {opts.duration_s:g} s...")
        self._soak(self.app.task_spec, self.app.profile_name, self.app.backend_choice, opts, self._cancel,
                   self.app.store)

    def action_cancel(self) -> None:
        if self._cancel is not None and self.running:
            self._cancel.set()
            self._status("cancelling...", "yellow")

    @work(thread=True, exclusive=True, exit_on_error=False, group="soak")
    def _soak(self, task: Any, profile_name: str | None, choice: Any, opts: SoakOptions, cancel: threading.Event,
              store: Any) -> None:
        try:
            prep = prepare(task, profile_name, profiles=self.app.profiles, backend_choice=choice)
        except CockpitError as exc:
            self.post_message(self.Finished(error=exc.message + (f". Fix: {exc.fix}" if exc.fix else "")))
            return
        self.post_message(self.Started(prep.notices))

        def seen(ev: Any) -> None:
            if isinstance(ev, SoakEvent) and ev.window:
                self.post_message(self.Window(ev.window))

        try:
            summary, _ = run_soak(prep, opts, on_event=seen, cancel=cancel, store=store)
        except Exception as exc:  # the cockpit survives and says what happened
            self.post_message(self.Finished(error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(self.Finished(summary))

    def on_soak_screen_started(self, message: Started) -> None:
        self._status("soaking" + (f" ({'; '.join(message.notices)})" if message.notices else ""))

    def on_soak_screen_window(self, message: Window) -> None:
        self.series.append(message.window)
        w = message.window
        self._status(f"soaking: {w['t_s']:.1f} s, {w.get('ms', 0):.4f} ms per launch")

    def on_soak_screen_finished(self, message: Finished) -> None:
        self.running = False
        if message.error:
            self.app.work_ended("soak", "failed", message.error[:80])
        else:
            s = message.summary
            self.app.work_ended("soak", s.status, f"run #{s.run_id}" if s.run_id is not None else "")
        if message.error:
            self._status(message.error, "red")
            return
        self.summary = message.summary
        self.series = list(message.summary.series) or self.series
        self._redraw()
        self._status("soak finished" if message.summary.ok else "soak failed",
                     "green" if message.summary.ok else "red")
        self.query_one("#soak-summary", Static).update(summary_text(message.summary))
