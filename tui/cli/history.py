"""`tui history [--json] [--kernel K] [--profile P] [--limit N]`: stored runs, newest first."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.text import Text

from engine import ResultStore, baseline_marks
from tui.cli.fit_table import Column, render, short_ms
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


COLUMNS = [Column("id", 12, True), Column("when", 1), Column("kernel", 7), Column("shape", 6), Column("dtype", 3),
           Column("knobs", 0), Column("profile", 5), Column("device", 4), Column("status", 8),
           Column("median ms", 11, True), Column("TFLOP/s", 2, True), Column("SOL %", 10, True), Column("ok", 9)]
"""The table's columns: in a narrow terminal the knobs, the time and TFLOP/s go first, the id, the
median and SOL % last."""


def _known(args: argparse.Namespace, store: ResultStore) -> None:
    """--kernel and --profile must name a kernel or profile known here or in the store: a typo
    listed nothing and exited 0."""
    from tui.cli.known_names import known_kernel, known_profile

    if args.kernel is not None:
        known_kernel(args.kernel, store)
    if args.profile is not None:
        args.profile = known_profile(args.profile, store)


def _row(r: Any, marks: dict[int, Any]) -> list[str]:
    knobs = f"{r.block_size}/{r.memory_pipelining or 'off'}/{'fused' if r.fusion else 'unfused'}"
    status = ("soak " if r.kind == "soak" else "") + r.status
    if marks.get(r.id, {}).get("regression"):
        status += f" REGRESSION {(marks[r.id]['ratio'] - 1) * 100:+.1f}%"
    return [str(r.id), r.created_at.replace("T", " ")[5:16], r.kernel, "x".join(str(v) for v in r.shape.values()),
            r.dtype or "", knobs, r.profile, "sim" if r.simulated else r.backend, status, short_ms(r.median_ms),
            fmt(r.tflops, ".1f"), fmt(r.sol_pct, ".1f"), "-" if r.correct is None else ("yes" if r.correct else "NO")]


def run(args: argparse.Namespace) -> int:
    store = ResultStore(args.store)
    _known(args, store)
    recs = store.list(kernel=args.kernel, profile=args.profile, limit=args.limit)
    marks = baseline_marks(store, recs)  # run id -> its median over its baseline's (tui baseline)
    if args.json:
        print_json({"store": str(store.path), "runs": [r.to_dict() | {
            "baseline_ratio": marks.get(r.id, {}).get("ratio"), "regression": marks.get(r.id, {}).get("regression")}
            for r in recs]})
        return 0
    con = stdout_console()
    # its own line, whole (a title would be wrapped to the table's width); Text: not rich markup
    con.print(Text(f"runs in {store.path}"), soft_wrap=True)
    table, left_out = render(None, COLUMNS, [_row(r, marks) for r in recs], con.width)
    con.print(table)
    if left_out:
        con.print(Text(f"not shown at {con.width} columns: {', '.join(left_out)} (tui history --json has every "
                       "field)", style="dim"))
    return 0
