"""Printing for the CLI: JSON on stdout, human tables through rich (colour only on a terminal)."""

from __future__ import annotations

import json
import math
import numbers
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


def finite_json(obj: Any) -> tuple[Any, list[str]]:
    """``obj`` with every float that is not finite replaced by None, and the paths replaced: JSON
    has no Infinity or NaN, and a reader (``jq``, a browser, Go) refuses a document with them."""
    replaced: list[str] = []

    def walk(v: Any, path: str, depth: int) -> Any:
        if isinstance(v, float) or (isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral)):
            f = float(v)
            if math.isfinite(f):
                return f
            replaced.append(path or "$")
            return None
        if depth > 64 and isinstance(v, (dict, list, tuple)):  # ours are shallow: deeper is shown as text
            return str(v)
        if isinstance(v, dict):
            return {k: walk(x, f"{path}.{k}" if path else str(k), depth + 1) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
        return v

    return walk(obj, "", 0), replaced


def print_json(obj: Any) -> None:
    """One strict JSON document on stdout (never Infinity or NaN: those become null, and a note on
    stderr names where)."""
    clean, replaced = finite_json(obj)
    text = json.dumps(clean, indent=2, default=str, allow_nan=False)
    if replaced:
        shown = ", ".join(replaced[:10]) + (f" and {len(replaced) - 10} more" if len(replaced) > 10 else "")
        print(f"note: not a finite number, printed as null: {shown}", file=sys.stderr)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def fmt(v: Any, spec: str = ".4g", unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:{spec}}{unit}"
    return f"{v}{unit}"


def human(value: Any) -> str:
    """A value as a person reads it, never a Python repr: lists joined with commas, tables as
    ``key=value`` pairs, None as '-', booleans as yes/no, floats without noise, anything else as its
    text with control characters shown as escapes (``engine.text_safety.visible``), so a value read
    from a file or another host cannot set the terminal's title or clear it."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={human(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(human(v) for v in value) or "-"
    from engine import visible

    return visible(str(value))
