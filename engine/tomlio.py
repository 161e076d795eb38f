"""Reading TOML with errors that name the file, line and problem.

Every file the tool reads as TOML (task files, profiles, rules, tuning exports) comes through here,
so a hostile or damaged file is one InputError (exit 2) naming the file, never a traceback: bytes
that are not UTF-8 (named by offset), integers outside TOML's 64-bit range, nesting deeper than any
of our formats uses, and files too large to be one of ours.
"""

from __future__ import annotations

import datetime
import re
import reprlib
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]  # only installed on Python 3.10

from engine.errors import InputError
from engine.safe_files import read_bytes

_AT_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_LONG_DIGITS = re.compile(r"[0-9][0-9_]{999,}")

MAX_BYTES = 16 * 2**20
"""The largest TOML file read: ours are kilobytes; a bigger one is a mistake (``--task /dev/zero``)."""

MAX_DEPTH = 32
"""The deepest nesting of tables and arrays accepted (ours nest 3 levels); deeper documents are
refused before anything recurses through them."""

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""TOML integers are 64-bit signed; the specification asks a reader to refuse any other."""


TOML_KINDS: dict[type, str] = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                               dict: "a table", list: "an array"}
"""How each TOML value type reads in an error message (bool first: a bool is an int in Python)."""


def toml_kind(value: Any) -> str:
    """'a boolean', 'an integer', ... for a parsed TOML value."""
    for typ, name in TOML_KINDS.items():
        if isinstance(value, typ):
            return name
    if isinstance(value, (datetime.date, datetime.time)):
        return "a date or time"
    return type(value).__name__


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlong = 40


def short_repr(value: Any) -> str:
    """``repr(value)`` cut to a readable length, for error messages that quote a hostile value (a
    megabyte string, a 4000-digit integer, an array nested 30 deep)."""
    try:
        return _SHORT.repr(value)
    except (ValueError, RecursionError):  # an int beyond sys.get_int_max_str_digits()
        return f"<{type(value).__name__}>"


def short_key(key: str) -> str:
    """A key as written where it is printable and short, else quoted and cut (``short_repr``)."""
    return key if key.isprintable() and len(key) <= 60 else short_repr(key)


def load_toml(path: Path, what: str = "file", limit: int = MAX_BYTES) -> dict[str, Any]:
    """Parse ``path`` (at most ``limit`` bytes); raise InputError naming the file, line and problem
    if it is not valid TOML."""
    return parse_toml(decode_utf8(read_bytes(path, what, limit), path, what), path, what)


def decode_utf8(data: bytes, path: Path | str, what: str = "file") -> str:
    """``data`` as text (a leading byte-order mark dropped); InputError naming the offset of the
    first byte that is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{what} {path}: not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset {exc.start} "
            f"(line {line}) cannot be decoded",
            fix="save the file as UTF-8 (TOML files are UTF-8)",
        ) from None
    return text.removeprefix("\ufeff")


def parse_toml(text: str, path: Path | str, what: str = "file") -> dict[str, Any]:
    """Parse ``text``; InputError naming ``path``, the line and the problem when it is not valid
    TOML, nests deeper than ``MAX_DEPTH`` or holds an integer outside 64 bits."""
    try:
        doc = tomllib.loads(text)
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
    except RecursionError:
        raise InputError(f"{what} {path}: arrays or tables nested more than {MAX_DEPTH} levels deep",
                         fix="flatten the nesting") from None
    except ValueError as exc:  # tomllib's int() on more digits than Python converts (sys.int_info)
        m = _LONG_DIGITS.search(text)
        if m is None:
            raise InputError(f"{what} {path}: cannot read it as TOML: {exc}") from None
        line = text.count(chr(10), 0, m.start()) + 1
        key = short_key(key_at(text, m.start()))
        raise InputError(f"{what} {path}: {key + ' (line ' + str(line) + ')' if key else 'line ' + str(line)}: "
                         f"integer of {len(m.group().replace('_', ''))} digits; TOML integers are 64-bit "
                         f"({INT_MIN} .. {INT_MAX})", fix="correct the number") from None
    _check_values(doc, path, what)
    return doc


_BARE_KEY = r'[A-Za-z0-9_-]+|"[^"\n]*"|\'[^\'\n]*\''
_KEY_BEFORE = re.compile(rf"((?:{_BARE_KEY})(?:\s*\.\s*(?:{_BARE_KEY}))*)\s*=\s*[+-]?$")
_TABLE_OPEN = re.compile(rf"((?:{_BARE_KEY})(?:\s*\.\s*(?:{_BARE_KEY}))*)\s*=\s*\{{[^{{}}]*$")
_HEADER = re.compile(r"^[ \t]*\[\[?[ \t]*([^\]\n]+?)[ \t]*\]\]?[ \t]*(?:#[^\n]*)?$", re.MULTILINE)


def _plain(key: str) -> str:
    return ".".join(p.strip().strip("\"'") for p in key.split("."))


def key_at(text: str, pos: int) -> str:
    """The dotted key whose value starts at ``pos`` of a TOML document, as far as one line and the
    table header above it say ('shape.m' for ``m = 9...`` under ``[shape]`` or in ``shape = {m = 9...}``);
    '' where it cannot be told. For naming a value that the parser itself could not read."""
    start = text.rfind("\n", 0, pos) + 1
    before = text[max(start, pos - 256):pos]  # a key is short: a megabyte line is not searched
    m = _KEY_BEFORE.search(before)
    if m is None:
        return ""
    parts = [_plain(m.group(1))]
    outer = _TABLE_OPEN.search(before[:m.start()])
    if outer is not None:
        parts.insert(0, _plain(outer.group(1)))
    first = outer.start() if outer is not None else m.start()
    headers = list(_HEADER.finditer(text, 0, start))
    if headers and not before[:first].strip():
        parts.insert(0, _plain(headers[-1].group(1)))
    return ".".join(parts)


def _check_values(doc: dict[str, Any], path: Path | str, what: str) -> None:
    """Refuse integers outside 64 bits and nesting deeper than ``MAX_DEPTH``, naming the key;
    iterative, so that a deep document cannot exhaust the stack here either."""
    stack: list[tuple[str, Any, int]] = [("", doc, 0)]
    while stack:
        key, value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{what} {path}: {key or 'the document'}: nested more than {MAX_DEPTH} levels deep",
                             fix="flatten the nesting")
        if isinstance(value, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v, depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{key}[{i}]", v, depth + 1) for i, v in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
            raise InputError(f"{what} {path}: {key}: integer out of TOML's 64-bit range "
                             f"({INT_MIN} .. {INT_MAX})", fix="correct the number")
