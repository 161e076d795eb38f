"""`tui diagnose FILE|- [--json]`: match any log (a traceback, nvidia-smi, dmesg, a build log)
against the troubleshooting rules and print the matches, best first."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.table import Table

from engine.cli.output import print_json, stdout_console
from engine.errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="explain a log: matching troubleshooting rules, best first")
    p.add_argument("file", help="log file to read, or - for standard input")
    p.add_argument("--json", action="store_true",
                   help='print {"matches": [{"id", "title", "cause", "fix", "evidence"}]}')
    p.add_argument("--limit", type=int, default=10, help="at most this many matches (default 10)")
    p.set_defaults(func=run)


def read_input(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}", fix="pass a readable log file, or - for stdin") from None


def run(args: argparse.Namespace) -> int:
    from engine.troubleshoot import match_text

    matches = match_text(read_input(args.file))[: max(1, args.limit)]
    if args.json:
        print_json({"matches": [{"id": m.id, "title": m.title, "cause": m.cause, "fix": m.fix,
                                 "evidence": m.evidence, "knob": m.knob, "command": m.command,
                                 "sticky": m.sticky, "score": m.score} for m in matches]})
        return 0
    con = stdout_console()
    if not matches:
        con.print("No known failure pattern matched. `tui check` may still find the cause.")
        return 0
    t = Table(title="Matching troubleshooting rules (best first)", show_lines=True)
    for col in ("rule", "cause", "fix", "evidence"):
        t.add_column(col, overflow="fold")
    for m in matches:
        extra = "".join([f"\n[bold]knob:[/] {m.knob}" if m.knob else "",
                         f"\n[bold]command:[/] {m.command}" if m.command else "",
                         "\n[yellow]the engine process must restart[/]" if m.sticky else ""])
        t.add_row(f"[bold]{m.title}[/]\n[dim]{m.id}[/]", m.cause, m.fix + extra, m.evidence)
    con.print(t)
    return 0
