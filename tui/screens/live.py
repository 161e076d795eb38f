"""Live: per-GPU gauges from the telemetry sampler's ring buffer, with sparklines of the last
minutes. The screen pulls the latest snapshot on a timer and pauses while hidden."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine import HARMFUL_THROTTLE_MASK, GpuTelemetry, Snapshot
from tui.screens.base import CockpitScreen
from tui.widgets.format import fmt, fmt_kbps, fmt_mib
from tui.widgets.gauge import render_gauge

REFRESH_S = 1.0


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


def render_gpu(gpu: GpuTelemetry, width: int, history: dict[str, list[float | None]] | None) -> Text:
    """One GPU's panel: a state line, the gauges, and the throttle reasons in words."""
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
    reasons = s.throttle_reasons
    harmful = bool((s.throttle_mask or 0) & HARMFUL_THROTTLE_MASK)
    out.append("\nThrottle   ", style="bold")
    if s.throttle_mask is None:
        out.append("N/A", style="dim")
    else:
        out.append(", ".join(reasons) if reasons else "none", style="bold red" if harmful else "green")
    return out


def render_snapshot(snap: Snapshot, width: int, histories: dict[int, dict[str, list[float | None]]]) -> Text:
    if not snap.gpus:
        text = Text("No GPU telemetry: ", style="bold red")
        text.append(snap.problem or "no GPU found")
        text.append("\nPress S to use the SIMULATED device.", style="dim")
        return text
    parts = [render_gpu(g, width, histories.get(g.index)) for g in snap.gpus]
    return Text("\n\n", no_wrap=True).join(parts)


class LiveScreen(CockpitScreen):
    """Pulls ``app.telemetry`` on a timer (attributes down); paused while another screen shows."""

    MODE = "live"
    BINDINGS = [
        Binding("p", "toggle_pause", "Pause", tooltip="Freeze or resume the live view"),
        Binding("s", "toggle_sparklines", "Sparklines", tooltip="Show or hide the sparklines"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.sparklines = True

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
        if self.sparklines:
            for g in snap.gpus:
                histories[g.index] = {m: tel.history(m, g.index) for _, m, *_ in gauge_specs(g.sample)} \
                    if g.sample is not None else {}
        width = max(40, self.query_one("#live-gpus", Static).size.width or self.size.width - 2)
        text = render_snapshot(snap, width, histories if self.sparklines else {})
        if self.paused:
            text.append("\n(paused: p resumes)", style="yellow")
        self.query_one("#live-gpus", Static).update(text)

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self._timer.pause()
        else:
            self._timer.resume()
        self.refresh_view()

    def action_toggle_sparklines(self) -> None:
        self.sparklines = not self.sparklines
        self.refresh_view()
