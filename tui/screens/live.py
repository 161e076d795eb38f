"""Live: per-GPU gauges from the telemetry sampler's ring buffer, with sparklines over a time
axis, and the processes on each GPU. The screen pulls the latest snapshot on a timer and pauses
while hidden; the process list is read in a worker, one read at a time."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

import engine
from engine import HARMFUL_THROTTLE_MASK, GpuTelemetry, Snapshot
from tui.screens.base import CockpitScreen
from tui.widgets.fit_table import matches
from tui.widgets.format import fmt, fmt_kbps, fmt_mib
from tui.widgets.gauge import render_gauge, time_scale_line
from tui.widgets.processes import PROCESS_SORTS, render_processes, simulated_processes

REFRESH_S = 1.0
ProcessSource = Callable[[int], list[dict[str, Any]] | None]
"""Returns the processes on GPU ``index`` (``engine.gpu_processes``' rows); None: not reported."""
NO_PROCESS_LIST = "this engine cannot list GPU processes (it has no gpu_processes)"


def engine_process_source() -> ProcessSource | None:
    """``engine.gpu_processes`` where the engine offers it; None before it does."""
    return getattr(engine, "gpu_processes", None)


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (containers without a passwd entry)
        return str(os.getuid()) if hasattr(os, "getuid") else "?"


def gauge_specs(s: Any) -> list[tuple[str, str, float | None, float | None, str]]:
    """(label, metric, value, maximum, value text) for every gauge of one sample."""
    pcie_max = 64e6  # KB/s: PCIe 5.0 x16 per direction, for the bar's scale only
    return [
        ("GPU util", "gpu_util_pct", s.gpu_util_pct, 100.0, fmt(s.gpu_util_pct, "%")),
        ("Mem util", "mem_util_pct", s.mem_util_pct, 100.0, fmt(s.mem_util_pct, "%")),
        ("Mem used", "mem_used_mib", s.mem_used_mib, s.mem_total_mib,
         f"{fmt_mib(s.mem_used_mib)}/{fmt_mib(s.mem_total_mib)}"),
        ("SM clock", "sm_clock_mhz", s.sm_clock_mhz, s.sm_clock_max_mhz, fmt(s.sm_clock_mhz, "MHz")),
        ("Mem clock", "mem_clock_mhz", s.mem_clock_mhz, s.mem_clock_mhz, fmt(s.mem_clock_mhz, "MHz")),
        ("Power", "power_w", s.power_w, s.power_limit_w,
         f"{fmt(s.power_w, 'W')}/{fmt(s.power_limit_w, 'W')}" if s.power_w is not None else "N/A"),
        ("Temp", "temperature_c", s.temperature_c, s.temperature_slowdown_c or 90.0, fmt(s.temperature_c, "°C")),
        ("PCIe TX", "pcie_tx_kbps", s.pcie_tx_kbps, pcie_max, fmt_kbps(s.pcie_tx_kbps)),
        ("PCIe RX", "pcie_rx_kbps", s.pcie_rx_kbps, pcie_max, fmt_kbps(s.pcie_rx_kbps)),
        ("SM active", "sm_activity_pct", s.sm_activity_pct, 100.0, fmt(s.sm_activity_pct, "%", 1)),
        ("Tensor", "tensor_activity_pct", s.tensor_activity_pct, 100.0, fmt(s.tensor_activity_pct, "%", 1)),
        ("DRAM B/W", "dram_bw_util_pct", s.dram_bw_util_pct, 100.0, fmt(s.dram_bw_util_pct, "%", 1)),
    ]


def render_gpu(gpu: GpuTelemetry, width: int, history: dict[str, list[float | None]] | None,
               scale: tuple[float, int] | tuple[float, int, int] | None = None) -> Text:
    """One GPU's panel: a state line, the gauges, the sparklines' time scale (``scale``: the
    sampler's interval in seconds and the samples it keeps) and the throttle reasons in words."""
    out = Text(no_wrap=True, overflow="crop")
    head = f"GPU {gpu.index}"
    if gpu.simulated:
        head += " SIMULATED"
    out.append(head, style="bold magenta" if gpu.simulated else "bold")
    if gpu.state == "waiting":
        out.append("  waiting for the first sample", style="dim")
        return out
    if gpu.state != "ok":
        out.append(f"  NOT ANSWERING: {gpu.error} (showing the last good sample)", style="bold red")
    s = gpu.sample
    if s is None:
        return out
    gpm = s.sm_activity_pct is not None
    out.append("" if gpm else "  (GPM N/A on this GPU)", style="dim")
    for label, metric, value, maximum, text in gauge_specs(s):
        out.append("\n")
        hist = history.get(metric) if history is not None else None
        out.append_text(render_gauge(label, value, maximum, text, width, history=hist))
    if history is not None and scale is not None:
        axis = time_scale_line(width, scale[0], scale[1], averaged=scale[2] if len(scale) > 2 else 1)
        if axis.plain.strip():
            out.append("\n")
            out.append_text(axis)
    reasons = s.throttle_reasons
    harmful = bool((s.throttle_mask or 0) & HARMFUL_THROTTLE_MASK)
    out.append("\nThrottle   ", style="bold")
    if s.throttle_mask is None:
        out.append("N/A", style="dim")
    else:
        out.append(", ".join(reasons) if reasons else "none", style="bold red" if harmful else "green")
    return out


SPANS = (1, 2, 4, 10, 20)
"""Samples a sparkline cell averages, ``+`` and ``-`` step through them: at 0.5 s a sample and
~60 cells, 30 s, 1 min, 2 min, 5 min and 10 min (the ring keeps 5 min)."""


def downsample(values: list[float | None], step: int) -> list[float | None]:
    """``values`` averaged ``step`` at a time, aligned on the newest (a cell's None: no sample in it
    could be read)."""
    if step <= 1:
        return list(values)
    out: list[float | None] = []
    end = len(values)
    while end > 0:
        chunk = [v for v in values[max(0, end - step):end] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
        end -= step
    return out[::-1]


def render_snapshot(snap: Snapshot, width: int, histories: dict[int, dict[str, list[float | None]]],
                    scale: tuple[float, int] | tuple[float, int, int] | None = None,
                    processes: dict[int, Text] | None = None) -> Text:
    """Every GPU's panel (``render_gpu``), each followed by its process list where given."""
    if not snap.gpus:
        text = Text("No GPU telemetry: ", style="bold red")
        text.append(snap.problem or "no GPU found")
        text.append("\nPress S to use the SIMULATED device.", style="dim")
        return text
    parts = []
    for g in snap.gpus:
        part = render_gpu(g, width, histories.get(g.index), scale)
        if processes is not None and g.index in processes:
            part.append("\n")
            part.append_text(processes[g.index])
        parts.append(part)
    return Text("\n\n", no_wrap=True).join(parts)


def render_overview(snap: Snapshot) -> Text:
    """Every GPU on one row each (utilisation, SM clock, power, temperature, throttle), so that a GPU
    unlike its neighbours stands out before the per-GPU panels; shown when there are several."""
    out = Text(f"{'GPU':<5}{'state':<14}{'util':>6}{'SM MHz':>8}{'power':>9}{'temp':>7}  throttle", style="bold")
    for g in snap.gpus:
        s = g.sample
        out.append(f"\n{g.index:<5}{g.state[:13]:<14}")
        if s is None:
            continue
        harmful = bool((s.throttle_mask or 0) & HARMFUL_THROTTLE_MASK)
        out.append(f"{fmt(s.gpu_util_pct, '%'):>6}{fmt(s.sm_clock_mhz):>8}{fmt(s.power_w, 'W'):>9}"
                   f"{fmt(s.temperature_c, 'C'):>7}  ")
        out.append(", ".join(s.throttle_reasons) or ("N/A" if s.throttle_mask is None else "none"),
                   style="bold red" if harmful else "")
    return out


class LiveScreen(CockpitScreen):
    """Pulls ``app.telemetry`` on a timer (attributes down); paused while another screen shows."""

    MODE = "live"
    FILTERABLE = True
    BINDINGS = [
        Binding("p", "toggle_pause", "Pause", tooltip="Freeze or resume the live view"),
        Binding("s", "toggle_sparklines", "Sparklines", tooltip="Show or hide the sparklines"),
        Binding("o", "process_sort", "Sort procs", show=False,
                tooltip="Sort the processes by GPU memory, PID, user or command (cycles)"),
        Binding("x", "stop_run", "Stop run", tooltip="Stop this cockpit's run in flight (kills its engine process)"),
        Binding("plus", "span(1)", "Longer", key_display="+",
                tooltip="Longer history in the sparklines: each cell the mean of more samples (up to 5 min)"),
        Binding("minus", "span(-1)", "Shorter", key_display="-", show=False,
                tooltip="Shorter history in the sparklines (down to one sample a cell)"),
    ]

    class ProcessesRead(Message):
        """The processes of each GPU (None: not readable, with ``error``), from the worker."""

        def __init__(self, rows: dict[int, list[dict[str, Any]] | None], error: str = "") -> None:
            super().__init__()
            self.rows, self.error = rows, error

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.sparklines = True
        self.process_order = 0
        """Index into ``PROCESS_SORTS`` (``o``)."""
        self.span = 0
        """Index into ``SPANS``: samples a sparkline cell averages (``+``/``-``)."""
        self.process_source: ProcessSource | None = None
        """Where the process list comes from; None: ``engine.gpu_processes`` on a GPU, the simulated
        run on the simulated device. Tests set a fake."""
        self.process_rows: dict[int, list[dict[str, Any]] | None] = {}
        """The last process list read, per GPU index."""
        self.process_note = ""
        self._reading = False

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="live-body"):
            yield Static(id="live-gpus")

    def on_mount(self) -> None:
        super().on_mount()
        self._timer = self.set_interval(REFRESH_S, self.refresh_view, pause=False)

    def on_screen_suspend(self) -> None:
        self._timer.pause()

    def on_screen_resume(self, event) -> None:
        super().on_screen_resume(event)
        if not self.paused:
            self._timer.resume()

    def refresh_view(self) -> None:
        tel = self.app.telemetry
        snap = tel.latest()
        histories: dict[int, dict[str, list[float | None]]] = {}
        step = SPANS[self.span]
        if self.sparklines:
            for g in snap.gpus:
                histories[g.index] = {m: downsample(tel.history(m, g.index), step)
                                      for _, m, *_ in gauge_specs(g.sample)} if g.sample is not None else {}
        self._update_processes(snap)
        width = max(40, self.query_one("#live-gpus", Static).size.width or self.size.width - 2)
        procs = {g.index: render_processes(self._filtered(self.process_rows[g.index]), width, self._note(),
                                           os.getpid(), PROCESS_SORTS[self.process_order])
                 if g.index in self.process_rows else Text("Processes  reading...", style="dim")
                 for g in snap.gpus}
        text = render_snapshot(snap, width, histories if self.sparklines else {},
                               (tel.interval_s * step, tel.maxlen // step, step), procs)
        if len(snap.gpus) > 1:
            text = Text("\n\n", no_wrap=True).join([render_overview(snap), text])
        if self.paused:
            text.append("\n(paused: p resumes)", style="yellow")
        self.query_one("#live-gpus", Static).update(text)

    def _filtered(self, rows: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The processes ``/`` keeps: those whose pid, user or command holds the text."""
        if rows is None or not self.filter_text:
            return rows
        return [r for r in rows if matches([str(r.get(k) or "") for k in ("pid", "user", "command", "name")],
                                           self.filter_text)]

    def _note(self) -> str:
        shown = f"filter /{self.filter_text}" if self.filter_text else ""
        return " · ".join(n for n in (self.process_note, shown) if n)

    def apply_filter(self) -> None:
        self.refresh_view()

    def _update_processes(self, snap: Snapshot) -> None:
        """The simulated run's process at once (no GPU to ask); else a read in the worker, when
        the previous one has finished (the list shows on the next refresh)."""
        indices = [g.index for g in snap.gpus]
        source = self.process_source
        if source is None and snap.simulated:
            task = self.app.task_spec.label()
            rows = simulated_processes(getattr(self.app.telemetry, "sim_source", None), task, current_user())
            self.process_rows = dict.fromkeys(indices, rows)
            self.process_note = "SIMULATED"
            return
        source = source or engine_process_source()
        if source is None:
            self.process_rows, self.process_note = dict.fromkeys(indices), NO_PROCESS_LIST
            return
        if not self._reading and indices:
            self._reading = True
            self._read_processes(source, indices)

    @work(thread=True, exclusive=True, exit_on_error=False, group="live-processes")
    def _read_processes(self, source: ProcessSource, indices: list[int]) -> None:
        rows: dict[int, list[dict[str, Any]] | None] = {}
        error = ""
        for index in indices:
            try:
                got = source(index)
                rows[index] = None if got is None else list(got)
                if got is None:
                    error = "the driver does not report this GPU's processes"
            except Exception as exc:  # a driver that stops answering: the gauges say so too
                rows[index], error = None, f"{type(exc).__name__}: {exc}"
        self.post_message(self.ProcessesRead(rows, error))

    def on_live_screen_processes_read(self, message: ProcessesRead) -> None:
        self._reading = False
        self.process_rows, self.process_note = message.rows, message.error

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self._timer.pause()
        else:
            self._timer.resume()
        self.refresh_view()

    def action_process_sort(self) -> None:
        self.process_order = (self.process_order + 1) % len(PROCESS_SORTS)
        self.refresh_view()

    def action_stop_run(self) -> None:
        """``x``: the run in flight stops, as ``x`` on 4 Run stops it (its engine process is killed)."""
        cancel = self.app.work.get("run")
        if cancel is None:
            self.notify("No run of this cockpit in flight.", severity="warning")
            return
        cancel.set()
        self.notify("Stopping the run...", title="Live")

    def action_span(self, delta: int) -> None:
        self.span = max(0, min(len(SPANS) - 1, self.span + delta))
        self.refresh_view()

    def action_toggle_sparklines(self) -> None:
        self.sparklines = not self.sparklines
        self.refresh_view()
