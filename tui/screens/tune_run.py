"""A tune of the task in flight: every candidate in a sortable table (knobs, time, SOL %, status or
the reason it was skipped), a plot of time per candidate against the default's and the peers'
times, and a key that applies the best knobs to the task. Pushed from the Tune form (``t``); it
opens idle, so the budget and the regime can be set first, and ``r`` starts the tune (as ``r``
starts a run and a soak)."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Select, Static

from engine import CockpitError, TaskSpec, TuneResult, tune
from tui.screens.base import CockpitScreen
from tui.widgets.fit_table import fill_table, matches
from tui.widgets.tune_plot import TunePlot
from tui.widgets.tune_table import (
    COLUMN_SORT,
    FILTERS,
    FIT_COLUMNS,
    SORTS,
    best_entry,
    progress_text,
    row_cells,
    row_detail,
    sort_key,
    trial_label,
)
from tui.widgets.tune_table import keep as keep_entry

REGIMES = ("burst", "sustained")
BUDGET_RANGE_S = (1, 3600)
REFRESH_S = 0.25
"""The table, the plot and the progress line are redrawn at most this often while trials land."""


class TuneRunScreen(CockpitScreen):
    """Runs ``tune`` in a thread worker for the task it was opened with; the worker posts each trial
    as a message and the screen redraws from its own copy at most every ``REFRESH_S``."""

    MODE = "tune"
    HELP_TITLE = "Tuning"
    AUTO_FOCUS = "#tr-table"
    FILTERABLE = True
    BINDINGS = [
        Binding("x", "cancel_tune", "Cancel", tooltip="Stop the tune now: what was measured stays listed and stored"),
        Binding("a", "apply_best", "Apply best",
                tooltip="Set the task's BLOCK_SIZE, MEMORY_PIPELINING and schedule to the best candidate's"),
        Binding("s", "cycle_sort", "Sort", tooltip="Sort the table by time, knobs, status or timing order (cycles)"),
        Binding("f", "cycle_filter", "Filter",
                tooltip="Show every candidate, the correct ones, the failed or the skipped (cycles)"),
        Binding("r", "restart", "Start tune", tooltip="Start a tune with the budget and regime above (again: a new one)"),
        Binding("escape", "back", "Back (cancels)",
                tooltip="Leave the field being typed in; else back to the task form (a running tune is cancelled)"),
    ]

    class TrialPosted(Message):
        """A trial started, finished or a peer was timed (from the worker thread; plain data)."""

        def __init__(self, run_id: int, state: str, trial: dict[str, Any], done: int, total: int,
                     step: tuple[str, int, int] | None = None) -> None:
            super().__init__()
            self.run_id, self.state, self.trial, self.done, self.total = run_id, state, trial, done, total
            self.step = step
            """The step of the search and its count (``TrialEvent.step``); None outside the steps."""

        def can_replace(self, message: Message) -> bool:
            """A 'start' only names the candidate in flight: any later trial message supersedes it."""
            return self.state == "start" and isinstance(message, TuneRunScreen.TrialPosted)

    class Finished(Message):
        """The tune returned (done, cancelled, crashed or nothing correct): its result."""

        def __init__(self, run_id: int, result: TuneResult) -> None:
            super().__init__()
            self.run_id, self.result = run_id, result

    class Rejected(Message):
        """The task could not be tuned at all (the engine's message and fix)."""

        def __init__(self, run_id: int, message: str, fix: str | None) -> None:
            super().__init__()
            self.run_id, self.message_text, self.fix = run_id, message, fix

    def __init__(self, task: TaskSpec, budget_s: int = 60, regime: str = "burst") -> None:
        """``budget_s`` and ``regime``: the controls' first values (the view dismisses with the ones
        it last tuned with, for the next view)."""
        super().__init__()
        self.tune_task = task
        """The task this view tunes (validated by the form)."""
        self.entries: list[dict[str, Any]] = []
        """Every trial so far: the engine's trial dict plus ``seq`` (arrival) and ``n`` (timing order)."""
        self.peers: dict[str, dict[str, Any]] = {}
        self.state = "idle"
        self.result: TuneResult | None = None
        self.sort = SORTS[0]
        self.filter = FILTERS[0]
        self.done = self.total = 0
        self.step: tuple[str, int, int] | None = None
        """The search's step in flight with its own count (the progress line's denominator)."""
        self.in_flight: str | None = None
        self.budget_s: float = budget_s
        self.regime = regime
        self.started_at = 0.0
        self._stopped_at: float | None = None
        self._run_id = 0
        self._cancel = threading.Event()
        self._dirty = False
        self._problem: Text | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="tr-body"):
            yield Static(id="tr-head")
            with Horizontal(id="tr-controls"):
                yield Label("budget s ")
                yield Input(f"{self.budget_s:g}", id="tr-budget", type="integer", compact=True,
                            tooltip=f"seconds of wall time, {BUDGET_RANGE_S[0]}..{BUDGET_RANGE_S[1]}")
                yield Label(" regime ")
                yield Select([(r, r) for r in REGIMES], value=self.regime, id="tr-regime", allow_blank=False,
                             compact=True)
                yield Static(id="tr-sort")
            yield Static(id="tr-progress")
            yield Static(id="tr-row")
            with Container(id="tr-panes"):
                yield DataTable(id="tr-table", cursor_type="row")
                yield TunePlot(id="tr-plot")

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(REFRESH_S, self._tick)
        self.refresh_view()

    def on_unmount(self) -> None:
        self._cancel.set()  # the view is gone (back, or the cockpit quit): so is its tune
        if "tune" in self.app.work:
            self.app.work_ended("tune", "cancelled")

    # --- the view from the screen's own state (UI thread only) ----------------------------------
    def refresh_view(self) -> None:
        self._dirty = True
        self._tick()

    def _tick(self) -> None:
        if self.app.screen is not self:
            return
        if self.state == "running" or self._dirty:
            progress = self.query_one("#tr-progress", Static)
            progress.set_class(self._problem is not None, "-problem")
            progress.update(self._progress())
        if self._dirty:
            self._dirty = False
            self.query_one("#tr-head", Static).update(self._head())
            skipped = sum(1 for e in self.entries if e.get("status") == "skipped")
            self.query_one("#tr-sort", Static).update(
                Text(f"  sort: {self.sort} (s) · show: {self.filter} (f)"
                     + (f" · {skipped} skipped" if skipped else ""), style="dim"))
            self._fill_table()
            self._fill_plot()

    def _head(self) -> Text:
        prof = self.app.effective_profile()
        choice = self.app.backend_choice
        out = Text(self.tune_task.label(), style="bold")
        out.append(f" · profile {prof.name if prof else '?'} · backend {choice.name if choice else 'none'}")
        if (self.result.simulated if self.result is not None else self.app.simulated):
            out.append(" ")
            out.append(" SIMULATED ", style="bold reverse magenta")
        return out

    def _progress(self) -> Text:
        if self._problem is not None:
            return self._problem
        if self.state == "idle":
            return Text("Not started: r starts a tune with the budget and regime above (tab to change them, "
                        "esc to leave a field).", style="yellow")
        elapsed = (self.result.elapsed_s if self.result is not None
                   else (self._stopped_at or time.monotonic()) - self.started_at)
        return progress_text(self.state, self.step, self.done, self.total, best_entry(self.entries), elapsed,
                             self.budget_s, self.in_flight)

    def _fill_table(self) -> None:
        table = self.query_one("#tr-table", DataTable)
        keep = None  # a cursor on the first row follows the top (the best, sorted by time)
        if table.row_count and table.cursor_row > 0:
            keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        best = best_entry(self.entries)
        shown = [e for e in sorted(self.entries, key=sort_key(self.sort)) if keep_entry(self.filter, e)]
        cells = [row_cells(e, e is best) for e in shown]
        kept = [(e, c) for e, c in zip(shown, cells, strict=True) if matches(c, self.filter_text)]
        width = table.size.width or (66 if self.has_class("-wide") else self.size.width) or 80
        fill_table(table, FIT_COLUMNS, [c for _, c in kept], width, [str(e["seq"]) for e, _ in kept])
        if keep is not None and keep in {str(e["seq"]) for e, _ in kept}:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        self._show_row()

    def apply_filter(self) -> None:
        self._dirty = True
        self._tick()

    def on_resize(self, event) -> None:
        super().on_resize(event)
        self._dirty = True  # the table's columns are laid out for its width

    def _show_row(self) -> None:
        """The highlighted candidate in full under the progress line (the table cuts long knobs)."""
        table = self.query_one("#tr-table", DataTable)
        entry = None
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            entry = next((e for e in self.entries if str(e["seq"]) == key), None)
        self.query_one("#tr-row", Static).update(row_detail(entry) if entry is not None else "")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_row()

    def _fill_plot(self) -> None:
        timed = [e for e in self.entries if e.get("status") == "ok" and e.get("median_ms") is not None]
        best = best_entry(self.entries)
        lines = [(f"default {trial_label(e)}", e["median_ms"]) for e in timed if e.get("default")]
        lines += [(name, p["median_ms"]) for name, p in self.peers.items() if p.get("median_ms")]
        self.query_one("#tr-plot", TunePlot).show(
            [(e["n"], e["median_ms"]) for e in timed], None if best is None else (best["n"], best["median_ms"]),
            lines)

    # --- starting and stopping ------------------------------------------------------------------
    def _read_controls(self) -> tuple[float, str] | None:
        text = self.query_one("#tr-budget", Input).value.strip()
        lo, hi = BUDGET_RANGE_S
        try:
            budget = int(text)
        except ValueError:
            budget = 0
        if not lo <= budget <= hi:
            self.notify(f"budget={text!r}: seconds of wall time, {lo}..{hi}", title="Not started",
                        severity="error")
            return None
        return float(budget), str(self.query_one("#tr-regime", Select).value)

    def start(self) -> None:
        """Start a tune with the controls' budget and regime (attributes down to the worker)."""
        if self.state == "running":
            self.notify("A tune is already running; x cancels it.", severity="warning")
            return
        if self.app.run_active:
            self.notify("A run is in flight on 4 Run; tune when it has finished.", severity="warning")
            return
        controls = self._read_controls()
        if controls is None:
            return
        self.budget_s, self.regime = controls
        self._run_id += 1
        self._cancel = threading.Event()
        self.entries, self.peers, self.result, self._problem = [], {}, None, None
        self.done, self.total, self.step, self.in_flight = 0, 0, None, None
        self.state, self.started_at, self._stopped_at = "running", time.monotonic(), None
        self.refresh_view()
        app = self.app
        app.work_started("tune", self._cancel)
        self._tune(self._run_id, self.tune_task, app.profile_name, app.profiles, app.backend_choice, app.store,
                   self.budget_s, self.regime, self._cancel)

    @work(thread=True, exclusive=True, exit_on_error=False, group="tune")
    def _tune(self, run_id: int, task: TaskSpec, profile_name: str | None, profiles: Any, choice: Any,
              store: Any, budget_s: float, regime: str, cancel: threading.Event) -> None:
        def on_event(ev: Any) -> None:
            if getattr(ev, "kind", None) == "trial":
                step = (ev.step, ev.step_done, ev.step_total) if ev.step else None
                self.post_message(self.TrialPosted(run_id, ev.state, dict(ev.trial), ev.done, ev.total, step))

        try:
            result = tune(task, profile_name, budget_s=budget_s, regime=regime, store=store, on_event=on_event,
                          cancel=cancel, profiles=profiles, backend_choice=choice, client="cockpit")
        except CockpitError as exc:
            self.post_message(self.Rejected(run_id, exc.message, exc.fix))
            return
        except Exception as exc:  # an engine bug must not end the cockpit
            self.post_message(self.Rejected(run_id, f"internal error: {type(exc).__name__}: {exc}", None))
            return
        self.post_message(self.Finished(run_id, result))

    # --- messages from the worker ---------------------------------------------------------------
    def on_tune_run_screen_trial_posted(self, message: TrialPosted) -> None:
        if message.run_id != self._run_id:
            return
        trial = message.trial
        if message.state == "peer":
            self.peers[str(trial.get("name"))] = trial
        elif message.state == "start":
            self.in_flight = trial_label(trial)
        else:
            timed = trial.get("status") != "skipped"
            n = sum(1 for e in self.entries if e.get("n") is not None) + 1 if timed else None
            self.entries.append({**trial, "seq": len(self.entries), "n": n})
            self.in_flight = None
        self.done, self.total = max(self.done, message.done), max(self.total, message.total)
        if message.step is not None:
            self.step = message.step
        self._dirty = True

    def on_tune_run_screen_finished(self, message: Finished) -> None:
        if message.run_id != self._run_id:
            return
        res = message.result
        best = res.best
        self.app.work_ended("tune", {"ok": "done"}.get(res.status, res.status.replace("_", " ")),
                            f"best {best.median_ms:.4f} ms ({best.key})" if best is not None and best.median_ms
                            else "no correct candidate")
        self.result = res
        self.entries = [{**t.to_dict(), "seq": i, "n": i + 1} for i, t in enumerate(res.trials)]
        self.entries += [{**t.to_dict(), "seq": len(self.entries) + i, "n": None} for i, t in enumerate(res.skipped)]
        self.peers.update(res.peers)
        self.done, self.total = len(res.trials), max(res.total, self.total)
        self.state = {"ok": "done", "cancelled": "cancelled"}.get(res.status, res.status.replace("_", " "))
        self.in_flight = None
        self.refresh_view()
        notes = [n for n in res.notes if not n.startswith("SIMULATED")]
        if notes:
            self.notify("\n".join(notes[-3:]), title="Tune notes", severity="warning", timeout=10)

    def on_tune_run_screen_rejected(self, message: Rejected) -> None:
        if message.run_id != self._run_id:
            return
        self.app.work_ended("tune", "not tuned", message.message_text[:80])
        self.state = "not tuned"
        text = Text("Not tuned: ", style="bold red")
        text.append(message.message_text)
        if message.fix:
            text.append(f"\nfix: {message.fix}", style="green")
        self._problem = text
        self.refresh_view()  # shown in full in the view: no toast repeating it

    # --- keys ---------------------------------------------------------------------------------
    def action_cancel_tune(self) -> None:
        if self.state != "running":
            self.notify("No tune is running.", severity="warning")
            return
        self._cancel.set()
        self.app.work_ended("tune", "cancelled")
        self.state, self._stopped_at = "cancelled", time.monotonic()
        self.in_flight = None
        self.refresh_view()

    def action_restart(self) -> None:
        self.start()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "tr-budget":
            self.query_one("#tr-table", DataTable).focus()
            self.start()

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh_view()

    def action_cycle_filter(self) -> None:
        self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]
        self.refresh_view()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort = COLUMN_SORT.get(str(event.column_key.value), self.sort)
        self.refresh_view()

    def action_apply_best(self) -> None:
        best = best_entry(self.entries)
        if best is None:
            self.notify("No correct candidate yet.", severity="warning")
            return
        current = self.app.task_spec
        tuned = self.tune_task
        if (current.kernel, current.shape, current.dtype, current.fusion) != (
                tuned.kernel, tuned.shape, tuned.dtype, tuned.fusion):
            self.notify("The task changed since this tune (kernel, shape, dtype or fusion): not applied.",
                        severity="error")
            return
        schedule = {**tuned.schedule, **(best.get("schedule") or {})}
        data = {**current.model_dump(mode="json", exclude_none=True), "block_size": best["block_size"],
                "memory_pipelining": best["memory_pipelining"], "schedule": schedule}
        self.app.task_spec = TaskSpec.model_validate(data)
        dumped = self.app.task_spec.model_dump(mode="json", exclude_none=True)
        held = {k for k, v in tuned.model_dump(mode="json", exclude_none=True).items() if v not in ({}, None)}
        self.app.applied_best = {k: dumped.get(k) for k in ("block_size", "memory_pipelining", "schedule")
                                 if k not in held}  # the knobs the user fixed before the tune stay theirs
        so_far = " (best so far)" if self.state == "running" else ""
        self.notify(f"{trial_label(best)}{so_far}: {best['median_ms']:.4f} ms. 4 Run runs it; the form shows it.",
                    title="Best knobs applied to the task")

    def action_back(self) -> None:
        if isinstance(self.focused, (Input, Select)):
            self.query_one("#tr-table", DataTable).focus()
            return
        if self.state == "running":
            self._cancel.set()
            self.notify("Tune cancelled; what it measured is stored.", title="Tune")
        self.dismiss((int(self.budget_s), self.regime))
