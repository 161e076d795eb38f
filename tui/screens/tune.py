"""Tune: the task as a form, validated as you type with the engine's own rules, the predicted
T_SOL and bound for the shape before anything runs, save/load as a TOML task file, and ``t`` to
tune the task's knobs (``tui.screens.tune_run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.widgets import Input, Label, Select, Static

from engine import (
    CockpitError,
    DType,
    PlanError,
    TaskSpec,
    format_pipelining,
    kernel_default_shape,
    kernel_dims,
    kernel_names,
    normalize_shape,
    parse_shape_text,
    plan,
    resolve_task,
    save_task,
)
from tui.screens.base import CockpitScreen
from tui.screens.tune_run import TuneRunScreen
from tui.widgets.format import fmt_ms

FAULTS = ("none", "compile_error", "launch_failure", "illegal_address", "hang", "nan")


def shape_text(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())


def schedule_text(schedule: dict[str, Any]) -> str:
    """{'consumers': 'pingpong', 'cluster': 2} -> 'consumers=pingpong,cluster=2' (as the field reads it)."""
    return ",".join(f"{k}={v}" for k, v in schedule.items())


def validate_form(values: dict[str, Any], profile: Any,
                  tuned: Any = None) -> tuple[TaskSpec | None, list[str], dict[str, Any]]:
    """(task or None, problems naming field and limit, prediction) for the form's raw values: the
    engine's own plan (``engine.plan``), as a run would resolve the task."""
    data = {k: v for k, v in values.items() if v not in ("", None)}
    try:
        task = TaskSpec.model_validate(data)
    except ValidationError as exc:
        probs = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            probs.append(f"{field}={err.get('input')!r}: {err['msg'].removeprefix('Value error, ')}")
        return None, probs, {}
    if profile is None:
        return task, ["no profile: pick one on 2 Profile to check the limits"], {}
    try:
        p = plan(task, profile, tuned)
    except PlanError as exc:
        return None, [str(exc)], {}
    task = task.model_copy(update={"shape": p.task.shape})
    prediction = {"t_sol_ms": p.t_sol_ms, "bound": p.sol_bound, "flops": p.flops, "bytes": p.bytes,
                  "block_size_options": list(p.block_size_options),
                  "pipelining_options": list(p.pipelining_options),
                  "defaults": p.default_knobs, "profile": profile.name,
                  "knobs_from": p.source_label, "schedule": dict(p.schedule),
                  "schedule_options": [(k.name, k.values) for k in p.schedule_options],
                  "user_knobs": p.info.get("knobs") if p.task.kernel_file else None}
    return (None if p.violations else task), [str(v) for v in p.violations], prediction


