"""Run: launch the task in the engine process, follow its stages, read the result and the SOL
bars, the peers in the same table, and the change against the previous run."""

from __future__ import annotations

import threading
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import ProgressBar, Static

from engine import (
    CockpitError,
    PlanError,
    RunResult,
    RunStatus,
    format_pipelining,
    plan,
    prepare,
    run_prepared,
    tuned_lookup,
)
from tui import diagnostics
from tui.screens.base import CockpitScreen
from tui.widgets.format import NA, fmt, fmt_delta_pct, fmt_ms
from tui.widgets.solbar import render_sol_bars
from tui.widgets.stages import StageTracker


def result_table(result: RunResult, wide: bool = False) -> Table:
    """Time, throughput and correctness of the kernel and its peers, one row each (p10 and p90
    columns only on wide terminals; the summary line above has the kernel's)."""
    t = Table(box=None, expand=False, pad_edge=False, header_style="bold")
    cols = ["implementation", "median"] + (["p10", "p90"] if wide else []) + ["TFLOP/s", "GB/s", "SOL %", "ok"]
    for col in cols:
        t.add_column(col, justify="left" if col == "implementation" else "right", no_wrap=True,
                     max_width=None if col != "implementation" or wide else 30, overflow="ellipsis")

    def row(label, tm, tflops, gbps, sol_pct, ok, style=""):
        times = [fmt_ms(tm.median_ms if tm else None)]
        if wide:
            times += [fmt_ms(tm.p10_ms if tm else None), fmt_ms(tm.p90_ms if tm else None)]
        t.add_row(label, *times, fmt(tflops, digits=1), fmt(gbps), fmt(sol_pct, digits=1), ok, style=style)

    sol = result.sol or {}
    ok = NA if result.correctness is None else ("yes" if result.correctness.correct else "NO")
    row("this kernel" + (" [SIM]" if result.simulated else ""), result.timing, sol.get("tflops"),
        sol.get("gbps"), sol.get("sol_pct"), ok, style="bold")
    for p in result.peers:
        label = p.label.replace(" [SIMULATED]", "") + (" *" if p.baseline else "")
        pok = NA if p.correct is None else ("yes" if p.correct else "NO")
        row(label, p.timing, p.tflops, p.gbps, p.sol_pct, p.error[:20] if p.error else pok)
    return t


def summary_text(result: RunResult) -> Text:
    """Status, T_SOL and bound, score, correctness: the few lines an operator reads first."""
    sol = result.sol or {}
    out = Text()
    style = "bold green" if result.ok else "bold red"
    out.append(f"{result.status.value.upper()}", style=style)
    if result.simulated:
        out.append("  SIMULATED", style="bold magenta")
    if result.run_id is not None:
        out.append(f"  run #{result.run_id}", style="dim")
    if result.timing is not None:
        tm = result.timing
        out.append(f"\nmedian {fmt_ms(tm.median_ms)}  p10 {fmt_ms(tm.p10_ms)}  p90 {fmt_ms(tm.p90_ms)}"
                   f"  {fmt(sol.get('tflops'), 'TFLOP/s', 1)}  {fmt(sol.get('gbps'), 'GB/s')}")
    out.append(f"\nT_SOL {fmt_ms(sol.get('t_sol_ms'))} ({sol.get('sol_bound', NA)}-bound)  "
               f"measured bound: {sol.get('bound') or NA}  "
               f"score {fmt(result.solexec_score, digits=3)}")
    if result.peers_caveat:
        out.append(f"\nnote: {result.peers_caveat}", style="dim")
    if result.timing_note:
        out.append(f"\ntiming: {result.timing_note}", style="dim")
    if result.sol_measured:
        sm = result.sol_measured
        out.append(f"\nvs measured ceilings ({result.measured_profile}): T_SOL {fmt_ms(sm.get('t_sol_ms'))}  "
                   f"SOL {fmt(sm.get('sol_pct'), '%', 1)}")
    c = result.correctness
    if c is not None:
        out.append(f"\nmax abs err {c.max_abs_err:.3g}  rel {c.normwise_rel_err:.3g}  "
                   f"NaN {c.nan_count}  Inf {c.inf_count}")
    e = result.energy
    if e:
        out.append("\n" + (f"energy not measured: {e['note']}" if "note" in e else
                           f"board {e['watts']:.0f} W  {e['mj_per_launch']:.3g} mJ/launch  "
                           f"{fmt(e.get('gflop_per_j'), 'GFLOP/J')}"))
    return out


