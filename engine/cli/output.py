"""Printing for the CLI: JSON on stdout, human tables through rich (colour only on a terminal)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from rich.console import Console

LOG_WIDTH = 120
"""Columns of the tables written to a file or pipe (a log, ``| tee``) when COLUMNS is unset: rich's
80 wraps the bench table's implementation names over five lines. A terminal keeps its own width."""


def _width(stream: TextIO) -> int | None:
    """The console width: COLUMNS where it is a positive number; else a terminal's own size (None:
    rich asks the terminal, unless a malformed COLUMNS would mislead it, e.g. 0 columns); else
    ``LOG_WIDTH``. A malformed COLUMNS is ignored, as shells and ``shutil`` ignore it."""
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        if not cols:
            return None
        try:
            return os.get_terminal_size(stream.fileno()).columns or LOG_WIDTH
        except (OSError, ValueError, AttributeError):
            return LOG_WIDTH
    return LOG_WIDTH


def stdout_console() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, width=_width(sys.stdout))


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=False, width=_width(sys.stderr))


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fmt(v: Any, spec: str = ".4g", unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:{spec}}{unit}"
    return f"{v}{unit}"
