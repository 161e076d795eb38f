"""Printing for the CLI: JSON on stdout, human tables through rich (colour only on a terminal)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def stdout_console() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=False)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fmt(v: Any, spec: str = ".4g", unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:{spec}}{unit}"
    return f"{v}{unit}"
