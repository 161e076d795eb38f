"""`tui batch FILE.toml [--json]`: run a list of tasks, each under its own timeout; a failed task is
retried once and the batch stops after three failed tasks in a row. Exit 0 when every task ran
ok, 1 when one failed or was skipped, 2 for a bad file (nothing runs then)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from tui.cli.output import fmt, print_json, stderr_console, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("batch", help="run the tasks of a TOML file in turn: timeouts, one retry, stop after 3 failures")
    p.add_argument("file", type=Path, metavar="FILE.toml", help="[[task]] tables with task keys and timeout_s")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--no-store", action="store_true", help="do not save the results")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine import BATCH_MAX_ATTEMPTS as MAX_ATTEMPTS
    from engine import BATCH_STOP_AFTER as STOP_AFTER
    from engine import CockpitError, ResultStore, load_batch, prepare, run_batch, run_prepared
    from engine import batch_stopped_early as stopped_early

    tasks = load_batch(args.file)
    store = None if args.no_store else ResultStore(args.store)
    if store is not None:
        store.check()
    lookup = store or ResultStore(args.store)
    preps: dict[int, Any] = {}
    for t in tasks:  # plan every task before the first runs: a bad one is exit 2 with nothing run
        try:
            preps[t.index] = prepare(t.task, t.profile, store=None if t.untuned else lookup)
        except CockpitError as exc:
            exc.message = f"batch file {args.file}: task {t.index} ({t.name}): {exc.message}"
            raise
    err = stderr_console()
    for t in tasks:
        for n in preps[t.index].notices:
            err.print(Text(f"task {t.index}: {n}", style="yellow"))

    def run_one(t: Any) -> Any:
        return run_prepared(preps[t.index], store=store)

    def said(o: Any, a: Any) -> None:
        n = len(o.attempts)
        line = f"task {o.task.index}/{len(tasks)} {o.task.name}: attempt {n}: {a.status}"
        if a.status != "ok":
            line += f" ({(a.error or '').splitlines()[0][:120] if a.error else 'no error text'})"
            line += "; retrying" if n < MAX_ATTEMPTS else ""
        err.print(Text(line))

    outcomes = run_batch(tasks, run_one, on_attempt=said)
    summary = {s: sum(o.status == s for o in outcomes) for s in ("ok", "failed", "skipped")}
    stopped = stopped_early(outcomes)
    failed = summary["failed"] + summary["skipped"] > 0
    if args.json:
        print_json({"status": "stopped" if stopped else ("failed" if failed else "ok"), "file": str(args.file),
                    "summary": summary, "stopped_after_failures": STOP_AFTER if stopped else None,
                    "tasks": [o.to_json() for o in outcomes]})
        return 1 if failed else 0
    tab = Table(title=Text(f"batch {args.file}"))
    for col in ("#", "task", "status", "tries", "median ms", "SOL %", "runs", "last error"):
        tab.add_column(col, overflow="fold")
    for o in outcomes:
        last = o.attempts[-1] if o.attempts else None
        style = {"ok": "green", "failed": "bold red", "skipped": "dim"}[o.status]
        sim = " SIMULATED" if last is not None and last.simulated else ""
        tab.add_row(str(o.task.index), Text(o.task.name), Text(o.status + sim, style=style), str(len(o.attempts)),
                  fmt(last.median_ms if last else None, ".4f"), fmt(last.sol_pct if last else None, ".1f"),
                  ", ".join(f"#{a.run_id}" for a in o.attempts if a.run_id is not None) or "-",
                  Text((last.error or "").splitlines()[0][:80] if last and last.status != "ok" and last.error else ""))
    con = stdout_console()
    con.print(tab)
    con.print(Text(f"{summary['ok']} ok, {summary['failed']} failed, {summary['skipped']} skipped"
                   + (f": stopped after {STOP_AFTER} failed tasks in a row" if stopped else "")))
    return 1 if failed else 0