def resolved_knobs(task: Any, profile: Any, tuned: Any = None) -> dict[str, Any]:
    """The task with the knobs that will run (the engine's plan: the task's own, tuned or the
    kernel's defaults for this profile and shape) and where they came from (``knobs_from``), so
    the cockpit shows what will run. ``tuned``: the tuning cache lookup the run will use."""
    d = task.model_dump(mode="json")
    if profile is None:
        return d
    try:
        p = plan(task, profile, tuned)
    except PlanError:
        return d
    d["block_size"] = p.task.block_size
    d["memory_pipelining"] = p.task.memory_pipelining
    d["schedule"] = dict(p.task.schedule)
    d["knobs_from"] = p.source_label
    return d


def knobs_of(task: dict[str, Any]) -> str:
    pl = task.get("memory_pipelining")
    sched = ",".join(f"{k}={v}" for k, v in (task.get("schedule") or {}).items())
    return (f"BLOCK_SIZE={task.get('block_size')} MEMORY_PIPELINING={format_pipelining(pl)} "
            + (f"schedule={sched} " if sched else "")
            + f"fusion={'on' if task.get('fusion') else 'off'}"
            + (f" (knobs: {task['knobs_from']})" if task.get("knobs_from") else ""))


def comparison_table(new: RunResult, old: RunResult | None) -> Table | Text:
    """The change from the previous run: knobs that differ and the headline figures."""
    if old is None:
        return Text("No previous run to compare with yet: change a knob (3 Tune) and run again.", style="dim")
    t = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
    t.add_column("vs previous", no_wrap=True)
    t.add_column(f"#{old.run_id}" if old.run_id else "previous", justify="right", no_wrap=True)
    t.add_column(f"#{new.run_id}" if new.run_id else "this", justify="right", no_wrap=True)
    t.add_column("change", no_wrap=True)
    for key, label in (("block_size", "BLOCK_SIZE"), ("memory_pipelining", "MEMORY_PIPELINING"),
                       ("fusion", "fusion"), ("dtype", "dtype")):
        a, b = old.task.get(key), new.task.get(key)
        t.add_row(label, str(a), str(b), "changed" if a != b else "", style="yellow" if a != b else "")
    om, nm = (old.timing.median_ms if old.timing else None), (new.timing.median_ms if new.timing else None)
    t.add_row("median", fmt_ms(om), fmt_ms(nm), fmt_delta_pct(nm, om))
    osol, nsol = (old.sol or {}).get("sol_pct"), (new.sol or {}).get("sol_pct")
    t.add_row("SOL %", fmt(osol, digits=1), fmt(nsol, digits=1), fmt_delta_pct(nsol, osol, lower_is_better=False))
    t.add_row("score", fmt(old.solexec_score, digits=3), fmt(new.solexec_score, digits=3),
              fmt_delta_pct(new.solexec_score, old.solexec_score, lower_is_better=False))
    oe, ne = (old.energy or {}).get("mj_per_launch"), (new.energy or {}).get("mj_per_launch")
    if oe is not None or ne is not None:  # at a power cap the joules per launch set the pace
        t.add_row("mJ/launch", fmt(oe, digits=1), fmt(ne, digits=1), fmt_delta_pct(ne, oe))
    return t


def failure_text(result: RunResult, rules: list[dict[str, Any]]) -> Text:
    out = Text()
    out.append(f"{result.status.value}: ", style="bold red")
    out.append((result.error or "").strip().splitlines()[0] if result.error else "no detail")
    if rules:
        for r in rules[:2]:
            out.append(f"\nrule {r.get('id')}: ", style="bold")
            out.append(str(r.get("title") or ""))
            if r.get("fix"):
                out.append(f"\n  fix: {r['fix']}", style="green")
        out.append("\nMore in 6 Diagnose.", style="dim")
    else:
        out.append("\nNo troubleshooting rule matched; the run log is below.", style="dim")
    return out


