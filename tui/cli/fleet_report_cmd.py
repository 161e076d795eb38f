"""`tui fleet-report`: what a fleet job runs on each host. The environment checks, then the seed
bench on every visible GPU (or ``--device``), written as one JSON report (``engine.fleet_report``)
that ``tui fleet`` reads. Exit 0 when every check passes and every bench is ok, 1 otherwise, 3 when
no GPU answers (the report is written in every case, so the fleet view shows the host), 2 for bad
input."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tui.cli.output import fmt, print_json, stderr_console, stdout_console
from tui.cli.task_args import add_alias, add_task_args, task_from_args


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet-report", help="checks + the seed bench on each GPU, as one JSON report per host "
                                            "(what the Kubernetes and Slurm exports run)")
    add_task_args(p)  # --device: one GPU, a list (0,2,5) or all (the default here)
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", dest="out", type=Path, metavar="FILE",
                     help="write the report to FILE (atomically)")
    out.add_argument("--output-dir", dest="out_dir", type=Path, metavar="DIR",
                     help="write DIR/<host>.json (DIR/<host>.gpu<N>.json with --device N)")
    add_alias(out, "--out", "out", type=Path)
    add_alias(out, "--out-dir", "out_dir", type=Path)
    p.add_argument("--host", help="host name in the report (default: $NODE_NAME, $SLURMD_NODENAME, the host name)")
    p.add_argument("--no-checks", dest="checks", action="store_false", help="skip the environment checks")
    p.add_argument("--only", action="append", metavar="ID", help="run only these checks (as tui check --only)")
    p.add_argument("--every", type=_positive_seconds, metavar="SECONDS",
                   help="write a fresh report every SECONDS until stopped (a DaemonSet's pods)")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.set_defaults(func=run)


def _target(args: argparse.Namespace, host: str) -> Path | None:
    from engine import safe_file_name

    if getattr(args, "out", None) is not None:
        return args.out
    if getattr(args, "out_dir", None) is not None:
        suffix = f".gpu{args.device}" if isinstance(args.device, int) else ""
        return args.out_dir / f"{safe_file_name(host)}{suffix}.json"
    return None


def _print_human(report, path: Path | None) -> None:
    from rich.table import Table

    con = stdout_console()
    if report.simulated:
        con.print("[reverse bold yellow] SIMULATED [/] benches ran on the simulated device, not on this host's GPUs")
    failed = report.failed_checks
    summary = (report.check or {}).get("summary")
    con.print(f"[bold]{report.host}[/]  backend {report.backend}  checks: "
              + ("skipped" if summary is None else
                 f"{summary.get('pass', 0)} pass, {summary.get('warn', 0)} warn, {summary.get('fail', 0)} fail")
              + (f" ([red]{', '.join(failed)}[/])" if failed else ""))
    t = Table(title="seed bench per GPU")
    for col in ("GPU", "name", "status", "median ms", "SOL %"):
        t.add_column(col, justify="left" if col in ("GPU", "name", "status") else "right")
    for gpu, bench in zip(report.gpus, report.benches, strict=False):
        r = bench.result or {}
        status = bench.error or str(r.get("status", "-"))
        t.add_row(str(gpu.index), gpu.name or "-", status if bench.ok else f"[red]{status}[/]",
                  fmt((r.get("time_ms") or {}).get("median"), ".4f"), fmt(bench.sol_pct, ".1f"))
    con.print(t)
    if path is not None:
        con.print(f"report written to {path}", highlight=False)


def _one(args: argparse.Namespace, task) -> int:
    from engine import collect_fleet_report as collect
    from engine import fleet_report_host as default_host
    from engine import write_fleet_report as write_report
    from tui.cli.bench import Progress

    host = args.host or default_host()
    with Progress() as progress:
        report = collect(task, args.profile, args.device, checks=args.checks,
                         only=args.only, host=host, on_event=progress)
    path = _target(args, host)
    if path is not None:
        write_report(report, path)
    if args.json:
        print_json(report.to_json())
    else:
        _print_human(report, path)
    if report.error:
        stderr_console().print(f"[red]no GPU benched:[/] {report.error}", highlight=False)
        return 3
    return 0 if report.ok else 1


def run(args: argparse.Namespace) -> int:
    from engine import InputError

    if args.host is not None and not args.host.strip():
        raise InputError("--host='': empty", fix="give the node's name, or leave --host out")
    if args.every is not None and _target(args, "") is None:
        raise InputError("--every needs --output or --output-dir: a report that goes nowhere helps nobody",
                         fix="add --output-dir DIR (the folder tui fleet reads)")
    # A bad flag is exit 2 before anything runs; --device (one, a list or all) is collect's.
    task = task_from_args(argparse.Namespace(**{**vars(args), "device": None}))
    from tui.cli.known_names import known_kernel, known_profile

    if not task.kernel_file:
        known_kernel(task.kernel)  # not one failed bench per GPU naming it
    if args.profile:
        known_profile(args.profile)
    if args.every is None:
        return _one(args, task)
    while True:
        code = _one(args, task)
        stderr_console().print(f"next report in {args.every:g} s (exit status of this one: {code})")
        sys.stderr.flush()
        time.sleep(args.every)
