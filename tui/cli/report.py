"""`tui report [--json] [-o FILE] [--profile NAME]`: a shareable report of the checks,
the profile, the best runs and the rules that fired. Writing it to a file completes the checklist's
"result exported" step."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import InputError, write_atomic
from tui.cli.task_args import add_alias


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a shareable report (checks, profile, best runs, rules fired)")
    p.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--profile", help="profile to report (default: the one confirmed in the checklist)")
    p.add_argument("--store", type=Path, help="results store path (env SOL_COCKPIT_STORE)")
    add_alias(p, "--format", "format", choices=("md", "json"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine import Checklist, ResultStore, build_report
    from engine import report_markdown as to_markdown
    from tui.cli.check_context import make_context

    store = ResultStore(args.store)
    if args.profile is not None:
        from tui.cli.known_names import known_profile

        args.profile = known_profile(args.profile, store)
    rep = build_report(store, profile_name=args.profile, ctx=make_context(args.profile))
    text = json.dumps(rep, indent=2, default=str) + "\n" if args.json or getattr(args, "format", "md") == "json" else to_markdown(rep)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(args.output, text, mode=0o644, what="--output")
    except OSError as exc:
        raise InputError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    Checklist(store).mark("exported", True, f"report written to {args.output}")
    print(f"report written to {args.output}", file=sys.stderr)
    return 0
