"""`tui diagnose FILE|- [--json]`: match any log (a traceback, nvidia-smi, dmesg, a build log)
against the troubleshooting rules and print the matches, best first.

A log is untrusted input of any size: it is read in chunks and only its two ends are kept (the
environment and driver messages come first, the error that ended a run comes last), so a 200 MB
log, a pipe that never ends or ``/dev/zero`` costs a bounded time and memory, and the output says
what was read. Bytes are decoded leniently (UTF-8, or UTF-16/32 by byte-order mark or by their
zero bytes; anything undecodable becomes U+FFFD), because a log that is partly binary still holds
the lines that matter.
"""

from __future__ import annotations

import argparse
import codecs
import os
import stat
import sys
from collections import deque
from dataclasses import dataclass
from typing import IO, Any

from rich.markup import escape
from rich.table import Table

from engine import InputError
from tui.cli.output import human, print_json, stdout_console

HEAD_BYTES = 4 * 2**20
"""Bytes read from the start of a log."""
TAIL_BYTES = 4 * 2**20
"""Bytes read from the end of a log: with ``HEAD_BYTES``, tens of thousands of lines at each end,
and all ~150 patterns run over the 8 MiB in about half a second on one core."""
STREAM_MAX_BYTES = 2**30
"""The most bytes read from a pipe or device (standard input, ``/dev/zero``): its first
``HEAD_BYTES`` and its last ``TAIL_BYTES`` up to here are diagnosed, the rest is not read."""
CHUNK_BYTES = 2**20

EXIT_MATCHED, EXIT_NO_MATCH, EXIT_BAD_INPUT = 0, 1, 2
"""Exit status: a rule matched; nothing matched; the input could not be read (InputError)."""

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
"""Byte-order marks, the 4-byte UTF-32 ones first (UTF-32-LE's begins with UTF-16-LE's)."""

_HELP = f"""\
what is read:
  at most the first {HEAD_BYTES // 2**20} MiB and the last {TAIL_BYTES // 2**20} MiB of FILE (of a pipe or device: of its first
  {STREAM_MAX_BYTES // 2**30} GiB); the output says what was read. UTF-8, or UTF-16/UTF-32 by byte-order mark
  (UTF-16 also without one); bytes that do not decode are replaced, never an error.

exit status:
  {EXIT_MATCHED}  a rule matched
  {EXIT_NO_MATCH}  no rule matched
  {EXIT_BAD_INPUT}  bad input (FILE unreadable, a bad option)"""


@dataclass(frozen=True)
class LogText:
    """What was read of a log, and how."""

    text: str
    """The decoded text: all of it, or its head and tail joined by a blank line."""
    source: str
    """The file name, or "standard input"."""
    encoding: str
    """The codec used (utf-8, utf-16-le, ...)."""
    total_bytes: int
    """Bytes in the log (of a stream: bytes read before it ended or hit ``STREAM_MAX_BYTES``)."""
    read_bytes: int
    """Bytes decoded into ``text``."""
    stream_cut: bool = False
    """A stream still had data at ``STREAM_MAX_BYTES``: what came after was not read."""

    @property
    def complete(self) -> bool:
        return self.read_bytes >= self.total_bytes and not self.stream_cut

    def describe(self) -> str:
        """One sentence saying what was read, for the output."""
        size = _mib(self.total_bytes)
        if self.complete:
            return f"Read all of {self.source} ({size}, {self.encoding})."
        what = (f"the first {_mib(min(HEAD_BYTES, self.read_bytes))} and the last "
                f"{_mib(max(0, self.read_bytes - HEAD_BYTES))}")
        if self.stream_cut:
            return (f"Read the first {size} of {self.source} and stopped (the limit for a pipe or "
                    f"device); diagnosed {what} of that ({self.encoding}).")
        return (f"Read {what} of {self.source} ({size}, {self.encoding}); the "
                f"{_mib(self.total_bytes - self.read_bytes)} between were not read.")

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "encoding": self.encoding, "total_bytes": self.total_bytes,
                "read_bytes": self.read_bytes, "complete": self.complete, "note": self.describe()}


def _mib(n: int) -> str:
    return f"{n} bytes" if n < 2**20 else f"{n / 2**20:.1f} MiB"


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


