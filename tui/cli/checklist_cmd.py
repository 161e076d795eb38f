"""`tui checklist [--json] [--done STEP] [--undo STEP] [--reset]`: the operators' checklist for this
host, stored in the results store so a stopped session resumes where it was."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from tui.cli.output import print_json, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    from engine import checklist_step_ids as step_ids

    p = sub.add_parser("checklist", help="the operators' checklist for this host (resumable)")
    p.add_argument("--json", action="store_true", help='print {"steps": [...], "next": STEP}')
    p.add_argument("--done", choices=step_ids(), metavar="STEP", help=f"mark a step done ({', '.join(step_ids())})")
    p.add_argument("--undo", choices=step_ids(), metavar="STEP", help="mark a step not done")
    p.add_argument("--profile", help="with --done profile: the profile confirmed")
    p.add_argument("--note", default="", help="a note stored with --done/--undo")
    p.add_argument("--reset", action="store_true", help="forget this host's checklist progress")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine import Checklist, InputError, ResultStore

    cl = Checklist(ResultStore(args.store))
    if args.reset:
        cl.reset()
    if args.done:
        extra = {}
        if args.done == "profile":
            if not args.profile:
                raise InputError("--done profile needs --profile NAME", fix="e.g. tui checklist --done profile --profile h100")
            from engine import load_profiles

            extra["profile"] = load_profiles().get(args.profile).name
        cl.mark(args.done, True, args.note, **extra)
    if args.undo:
        cl.mark(args.undo, False, args.note)
    steps = cl.steps()
    nxt = next((s for s in steps if not s.done), None)
    if args.json:
        print_json({"steps": [s.model_dump(mode="json") for s in steps], "next": nxt.id if nxt else None,
                    "complete": nxt is None})
        return 0
    con = stdout_console()
    t = Table(title="Operators' checklist")
    for col in ("#", "step", "state", "detail / next action"):
        t.add_column(col, overflow="fold")
    for i, s in enumerate(steps, 1):
        state = "[green]done[/]" if s.done else ("[bold yellow]todo[/]" if nxt and s.id == nxt.id else "[dim]todo[/]")
        t.add_row(str(i), f"{s.title}\n[dim]{s.id}[/]", state + (f"\n[dim]{s.source}[/]" if s.done else ""),
                  s.detail if s.done else f"{s.detail}\n-> {s.next_action}")
    con.print(t)
    con.print("all steps done" if nxt is None else f"next: {nxt.title} ({nxt.next_action})")
    return 0
