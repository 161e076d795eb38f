"""`tui history [--json] [--kernel K] [--profile P] [--limit N]`: stored runs, newest first."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from engine.cli.output import fmt, print_json, stdout_console
from engine.store import ResultStore


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="list stored runs")
    p.add_argument("--kernel")
    p.add_argument("--profile")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = ResultStore(args.store)
    recs = store.list(kernel=args.kernel, profile=args.profile, limit=args.limit)
    if args.json:
        print_json({"store": str(store.path), "runs": [r.to_dict() for r in recs]})
        return 0
    t = Table(title=f"runs in {store.path}")
    for col in ("id", "when", "kernel", "shape", "dtype", "knobs", "profile", "backend", "status", "median ms",
                "TFLOP/s", "SOL %", "ok"):
        t.add_column(col)
    for r in recs:
        knobs = f"{r.block_size}/{r.memory_pipelining or 'off'}/{'fused' if r.fusion else 'unfused'}"
        t.add_row(str(r.id), r.created_at.replace("T", " ")[:19], r.kernel,
                  "x".join(str(v) for v in r.shape.values()), r.dtype or "", knobs, r.profile,
                  "SIMULATED" if r.simulated else r.backend, r.status, fmt(r.median_ms, ".4f"), fmt(r.tflops, ".1f"),
                  fmt(r.sol_pct, ".1f"), "-" if r.correct is None else ("yes" if r.correct else "NO"))
    stdout_console().print(t)
    return 0
