"""Reading TOML with errors that name the file, line and problem."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from engine.errors import InputError

_AT_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


def load_toml(path: Path, what: str = "file") -> dict[str, Any]:
    """Parse ``path``; raise InputError naming the file, line and problem if it is not valid TOML."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file", fix="check the path") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    return parse_toml(text, path, what)


def parse_toml(text: str, path: Path | str, what: str = "file") -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _AT_LINE.search(msg)
        problem = _AT_LINE.sub("", msg).replace("(at end of document)", "").strip()
        if m:
            where = f"line {m.group(1)}, column {m.group(2)}"
        else:  # "(at end of document)": an unterminated string, array or table
            where = f"line {max(1, len(text.splitlines()))} (end of file)"
        raise InputError(
            f"{what} {path}: malformed TOML at {where}: {problem}",
            fix="correct the TOML syntax at that line (strings need quotes, keys need '=')",
        ) from None
