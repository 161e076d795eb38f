"""`tui soak --duration 30m [--verify-every 10s] [--max-drift 5%] [task flags] [--device N|all|0,2]`:
the kernel back to back for the duration, watched (``engine.soak``). Exit 0 when nothing failed and
the last minute is within ``--max-drift`` of the first; 1 on an error (silent data corruption, a CUDA
error, new ECC errors or Xids, a hang) or a drift above it; 2 for bad input."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tui.cli.interruptible import Stopped, run_cancellable
from tui.cli.output import print_json, stderr_console
from tui.cli.soak_args import check_fault, options_from_args
from tui.cli.soak_report import SoakProgress, print_summary, summary_json
from tui.cli.task_args import add_alias, add_task_args, ignored_flags, task_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("soak", help="run the kernel back to back for a duration: drift, throttling, silent data "
                                    "corruption, ECC and Xid errors (exit 1 on an error or drift)")
    p.add_argument("--duration", required=True, metavar="TIME", help="how long to soak: 30m, 90s, 1h30m, or seconds")
    p.add_argument("--verify-every", default="10s", metavar="TIME",
                   help="re-verify the output against the reference this often (default 10s)")
    p.add_argument("--max-drift", default="5%", metavar="PCT",
                   help="fail when the last minute's median launch time is this much above the first's (default 5%%)")
    add_task_args(p, soak=True)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--series", action="store_true", help="with --json: include every window of the series")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--no-store", action="store_true", help="do not save the soak and its series")
    faults = ["none", "corrupt", "throttle", "ecc"]
    p.add_argument("--fault", dest="sim_fault", choices=faults, default="none",
                   help="simulated device only: corrupt the output, throttle the clocks or raise the ECC count")
    p.add_argument("--fault-after", dest="sim_fault_after", metavar="TIME",
                   help="when the simulated fault starts (default: half-way)")
    add_alias(p, "--sim-fault", "sim_fault", choices=faults)
    add_alias(p, "--sim-fault-after", "sim_fault_after")
    from tui.cli.device_args import add_spread_arg

    add_spread_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine import ResultStore, device_count, is_multi, prepare, run_soak
    from engine import resolve_devices as resolve

    opts = options_from_args(args)
    for flag in ignored_flags(args):
        print(f"note: {flag} does not apply to a soak (it runs for --duration): ignored", file=sys.stderr)
    if is_multi(args.device):
        from tui.cli.every_gpu import run_soak_all

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
    progress = SoakProgress(opts)
    try:
        summary, _ = run_cancellable(lambda cancel: run_soak(prep, opts, on_event=progress, cancel=cancel,
                                                             store=store))
    except Stopped as stop:  # the soak stored itself as cancelled, with the series so far
        run_id = stop.result[0].run_id if stop.result else None
        if run_id is not None:
            try:
                print(f"the cancelled soak is stored as run {run_id}", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # the terminal is gone (SIGHUP)
                pass
        raise
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
