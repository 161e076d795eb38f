"""What `tui soak` shows: progress lines on stderr while it runs (prefixed with the GPU where several
run), then the summary as a table of lines or as JSON; for one GPU and for every GPU."""

from __future__ import annotations

import threading
from typing import Any

from engine import Event, LogEvent, SoakEvent, StageEvent
from tui.cli.output import fmt, stderr_console, stdout_console


class SoakProgress:
    """Stages and a line every ``every_s`` of soak on stderr (prefixed with the GPU when several run)."""

    def __init__(self, opts: Any, prefix: str = "") -> None:
        self.con = stderr_console()
        self.prefix = prefix
        self.every_s = max(5.0, opts.duration_s / 20)
        self.next_s = self.every_s
        self.lock = threading.Lock()

    def __call__(self, ev: Event) -> None:
        line = None
        if isinstance(ev, StageEvent) and ev.state in ("done", "fail") and ev.stage != "timed":
            line = f"{ev.stage}: {ev.state} {ev.detail}".rstrip()
        elif isinstance(ev, StageEvent) and ev.state == "fail":
            line = f"soak failed: {ev.detail}"
        elif isinstance(ev, LogEvent) and ev.level != "info":
            line = f"{ev.level}: {ev.message}"
        elif isinstance(ev, SoakEvent) and ev.window and ev.window["t_s"] >= self.next_s:
            w = ev.window
            self.next_s = w["t_s"] + self.every_s
            line = (f"{w['t_s']:7.1f} s  {fmt(w.get('ms'), '.4f')} ms  SM {fmt(w.get('sm_clock_mhz'), '.0f')} MHz  "
                    f"{fmt(w.get('power_w'), '.0f')} W  {fmt(w.get('temperature_c'), '.0f')} C"
                    + ("  THROTTLED" if (w.get("throttle_mask") or 0) & 0xEC else ""))
        if line:
            with self.lock:
                self.con.print(self.prefix + line, markup=False, highlight=False)


def summary_json(s: Any, series: bool = False) -> dict[str, Any]:
    out = s.model_dump(mode="json")
    if series:
        out["series"] = s.series
    return out


def print_summary(s: Any) -> None:
    con = stdout_console()
    if s.simulated:
        con.print("[reverse bold yellow] SIMULATED [/] the series comes from the simulated device, not from a GPU")
    verdict = {"ok": "[green]OK[/]", "drift": "[red]DRIFT[/]", "error": "[red]ERROR[/]",
               "cancelled": "[yellow]CANCELLED[/]"}[s.status]
    con.print(f"[bold]soak GPU {s.device}[/] {s.gpu_name or ''}: {verdict}  {s.elapsed_s:.1f} of {s.duration_s:g} s, "
              f"{s.windows} windows, {s.launches} launches")
    if s.first_ms is not None:
        con.print(f"median launch time: first {s.span_s:.0f} s {s.first_ms:.4f} ms, last {s.span_s:.0f} s "
                  f"{s.last_ms:.4f} ms: drift {s.drift_pct:+.2f} % (threshold {s.max_drift_pct:g} %)")
    con.print(f"throttled {fmt(s.throttled_share_pct, '.1f')} % of the time"
              + (f" ({', '.join(s.throttle_reasons)})" if s.throttle_reasons else "")
              + f"; SM clock {fmt(s.sm_clock_mhz_min, '.0f')}-{fmt(s.sm_clock_mhz_max, '.0f')} MHz, "
              f"max {fmt(s.temperature_c_max, '.0f')} C, mean {fmt(s.power_w_mean, '.0f')} W")
    con.print(f"verifications: {s.verifications}, failed: {s.verify_failures}; counters (after - before): "
              + (", ".join(f"{k} {'n/a' if v is None else v}" for k, v in s.counters_delta.items()) or "n/a"))
    if s.findings:
        con.print(f"[yellow]telemetry rules:[/] {', '.join(s.findings)}")
    if s.error:
        con.print(f"[red]error:[/] {s.error}", highlight=False)
        if s.rule:
            con.print(f"  [yellow]rule {s.rule.get('id')}[/]: {s.rule.get('title')} -- fix: {s.rule.get('fix')}",
                      highlight=False)
    if s.run_id is not None:
        con.print(f"stored as run {s.run_id} (the series in the store's soak table)")