class RunScreen(CockpitScreen):
    """Runs are started here; the worker posts engine events back as messages."""

    MODE = "run"
    BINDINGS = [
        Binding("r", "start_run", "Run", tooltip="Run the task in the engine process"),
        Binding("x", "cancel_run", "Cancel", tooltip="Cancel the run in flight (kills the engine process)"),
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
        """A run ended, well or badly (bubbles to the app, which records it)."""

        def __init__(self, result: RunResult) -> None:
            super().__init__()
            self.result = result

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

    def compose_body(self) -> ComposeResult:
        with Vertical(id="run-top"):
            yield Static(id="run-task")
            yield Static(id="run-stages")
            yield ProgressBar(id="run-progress", total=100, show_eta=False)
        with VerticalScroll(id="run-body"):
            yield Static("Press r to run the task.", id="run-summary")
            with Horizontal(id="run-cols"):
                yield Static(id="run-sol", classes="panel")
                yield Static(id="run-compare", classes="panel")
            yield Static(id="run-table", classes="panel")
            yield Static(id="run-log", classes="log")

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
        self.query_one("#run-task", Static).update(text)
        self.query_one("#run-stages", Static).update(self.tracker.render())

    # --- actions -------------------------------------------------------------------------------
    def action_start_run(self) -> None:
        if self.app.run_active:
            self.notify("A run is already in flight; x cancels it.", severity="warning")
            return
        self.tracker.reset()
        self.log_lines = []
        self._cancel = threading.Event()
        self.query_one("#run-progress", ProgressBar).update(progress=0)
        self.query_one("#run-summary", Static).update(Text("Starting the engine process...", style="yellow"))
        self.query_one("#run-log", Static).update("")
        self.refresh_view()
        self._run(self.app.task_spec, self.app.profile_name, self.app.backend_choice, self._cancel, self.app.store)

    def action_cancel_run(self) -> None:
        if self.app.run_active:
            self._cancel.set()
            self.query_one("#run-summary", Static).update(Text("Cancelling...", style="yellow"))

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
                               task=prep.task.model_dump(mode="json"), profile=prep.profile.name,
                               error=f"the run could not complete: {msg}", error_kind="crashed")
        self.post_message(self.Finished(result))

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
        text = Text("Not run: ", style="bold red")
        text.append(message.message_text)
        if message.fix:
            text.append(f"\nfix: {message.fix}", style="green")
        for r in diagnostics.rules_for_text(message.message_text)[:2]:
            text.append(f"\nrule {r.get('id')}: {r.get('title')}", style="bold")
        self.query_one("#run-summary", Static).update(text)

    def on_run_screen_finished(self, message: Finished) -> None:
        result = message.result
        previous = self.app.last_result
        self.query_one("#run-progress", ProgressBar).update(progress=100)
        self.query_one("#run-stages", Static).update(self.tracker.render())
        width = max(40, self.query_one("#run-sol", Static).size.width or 60)
        if result.ok or result.timing is not None:
            self.query_one("#run-summary", Static).update(summary_text(result))
            valid = result.correctness is None or result.correctness.correct
            self.query_one("#run-sol", Static).update(render_sol_bars(result.sol, result.solexec_score, width, valid))
            self.query_one("#run-table", Static).update(result_table(result, wide=self.has_class("-wide")))
            self.query_one("#run-compare", Static).update(comparison_table(result, previous))
        else:
            rules = result.matched_rules or diagnostics.rules_for_text(result.error or "")
            self.query_one("#run-summary", Static).update(failure_text(result, rules))
            self.query_one("#run-sol", Static).update("")
            self.query_one("#run-table", Static).update("")
            self.query_one("#run-compare", Static).update("")
        log = self.log_lines[-8:]
        self.query_one("#run-log", Static).update(Text("\n".join(log), style="dim"))
