"""`tui check [--json] [--profile NAME]`: run the environment checks; exit 0 when nothing fails,
1 when something fails. The summary is recorded in the checklist (best effort)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from tui.cli import check_context
from tui.cli.device_args import device_arg
from tui.cli.output import print_json, stderr_console, stdout_console

if TYPE_CHECKING:
    from engine import CheckContext

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="check the driver, CUDA stack, GPU health and host (exit 1 on a failure)")
    p.add_argument("--json", action="store_true", help='print {"checks": [{"id", "title", "status", "detail", "fix"}]}')
    p.add_argument("--profile", help="the hardware profile the GPU should match (default: detect)")
    p.add_argument("--only", action="append", metavar="ID",
                   help="run only this check id or area (driver, devices, cuda, gpu, health, host...); repeatable")
    p.add_argument("--store", type=Path, help="results store for the checklist (env SOL_COCKPIT_STORE)")
    p.add_argument("--device", type=device_arg, metavar="all|0,2,5",
                   help="each GPU's checks per GPU at once, compared: which GPU disagrees with the others")
    p.set_defaults(func=run)


def _record(results: list, store_path: Path | None) -> str | None:
    from engine import Checklist, CockpitError, ResultStore
    from engine import checks_summary as summary

    try:
        Checklist(ResultStore(store_path)).record_checks(summary(results), {r.id: r.status for r in results})
    except CockpitError as exc:
        return exc.message
    return None


def _profile_json(ctx: CheckContext) -> dict[str, object] | None:
    """The profile the checks judged (``--profile``, else GPU 0's detected one) as {name,
    provisional}; None where there is none."""
    from engine import checked_profile

    prof = checked_profile(ctx)
    return None if prof is None else {"name": prof.name, "provisional": prof.provisional}


def run(args: argparse.Namespace) -> int:
    from engine import checks_summary as summary
    from engine import run_checks

    if args.profile is not None:
        from tui.cli.known_names import known_profile

        known_profile(args.profile)  # a typo: exit 2 with the known ones, not checks against nothing
    if getattr(args, "device", None) is not None:  # per GPU (tui.cli.every_gpu)
        from tui.cli.every_gpu import run_check_all

        return run_check_all(args)
    ctx = check_context.make_context(args.profile)
    results = run_checks(profile_name=args.profile, only=args.only, ctx=ctx)
    failed = any(r.status == "fail" for r in results)
    problem = _record(results, args.store) if not args.only else None
    if args.json:
        print_json({"checks": [{"id": r.id, "title": r.title, "status": r.status, "detail": r.detail,
                                "fix": r.fix, "rules": r.rules} for r in results],
                    "summary": summary(results), "ok": not failed, "profile": _profile_json(ctx)})
        return 1 if failed else 0
    con = stdout_console()
    t = Table(title="Environment checks", show_lines=False)
    for col in ("status", "check", "found", "fix"):
        t.add_column(col, overflow="fold")
    for r in results:
        fix = r.fix + (f" [dim](rules: {', '.join(r.rules)})[/]" if r.rules else "")
        t.add_row(f"[{STYLE[r.status]}]{r.status.upper()}[/]", f"{r.title}\n[dim]{r.id}[/]", r.detail,
                  fix if r.status in ("fail", "warn") else "")
    con.print(t)
    s = summary(results)
    con.print(f"{s['pass']} pass, {s['warn']} warn, [{'bold red' if s['fail'] else 'green'}]{s['fail']} fail[/], "
              f"{s['skip']} skip")
    if failed and any(r.id == "driver.loaded" and r.status == "fail" for r in results):
        con.print("No usable NVIDIA driver: the simulated backend still works: `tui bench --backend sim`")
    if problem:
        stderr_console().print(f"[yellow]warning:[/] checklist not updated: {problem}")
    return 1 if failed else 0
