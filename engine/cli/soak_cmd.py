"""`tui soak --duration 30m [--verify-every 10s] [--max-drift 5%] [task flags] [--device N|all|0,2]`:
the kernel back to back for the duration, watched (``engine.soak``). Exit 0 when nothing failed and
the last minute is within ``--max-drift`` of the first; 1 on an error (silent data corruption, a CUDA
error, new ECC errors or Xids, a hang) or a drift above it; 2 for bad input."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from engine.cli.bench import add_task_args, task_from_args
from engine.cli.output import fmt, print_json, stderr_console, stdout_console
from engine.events import Event, LogEvent, SoakEvent, StageEvent


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("soak", help="run the kernel back to back for a duration: drift, throttling, silent data "
                                    "corruption, ECC and Xid errors (exit 1 on an error or drift)")
    p.add_argument("--duration", required=True, metavar="TIME", help="how long to soak: 30m, 90s, 1h30m, or seconds")
    p.add_argument("--verify-every", default="10s", metavar="TIME",
                   help="re-verify the output against the reference this often (default 10s)")
    p.add_argument("--max-drift", default="5%", metavar="PCT",
                   help="fail when the last minute's median launch time is this much above the first's (default 5%%)")
    add_task_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--series", action="store_true", help="with --json: include every window of the series")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--no-store", action="store_true", help="do not save the soak and its series")
    p.add_argument("--sim-fault", choices=["none", "corrupt", "throttle", "ecc"], default="none",
                   help="simulated device only: corrupt the output, throttle the clocks or raise the ECC count")
    p.add_argument("--sim-fault-after", metavar="TIME", help="when the simulated fault starts (default: half-way)")
    from engine.multi_device import add_spread_arg

    add_spread_arg(p)
    p.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> Any:
    """SoakOptions from the flags; InputError naming the flag for 0, negative or unreadable values."""
    from engine.soak import SoakOptions, parse_duration, parse_percent

    return SoakOptions(duration_s=parse_duration(args.duration, "--duration"),
                       verify_every_s=parse_duration(args.verify_every, "--verify-every"),
                       max_drift_pct=parse_percent(args.max_drift, "--max-drift"), sim_fault=args.sim_fault,
                       sim_fault_after_s=None if args.sim_fault_after is None
                       else parse_duration(args.sim_fault_after, "--sim-fault-after"))


def check_fault(prep: Any, opts: Any) -> None:
    from engine.errors import InputError

    if opts.sim_fault != "none" and not prep.simulated:
        raise InputError(f"--sim-fault {opts.sim_fault}: only the simulated device injects soak faults",
                         fix="add --backend sim, or leave --sim-fault out")


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


def run(args: argparse.Namespace) -> int:
    from engine.multi_device import device_count, is_multi, resolve
    from engine.runner import prepare
    from engine.soak import run_soak
    from engine.store import ResultStore

    opts = options_from_args(args)
    if is_multi(args.device):
        from engine.cli.every_gpu import run_soak_all

        return run_soak_all(args, opts)
    task = task_from_args(args)
    store = None if args.no_store else ResultStore(args.store)
    if store is not None:
        store.check()
    prep = prepare(task, args.profile, store=store or ResultStore(args.store))
    resolve(task.device, device_count(prep.backend), prep.simulated)  # a GPU that does not exist: exit 2
    check_fault(prep, opts)
    err = stderr_console()
    for n in prep.notices:
        err.print(f"[yellow]{n}[/]")
    t0 = time.monotonic()
    summary, _ = run_soak(prep, opts, on_event=SoakProgress(opts), store=store)
    if args.json:
        out = summary_json(summary, args.series)
        out["notices"] = prep.notices
        out["wall_s"] = time.monotonic() - t0
        print_json(out)
    else:
        print_summary(summary)
    if summary.status == "cancelled":
        print("soak cancelled", file=sys.stderr)
    return 0 if summary.ok else 1
