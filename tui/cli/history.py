"""`tui history [--json] [--kernel K] [--profile P] [--limit N]`: stored runs, newest first."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table
from rich.text import Text

from engine import ResultStore, baseline_marks
from tui.cli.output import fmt, print_json, stdout_console

LIMIT_MAX = 1_000_000
"""The most runs one listing shows: SQLite's LIMIT is a 64-bit integer, and no table needs more."""


def limit_arg(text: str) -> int:
    """--limit's value: an integer in 1..LIMIT_MAX (argparse turns the error into exit 2 naming
    the flag)."""
    text = text.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {LIMIT_MAX}, got {text[:40]!r}")
    if len(digits) > len(str(LIMIT_MAX)) or not 1 <= int(text) <= LIMIT_MAX:
        shown = text if len(text) <= 40 else f"an integer of {len(digits)} digits"
        raise argparse.ArgumentTypeError(f"must be from 1 to {LIMIT_MAX}, got {shown}")
    return int(text)


def filter_arg(text: str) -> str:
    """--kernel and --profile: a name; an empty one would silently list every run."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give a name, or leave the flag out to list every run")
    return text.strip()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="list stored runs")
    p.add_argument("--kernel", type=filter_arg, help="only runs of this kernel")
    p.add_argument("--profile", type=filter_arg, help="only runs against this profile")
    p.add_argument("--limit", type=limit_arg, default=30, help=f"newest N runs, 1..{LIMIT_MAX} (default 30)")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = ResultStore(args.store)
    recs = store.list(kernel=args.kernel, profile=args.profile, limit=args.limit)
    marks = baseline_marks(store, recs)  # run id -> its median over its baseline's (tui baseline)
    if args.json:
        print_json({"store": str(store.path), "runs": [r.to_dict() | {
            "baseline_ratio": marks.get(r.id, {}).get("ratio"), "regression": marks.get(r.id, {}).get("regression")}
            for r in recs]})
        return 0
    t = Table(title=Text(f"runs in {store.path}"))  # Text: a path or a stored '[...]' is not rich markup
    for col in ("id", "when", "kernel", "shape", "dtype", "knobs", "profile", "backend", "status", "median ms",
                "TFLOP/s", "SOL %", "ok"):
        t.add_column(col)
    for r in recs:
        knobs = f"{r.block_size}/{r.memory_pipelining or 'off'}/{'fused' if r.fusion else 'unfused'}"
        t.add_row(*(Text(str(c)) for c in (
            r.id, r.created_at.replace("T", " ")[:19], r.kernel, "x".join(str(v) for v in r.shape.values()),
            r.dtype or "", knobs, r.profile, "SIMULATED" if r.simulated else r.backend,
            r.status + (f" REGRESSION {(marks[r.id]['ratio'] - 1) * 100:+.1f}%" if marks.get(r.id, {}).get("regression")
                        else ""),
            fmt(r.median_ms, ".4f"), fmt(r.tflops, ".1f"), fmt(r.sol_pct, ".1f"),
            "-" if r.correct is None else ("yes" if r.correct else "NO"))))
    stdout_console().print(t)
    return 0