class TuneScreen(CockpitScreen):
    """Edits ``app.task_spec``: a valid form replaces the task the Run screen will launch."""

    MODE = "tune"
    BINDINGS = [
        Binding("t", "tune", "Tune", tooltip="Search the knobs for the fastest correct ones (the form must be valid)"),
        Binding("ctrl+s", "save", "Save", tooltip="Save the task as a TOML file at the path below"),
        Binding("ctrl+o", "load", "Load", tooltip="Load a TOML task file from the path below"),
        Binding("d", "reset", "Defaults", tooltip="Reset the form to the default task"),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="tune-body"):
            with Grid(id="tune-form"):
                yield Label("kernel")
                yield Select([(k, k) for k in kernel_names()], id="f-kernel", allow_blank=False, compact=True)
                yield Label("shape")
                yield Input(id="f-shape", compact=True, placeholder="m=8192,n=2560,k=2560")
                yield Label("dtype")
                yield Select([(d.value, d.value) for d in DType], id="f-dtype", allow_blank=False,
                             compact=True)
                yield Label("BLOCK_SIZE")
                yield Input(id="f-block_size", compact=True, placeholder="kernel default")
                yield Label("MEMORY_PIPE.")
                yield Input(id="f-memory_pipelining", compact=True, placeholder="off or stages >= 2")
                yield Label("schedule")
                yield Input(id="f-schedule", compact=True, placeholder="planner's; e.g. consumers=pingpong,cluster=2")
                yield Label("fusion")
                yield Select([("on", True), ("off", False)], id="f-fusion", allow_blank=False, compact=True)
                yield Label("warm-up")
                yield Input(id="f-warmup", compact=True, type="integer")
                yield Label("iterations")
                yield Input(id="f-iterations", compact=True, type="integer")
                yield Label("energy s")
                yield Input(id="f-energy_s", compact=True, type="number",
                            placeholder="0 = off; >= 0.5 s of back-to-back launches (NVML)")
                yield Label("rest s")
                yield Input(id="f-rest_s", compact=True, type="number",
                            placeholder="idle before ours and each peer; 0 = none, 3 = fair peers")
                yield Label("fault")
                yield Select([(f, f) for f in FAULTS], id="f-fault", allow_blank=False, compact=True)
                yield Label("task file")
                yield Input(id="f-path", compact=True, value="task.toml")
            yield Static(id="tune-status")
            yield Static(id="tune-prediction")

    def __init__(self) -> None:
        super().__init__()
        self._shown: TaskSpec | None = None
        """The task the form last put in ``app.task_spec`` (another screen may have changed it since)."""
        self.tune_settings: tuple[int, str] = (60, "burst")
        """Budget (s) and regime the last tuning view ran with: the next one starts with them."""

    def on_mount(self) -> None:
        super().on_mount()
        self.fill(self.app.task_spec)

    def refresh_view(self) -> None:
        """The form again, or the task another screen set (applied tune, applied fix) put in it."""
        if self.app.task_spec != self._shown:
            self.fill(self.app.task_spec)
        else:
            self.validate()

    def fill(self, task: TaskSpec) -> None:
        """Put a task into the form (attributes down)."""
        with self.prevent(Input.Changed, Select.Changed):
            self.query_one("#f-kernel", Select).value = task.kernel
            self.query_one("#f-shape", Input).value = shape_text(task.shape)
            self.query_one("#f-dtype", Select).value = task.dtype.value
            self.query_one("#f-block_size", Input).value = str(task.block_size or "")
            pl = task.memory_pipelining
            self.query_one("#f-memory_pipelining", Input).value = "" if pl is None else format_pipelining(pl)
            self.query_one("#f-schedule", Input).value = schedule_text(task.schedule)
            self.query_one("#f-fusion", Select).value = task.fusion
            self.query_one("#f-warmup", Input).value = str(task.warmup)
            self.query_one("#f-iterations", Input).value = str(task.iterations)
            self.query_one("#f-energy_s", Input).value = f"{task.energy_s:g}"
            self.query_one("#f-rest_s", Input).value = f"{task.rest_s:g}"
            self.query_one("#f-fault", Select).value = task.fault.value
        self.validate()

    def form_values(self) -> dict[str, Any]:
        base = self.app.task_spec.model_dump(mode="json")
        for key in ("block_size", "memory_pipelining", "schedule"):
            base.pop(key, None)
        base.update({
            "kernel": self.query_one("#f-kernel", Select).value,
            "shape": self.query_one("#f-shape", Input).value,
            "dtype": self.query_one("#f-dtype", Select).value,
            "block_size": self.query_one("#f-block_size", Input).value.strip() or None,
            "memory_pipelining": self.query_one("#f-memory_pipelining", Input).value.strip() or None,
            "schedule": self.query_one("#f-schedule", Input).value.strip() or None,
            "fusion": self.query_one("#f-fusion", Select).value,
            "warmup": self.query_one("#f-warmup", Input).value.strip(),
            "iterations": self.query_one("#f-iterations", Input).value.strip(),
            "energy_s": self.query_one("#f-energy_s", Input).value.strip() or 0,
            "rest_s": self.query_one("#f-rest_s", Input).value.strip() or 0,
            "fault": self.query_one("#f-fault", Select).value,
        })
        return base

    def validate(self) -> TaskSpec | None:
        task, problems, pred = validate_form(self.form_values(), self.app.effective_profile())
        status = self.query_one("#tune-status", Static)
        if problems:
            text = Text("✗ ", style="bold red")
            text.append("\n  ".join(problems), style="red")
            if task is None:
                text.append("\n  4 Run and t refuse this task until it is fixed.", style="dim")
            status.update(text)
        else:
            status.update(Text("✓ valid: r on 4 Run launches this task; t tunes its knobs", style="green"))
        if task is not None:
            self.app.task_spec = task
        else:
            self.app.form_problems = problems
        self._shown = self.app.task_spec
        self.query_one("#tune-prediction", Static).update(self.prediction_text(pred))
        self._schedule_hint(pred)
        return task

    def _schedule_hint(self, pred: dict[str, Any]) -> None:
        """The schedule field's placeholder names this kernel's schedule knobs, or says it has none
        (it showed a GEMM's for every kernel)."""
        field = self.query_one("#f-schedule", Input)
        if not pred:
            return
        options = pred.get("schedule_options") or []
        if options:
            field.placeholder = "planner's; e.g. " + ",".join(f"{n}={vals[0]}" for n, vals in options[:2])
        else:
            field.placeholder = f"none: {self.query_one('#f-kernel', Select).value} has no schedule knobs"

    @staticmethod
    def prediction_text(pred: dict[str, Any]) -> Text:
        if not pred:
            return Text("")
        out = Text()
        out.append("predicted T_SOL ", style="bold")
        out.append(f"{fmt_ms(pred['t_sol_ms'])} ({pred['bound']}-bound on {pred['profile']}), "
                   f"{pred['flops'] / 1e9:,.1f} GFLOP, {pred['bytes'] / 1e6:,.1f} MB")
        pls = ", ".join(format_pipelining(p) for p in pred["pipelining_options"])
        out.append(f"\nBLOCK_SIZE fits: {', '.join(pred['block_size_options'])}", style="dim")
        out.append(f"\nMEMORY_PIPELINING fits: {pls}", style="dim")
        if pred.get("user_knobs"):  # a user kernel: its #defines as they run, and its other knobs
            out.append("\n#define " + " ".join(f"{k}={v}" for k, v in pred["user_knobs"].items()), style="dim")
            if pred["schedule_options"]:
                out.append("; schedule: " + "; ".join(f"{n} = {' | '.join(map(str, vals))}"
                                                      for n, vals in pred["schedule_options"]), style="dim")
        return out

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "f-path":
            self.validate()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "f-kernel":
            self._shape_for_kernel(str(event.value))
        self.validate()

    def _shape_for_kernel(self, kernel: str) -> None:
        """A kernel picked whose dimensions the shape field does not have (the GEMM's m, n, k for
        add_rmsnorm's m, n) gets that kernel's default shape; a shape that fits is kept."""
        shape_in = self.query_one("#f-shape", Input)
        try:
            dims, default = kernel_dims(kernel), kernel_default_shape(kernel)
        except KeyError:
            return
        try:
            normalize_shape(kernel, parse_shape_text(shape_in.value))
        except (ValueError, TypeError):
            if default:
                with self.prevent(Input.Changed):
                    shape_in.value = shape_text(default)
                self.notify(f"{kernel} takes {', '.join(dims)}: shape set to its default "
                            f"{shape_text(default)}", title="Shape")

    def _path(self) -> Path:
        return Path(self.query_one("#f-path", Input).value.strip() or "task.toml").expanduser()

    def action_save(self) -> None:
        task = self.validate()
        if task is None:
            self.notify("The task has problems (see above); fix them before saving.", severity="error")
            return
        try:
            save_task(task, self._path())
        except OSError as exc:
            self.notify(f"Cannot save {self._path()}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"Saved {self._path()}", title="Task")

    def action_load(self) -> None:
        try:
            task = resolve_task(self._path(), env={}, overrides={"backend": self.app.task_spec.backend.value})
        except CockpitError as exc:
            msg = exc.message + (f"\nfix: {exc.fix}" if exc.fix else "")
            self.query_one("#tune-status", Static).update(Text(f"✗ {msg}", style="red"))
            self.notify(msg, title="Task file not loaded", severity="error", timeout=10)
            return
        self.fill(task)
        self.notify(f"Loaded {self._path()}", title="Task")

    def action_reset(self) -> None:
        self.fill(TaskSpec(backend=self.app.task_spec.backend))

    def action_tune(self) -> None:
        """Open the tuning view for the form's task; an invalid form never starts one."""
        task = self.validate()
        if task is None:
            self.notify("The task has problems (see above); fix them before tuning.", title="Not tuned",
                        severity="error")
            return
        self.app.push_screen(TuneRunScreen(task, *self.tune_settings), callback=self._tuned_with)

    def _tuned_with(self, settings: tuple[int, str] | None) -> None:
        if settings:
            self.tune_settings = settings
