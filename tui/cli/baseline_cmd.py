"""`tui baseline set|list|clear`: mark a stored run (or the tuning cache's best) as the performance
baseline of its kernel, shape, dtype and GPU model; `tui bench --against-baseline` judges later
runs against it (exit 1 on a regression)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from tui.cli.output import fmt, print_json, stdout_console


def run_id_arg(text: str) -> int:
    t = text.strip().lstrip("#")
    if not (t.isascii() and t.isdigit()) or len(t) > 18 or int(t) < 1:
        raise argparse.ArgumentTypeError(f"expected a run id (a positive integer from tui history), got {text[:40]!r}")
    return int(t)


def register(sub: argparse._SubParsersAction) -> None:
    from engine import DType, parse_tolerance

    p = sub.add_parser("baseline", help="performance baselines: set, list, clear (bench --against-baseline judges them)")
    acts = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
        q.add_argument("--json", action="store_true", help="print one JSON object")

    s = acts.add_parser("set", help="mark a stored run (default: the newest ok run) or the tuned best as the baseline")
    s.add_argument("run_id", nargs="?", type=run_id_arg, metavar="RUN_ID", help="a stored run's id (tui history)")
    s.add_argument("--tuned", action="store_true", help="take the tuning cache's best (narrow with the flags below)")
    s.add_argument("--kernel", help="with --tuned or without RUN_ID: the kernel")
    s.add_argument("--shape", help="with --tuned: the shape, named dims, e.g. m=8192,n=2560,k=2560")
    s.add_argument("--dtype", choices=[d.value for d in DType], help="with --tuned: the element type")
    s.add_argument("--gpu", help="with --tuned: the GPU model as the cache names it (tui tune --list)")
    s.add_argument("--tolerance", type=parse_tolerance, metavar="PCT",
                   help="the slowdown this baseline tolerates, e.g. 5%% (default 5 %%; bench --tolerance wins)")
    common(s)
    ls = acts.add_parser("list", help="list the baselines")
    ls.add_argument("--kernel", help="only this kernel's")
    common(ls)
    c = acts.add_parser("clear", help="remove a baseline: its id, its key kernel/shape/dtype/GPU, or 'all'")
    c.add_argument("key", metavar="KEY", help="baseline id, kernel/shape/dtype/GPU model, or all")
    common(c)
    p.set_defaults(func=run)


def _shape(text: str | None) -> str | None:
    from engine import InputError, parse_shape_text, shape_text

    if text is None:
        return None
    try:
        dims = parse_shape_text(text)
    except ValueError as exc:
        raise InputError(f"--shape: {exc}", fix="name the dimensions, e.g. m=8192,n=2560,k=2560") from None
    if not dims or any(k.startswith("_") for k in dims):
        raise InputError(f"--shape: {text[:60]!r} does not name its dimensions",
                         fix="name them as the cache does, e.g. m=8192,n=2560,k=2560")
    return shape_text(dims)


def _newest_ok(store: Any, kernel: str | None) -> int:
    from engine import InputError

    recs = [r for r in store.list(kernel=kernel, limit=1, status="ok", kind="bench")]
    if not recs:
        raise InputError("no ok run stored (a bench; a soak is no baseline)" + (f" for kernel={kernel}" if kernel else ""),
                         fix="run one first (tui bench), or name a run: tui baseline set RUN_ID")
    return int(recs[0].id)


def _row(b: Any) -> dict[str, Any]:
    return b.model_dump(mode="json") | {"key": b.key}


def run(args: argparse.Namespace) -> int:
    from engine import Baselines, InputError, ResultStore

    store = ResultStore(args.store)
    book = Baselines(store)
    if getattr(args, "kernel", None) is not None:
        from tui.cli.known_names import known_kernel

        known_kernel(args.kernel, store)
    if args.action == "set":
        if args.tuned and args.run_id is not None:
            raise InputError("RUN_ID and --tuned: give one, not both", fix="tui baseline set RUN_ID, or --tuned")
        if not args.tuned and (args.shape or args.dtype or args.gpu):
            raise InputError("--shape/--dtype/--gpu narrow --tuned only", fix="add --tuned, or give RUN_ID")
        if args.tuned:
            b = book.set_from_tuned(args.tolerance, kernel=args.kernel, shape=_shape(args.shape), dtype=args.dtype,
                                    gpu=args.gpu)
        else:
            b = book.set_from_run(args.run_id or _newest_ok(store, args.kernel), args.tolerance)
        if args.json:
            print_json({"status": "ok", "baseline": _row(b)})
        else:
            src = f"run #{b.run_id}" if b.run_id is not None else "the tuning cache's best"
            stdout_console().print(Text(f"baseline #{b.id} set from {src}: {b.key} {b.median_ms:.4f} ms"
                                        + (" [SIMULATED]" if b.simulated else "")))
        return 0
    if args.action == "clear":
        gone = book.clear(args.key)
        if args.json:
            print_json({"status": "ok", "cleared": [_row(b) for b in gone]})
        else:
            for b in gone:
                stdout_console().print(Text(f"cleared baseline #{b.id}: {b.key}"))
        return 0
    rows = book.find(kernel=args.kernel)
    if args.json:
        print_json({"store": str(store.path), "baselines": [_row(b) for b in rows]})
        return 0
    t = Table(title=Text(f"baselines in {store.path}"))
    for col in ("id", "kernel", "shape", "dtype", "GPU model", "median ms", "tolerance", "from", "set"):
        t.add_column(col)
    for b in rows:
        t.add_row(*(Text(str(x)) for x in (
            b.id, b.kernel, b.shape, b.dtype, b.gpu, fmt(b.median_ms, ".4f"),
            f"{b.tolerance_pct:g} %" if b.tolerance_pct else "default",
            f"run #{b.run_id}" if b.run_id is not None else "tuned", b.set_at.replace("T", " ")[:16])))
    con = stdout_console()
    con.print(t)
    if not rows:
        con.print("no baselines: set one with tui baseline set RUN_ID")
    return 0


# --- `tui bench --against-baseline [--tolerance PCT]` ---------------------------------------------
def add_bench_args(p: argparse.ArgumentParser) -> None:
    from engine import parse_tolerance

    p.add_argument("--against-baseline", dest="against_baseline", action="store_true",
                   help="judge the run against the baseline of its kernel, shape, dtype and GPU model "
                        "(tui baseline set): exit 1 when the median is slower by more than the tolerance")
    p.add_argument("--tolerance", type=parse_tolerance, metavar="PCT",
                   help="with --against-baseline: the slowdown tolerated, e.g. 5%% (default: the baseline's, else 5 %%)")


def bench_guard(args: argparse.Namespace, prep: Any) -> Any:
    """The baseline a bench run is judged against, found before the run (none without
    --against-baseline; exit 2 with nothing run when there is no baseline)."""
    from engine import InputError

    if not getattr(args, "against_baseline", False):
        if getattr(args, "tolerance", None) is not None:
            raise InputError("--tolerance: only with --against-baseline", fix="add --against-baseline")
        return None
    from engine import ResultStore
    from engine import baseline_guard as guard_for

    return guard_for(ResultStore(args.store), prep, args.tolerance)


def print_verdict(verdict: Any) -> None:
    con = stdout_console()
    for i, line in enumerate(verdict.lines()):
        style = ("bold red" if verdict.regression else "green" if verdict.ratio is not None else "yellow") if i == 0 else ""
        con.print(Text(line, style=style))
