"""`tui fleet DIR [--json] [--outlier-pct X]`: the reports fleet jobs wrote (one per host, from
`tui fleet-report`) as one table: host, GPU, driver, failed checks, seed SOL %, spread, with the
outliers marked. Exit 0 when nothing is marked and every file reads; 1 when a GPU is marked (slow,
bench failed, failed checks) or a file is not a readable report, so that a cron job or CI can alert
on it as on `tui check`; 2 for bad input (no such folder, no reports in it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.cli.fit_table import short_ms
from tui.cli.output import fmt, print_json, stdout_console


def _pct(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < 100:
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage from 0 to below 100")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    from engine import FLEET_OUTLIER_PCT as DEFAULT_OUTLIER_PCT

    p = sub.add_parser("fleet", help="one table of the fleet reports in a folder, outliers marked "
                                     "(exit 1 when any)")
    p.add_argument("dir", type=Path, metavar="DIR", help="the folder the fleet jobs write their reports into")
    p.add_argument("--outlier-pct", type=_pct, default=DEFAULT_OUTLIER_PCT, metavar="X",
                   help="mark a GPU whose SOL %% is more than X %% below the median of its group "
                        "(same task and profile; default %(default)g)")
    p.add_argument("--json", action="store_true", help="print the view as one JSON object")
    p.set_defaults(func=run)


def fleet_table(view):
    """The view as a rich Table (also what the cockpit's Fleet screen shows, cell for cell)."""
    from rich.table import Table

    t = Table(title=f"fleet: {len(view.hosts)} host(s), {len(view.rows)} GPU(s), {len(view.outliers)} marked")
    for col in ("", "host", "GPU", "driver", "failed checks", "median ms", "SOL %", "group SOL %", "host spread",
                "why marked"):
        right = col in ("median ms", "SOL %", "group SOL %", "host spread")
        t.add_column(col, justify="right" if right else "left", overflow="fold", no_wrap=right)
    for r in view.rows:
        t.add_row(*row_cells(r))
    return t


def row_cells(r) -> list[str]:
    """One row as markup cells: mark, host, GPU, driver, failed checks, median ms (this GPU's seed
    bench), SOL %, the group's median SOL %, host spread, reasons."""
    from rich.markup import escape

    name = (r.gpu_name or "").replace("NVIDIA ", "")
    return ["[bold red]![/]" if r.outlier else "",
            escape(r.host) + (" [yellow](SIMULATED)[/]" if r.simulated else ""),
            escape(f"{r.gpu} {name}".strip()),
            escape(r.driver or "-"),
            escape(", ".join(r.failed_checks) or "-"),
            short_ms(r.median_ms),
            fmt(r.sol_pct, ".1f") if r.sol_pct is not None else f"[red]{escape(r.status)}[/]",
            fmt(r.group_median_pct, ".1f"),
            fmt(r.host_spread_pct, ".1f", " %"),
            escape("; ".join(r.reasons))]


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from engine import load_fleet

    view = load_fleet(args.dir, args.outlier_pct)
    if args.json:
        print_json(view.to_json())
        return 0 if view.ok else 1
    con = stdout_console()
    if any(r.simulated for r in view.rows):
        con.print("[reverse bold yellow] SIMULATED [/] some reports come from the simulated device: "
                  "their figures say nothing about those hosts' GPUs")
    con.print(fleet_table(view))
    for task, spread in sorted(view.fleet_spread_pct.items()):
        con.print(f"fleet spread {spread:.1f} % (fastest vs slowest) for {task}", highlight=False)
    if view.superseded:
        con.print(f"[dim]{view.superseded} older report(s) of the same GPU left out (the newest counts)[/]")
    for e in view.errors:
        con.print(f"[red]not a readable report:[/] {escape(e.file)}: {escape(e.problem)}", highlight=False)
    return 0 if view.ok else 1
