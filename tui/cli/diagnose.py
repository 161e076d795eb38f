"""`tui diagnose FILE|- [--json]`: match any log (a traceback, nvidia-smi, dmesg, a build log)
against the troubleshooting rules and print the matches, best first.

A log is untrusted input of any size: it is read in chunks and only its two ends are kept (the
environment and driver messages come first, the error that ended a run comes last), so a 200 MB
log, a pipe that never ends or ``/dev/zero`` costs a bounded time and memory, and the output says
what was read. Bytes are decoded leniently (UTF-8, or UTF-16/32 by byte-order mark or by their
zero bytes; anything undecodable becomes U+FFFD), because a log that is partly binary still holds
the lines that matter. The reading is ``engine.log_reader``'s (the path is ``stat``-ed before it is
opened); a FIFO that gave nothing (no writer) is refused here with exit 2, since "no rule matched"
would read as a clean log.
"""

from __future__ import annotations

import argparse
import os
import stat

from rich.markup import escape
from rich.table import Table

from engine import LOG_HEAD_BYTES as HEAD_BYTES
from engine import LOG_STREAM_MAX_BYTES as STREAM_MAX_BYTES
from engine import LOG_TAIL_BYTES as TAIL_BYTES
from engine import InputError, LogText, read_log
from tui.cli.output import human, print_json, stdout_console

EXIT_MATCHED, EXIT_NO_MATCH, EXIT_BAD_INPUT = 0, 1, 2
"""Exit status: a rule matched; nothing matched; the input could not be read (InputError)."""

_HELP = f"""\
what is read:
  at most the first {HEAD_BYTES // 2**20} MiB and the last {TAIL_BYTES // 2**20} MiB of FILE (of a pipe or device: of its first
  {STREAM_MAX_BYTES // 2**30} GiB); the output says what was read. UTF-8, or UTF-16/UTF-32 by byte-order mark
  (UTF-16 also without one); bytes that do not decode are replaced, never an error.

exit status:
  {EXIT_MATCHED}  a rule matched
  {EXIT_NO_MATCH}  no rule matched
  {EXIT_BAD_INPUT}  bad input (FILE unreadable, a bad option)"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diagnose", help="explain a log: matching troubleshooting rules, best first",
                       description="Match a log (a traceback, nvidia-smi, dmesg, a build log) against "
                                   "the troubleshooting rules and print the matches, best first.",
                       epilog=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="log file to read, or - for standard input")
    p.add_argument("--json", action="store_true",
                   help='print {"input": {...what was read}, "matches": [{"id", "title", "cause", "fix", '
                        '"evidence", ...}]}')
    p.add_argument("--limit", type=int, default=10, help="at most this many matches (default 10)")
    p.set_defaults(func=run)


def read_input(name: str) -> LogText:
    """The log ``name`` (a path or -) as ``read_log`` reads it; InputError when it is a FIFO that gave
    nothing, which is almost always a pipe nobody writes to, not an empty log."""
    log = read_log(name)
    if log.total_bytes == 0 and name != "-":
        try:
            fifo = stat.S_ISFIFO(os.stat(name).st_mode)
        except OSError:
            fifo = False
        if fifo:
            raise InputError(f"log file {name}: a FIFO with no writer; nothing was read",
                             fix="write the log into it first, or pipe it: cmd | tui diagnose -")
    return log


def run(args: argparse.Namespace) -> int:
    from engine import match_text

    log = read_input(args.file)
    matches = match_text(log.text)[: max(1, args.limit)]
    status = EXIT_MATCHED if matches else EXIT_NO_MATCH
    if args.json:
        print_json({"input": log.to_dict(),
                    "matches": [{"id": m.id, "title": m.title, "cause": m.cause, "fix": m.fix,
                                 "evidence": m.evidence, "knob": m.knob, "command": m.command,
                                 "sticky": m.sticky, "score": m.score} for m in matches]})
        return status
    con = stdout_console()
    con.print(f"[dim]{escape(log.describe())}[/]")
    if not matches:
        empty = "The input is empty. " if not log.text.strip() else ""
        con.print(f"{empty}No known failure pattern matched. `tui check` may still find the cause.")
        return status
    t = Table(title="Matching troubleshooting rules (best first)", show_lines=True)
    for col in ("rule", "cause", "fix", "evidence"):
        t.add_column(col, overflow="fold")
    for m in matches:
        extra = "".join([f"\n[bold]knob:[/] {escape(human(m.knob))}" if m.knob else "",
                         f"\n[bold]command:[/] {escape(m.command)}" if m.command else "",
                         "\n[yellow]the engine process must restart[/]" if m.sticky else ""])
        t.add_row(f"[bold]{escape(m.title)}[/]\n[dim]{m.id}[/]", escape(m.cause), escape(m.fix) + extra,
                  escape(m.evidence))
    con.print(t)
    return status