def detect_encoding(head: bytes) -> tuple[str, int]:
    """(codec, length of its byte-order mark) for a log starting with ``head``: the BOM's, else
    UTF-16 when nearly every other byte of the first 4 KiB is zero (ASCII text saved as UTF-16
    without a mark), else UTF-8."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    sample = head[:4096]
    pairs = len(sample) // 2
    if pairs >= 2:
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        if odd >= 0.7 * pairs and even <= 0.05 * pairs:
            return "utf-16-le", 0
        if even >= 0.7 * pairs and odd <= 0.05 * pairs:
            return "utf-16-be", 0
    return "utf-8", 0


def decode_log(head: bytes, tail: bytes, tail_offset: int) -> tuple[str, str]:
    """(text, codec) for a log's ``head`` and, when it was not read whole, its ``tail`` (which began
    at byte ``tail_offset``). The two are joined at line ends by a blank line, so that no match
    spans the gap."""
    codec, bom = detect_encoding(head)
    text = head[bom:].decode(codec, errors="replace")
    if not tail:
        return text, codec
    unit = 4 if "32" in codec else 2 if "16" in codec else 1
    tail_text = tail[(-tail_offset) % unit:].decode(codec, errors="replace")
    cut = text.rfind("\n")
    text = text[:cut] if cut >= 0 else text
    cut = tail_text.find("\n")
    tail_text = tail_text[cut + 1:] if cut >= 0 else tail_text
    return f"{text}\n\n{tail_text}", codec


def read_log(name: str) -> LogText:
    """The log ``name`` (a path, or - for standard input), read within the limits above;
    InputError when it cannot be read."""
    if name == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is None:  # a text stream (tests, embedding): already decoded
            return _read_text_stream(sys.stdin)
        return _read_stream(buffer, "standard input")
    try:
        with open(name, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size > 0:
                return _read_file(fh, name, st.st_size)
            return _read_stream(fh, name)
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}",
                         fix="pass a readable log file, or - for stdin") from None


def _read_file(fh: IO[bytes], name: str, size: int) -> LogText:
    """A regular file: whole when it fits the limits, else its head and, by seeking, its tail."""
    if size <= HEAD_BYTES + TAIL_BYTES:
        data = fh.read(HEAD_BYTES + TAIL_BYTES)
        text, codec = decode_log(data, b"", 0)
        return LogText(text, name, codec, max(size, len(data)), len(data))
    head = fh.read(HEAD_BYTES)
    fh.seek(size - TAIL_BYTES)
    tail = fh.read(TAIL_BYTES)
    text, codec = decode_log(head, tail, size - TAIL_BYTES)
    return LogText(text, name, codec, size, len(head) + len(tail))


def _read_stream(fh: IO[bytes], name: str) -> LogText:
    """A pipe, device or file of unknown size, in chunks: its head, and a rolling tail of whole
    chunks, until it ends or ``STREAM_MAX_BYTES`` were read."""
    head = bytearray()
    tail: deque[bytes] = deque()
    total = kept = 0
    cut = False
    while True:
        if total >= STREAM_MAX_BYTES:
            cut = bool(fh.read(1))
            break
        chunk = fh.read(min(CHUNK_BYTES, STREAM_MAX_BYTES - total))
        if not chunk:
            break
        total += len(chunk)
        room = HEAD_BYTES - len(head)
        if room > 0:
            head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            tail.append(chunk)
            kept += len(chunk)
            while kept - len(tail[0]) >= TAIL_BYTES:
                kept -= len(tail.popleft())
    tail_bytes = b"".join(tail)[-TAIL_BYTES:]
    if total - len(tail_bytes) == len(head):  # head and tail adjoin: the whole stream
        text, codec = decode_log(bytes(head) + tail_bytes, b"", 0)
    else:
        text, codec = decode_log(bytes(head), tail_bytes, total - len(tail_bytes))
    return LogText(text, name, codec, total, len(head) + len(tail_bytes), stream_cut=cut)


def _read_text_stream(fh: IO[str]) -> LogText:
    """An already decoded stream: the same limits, counted in characters."""
    head = fh.read(HEAD_BYTES)
    tail: deque[str] = deque()
    total, kept = len(head), 0
    while total < STREAM_MAX_BYTES and (chunk := fh.read(CHUNK_BYTES)):
        total += len(chunk)
        tail.append(chunk)
        kept += len(chunk)
        while kept - len(tail[0]) >= TAIL_BYTES:
            kept -= len(tail.popleft())
    tail_text = "".join(tail)[-TAIL_BYTES:]
    skipped = total - len(head) - len(tail_text)
    text = head + tail_text if not skipped else f"{head}\n\n{tail_text}"
    return LogText(text, "standard input", "text", total, len(head) + len(tail_text),
                   stream_cut=total >= STREAM_MAX_BYTES and bool(fh.read(1)))


def run(args: argparse.Namespace) -> int:
    from engine import match_text

    log = read_log(args.file)
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
