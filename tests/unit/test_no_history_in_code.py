"""Code says what is, not how it got there: no session numbers, lab-notebook citations or dated
measurements in engine/, kernels/, tui/, tests/ or bench/. A choice that needs its evidence cites a decision
record under docs/decisions/ (``ADR-0007``); the lab notebooks live in their own folder under docs/."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("engine", "kernels", "tui", "tests", "bench")
PROSE_DATE_DIRS = ("engine", "kernels", "tui")
"""Where an ISO date in a comment or docstring is history; in tests, timestamps are data."""
SUFFIXES = (".py", ".cu", ".cuh", ".toml", ".tcss")
SELF = Path(__file__).resolve()

NOTEBOOK = "NO" "TES"
"""The lab notebooks' file name (written in two parts so that this file does not match itself)."""
ANYWHERE = (
    (re.compile(r"\bsessions? \d+", re.I), "a session number"),
    (re.compile(r"\b" + NOTEBOOK + r"(?:-[A-Za-z0-9]+)?(?:\.md)?\b"), "a lab notebook citation"),
    (re.compile(r"\bdocs/" + NOTEBOOK.lower() + "/"), "a lab notebook citation"),
    (re.compile(r"\bmeasurement \d+\b", re.I), "a notebook measurement number"),
)
"""History on any line of any scanned file: code, strings, comments."""
NOTEBOOK_LINE = re.compile(r"\b" + NOTEBOOK.lower() + r"\b|" + NOTEBOOK, re.I)
VERSION = re.compile(r"(?<![\w./])v\d{1,3}(?:-v\d{1,3})?\b(?![.\w])")
"""A notebook version (a 'v' and a number, or a range of two); flagged on a line that names the
notebooks."""
PROSE_VERSION = re.compile(r"(?:\(|, |; |\bsince |\buntil |\bafter |\bbefore )(v\d{1,3}(?:-v\d{1,3})?)\b(?![.\w])")
"""A notebook version cited in prose (in parentheses, after a comma, or after since/until/after/
before) in a comment or docstring."""
ISO_DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")

FIX = ("Code says what is, not how it got there. Move the session, notebook version, date or "
       "measurement diary to a decision record under docs/decisions/ (context, decision, evidence "
       "with the numbers and the notebook section they come from) and keep a one-line reason in "
       "the code that cites it, e.g. '(ADR-0007)'. Lab notebooks live under docs/.")


def _python_prose(text: str) -> dict[int, str]:
    """Line number -> the comment and docstring text on that line (every bare string statement
    counts: module, class, function and attribute docstrings)."""
    prose: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                prose[tok.start[0]] = prose.get(tok.start[0], "") + " " + tok.string
    except (tokenize.TokenError, SyntaxError):
        pass
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return prose
    lines = text.splitlines()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                prose[n] = prose.get(n, "") + " " + lines[n - 1]
    return prose


_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _c_prose(text: str, line_comments: bool = True) -> dict[int, str]:
    """Line number -> the comment text on that line (``//`` and ``/* */``)."""
    prose: dict[int, str] = {}
    for m in _C_COMMENT.finditer(text):
        if m.group(0).startswith("//") and not line_comments:
            continue
        first = text.count("\n", 0, m.start()) + 1
        for i, part in enumerate(m.group(0).split("\n")):
            prose[first + i] = prose.get(first + i, "") + " " + part
    return prose


def _toml_prose(text: str) -> dict[int, str]:
    return {n: line[line.index("#"):] for n, line in enumerate(text.splitlines(), 1) if "#" in line}


def prose_lines(path: Path, text: str) -> dict[int, str]:
    """The comment and docstring text of a file, by line."""
    if path.suffix == ".py":
        return _python_prose(text)
    if path.suffix in (".cu", ".cuh"):
        return _c_prose(text)
    if path.suffix == ".tcss":
        return _c_prose(text, line_comments=False)
    return _toml_prose(text)


def findings(path: Path, text: str, dates: bool) -> list[tuple[int, str, str]]:
    """(line, what, the matched text) for every piece of history in one file's text; ``dates``: ISO
    dates in its comments and docstrings count too."""
    out: list[tuple[int, str, str]] = []
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        for pattern, what in ANYWHERE:
            out += [(n, what, m.group(0)) for m in pattern.finditer(line)]
        if NOTEBOOK_LINE.search(line):
            out += [(n, "a notebook version", m.group(0)) for m in VERSION.finditer(line)]
    for n, prose in prose_lines(path, text).items():
        if not NOTEBOOK_LINE.search(lines[n - 1]):
            out += [(n, "a notebook version", m.group(1)) for m in PROSE_VERSION.finditer(prose)]
        if dates:
            out += [(n, "a dated measurement", m.group(0)) for m in ISO_DATE.finditer(prose)]
    return sorted(set(out))


def scanned_files() -> list[Path]:
    files = []
    for d in SCANNED_DIRS:
        for path in sorted((ROOT / d).rglob("*")):
            rel = path.relative_to(ROOT).parts
            if (path.suffix in SUFFIXES and path.is_file() and path.resolve() != SELF
                    and "__snapshots__" not in rel and "__pycache__" not in rel):
                files.append(path)
    return files


def test_no_history_in_code() -> None:
    files = scanned_files()
    assert len(files) > 50, f"scanned only {len(files)} files: is ROOT ({ROOT}) the repository?"
    bad = []
    for path in files:
        rel = path.relative_to(ROOT)
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, what, hit in findings(path, text, dates=rel.parts[0] in PROSE_DATE_DIRS):
            bad.append(f"{rel}:{n}: {what}: {hit!r}")
    assert not bad, FIX + "\n" + "\n".join(bad)


# The scanner itself: history is caught, legitimate text is not.

def _hits(text: str, suffix: str = ".py", dates: bool = True) -> list[str]:
    return [hit for _, _, hit in findings(Path("x" + suffix), text, dates)]


# The samples of history are assembled from placeholders ({S} session, {N} / {n} the notebooks'
# name, {v} a version's letter, {M} a notebook's measurement), so that this file does not itself hold what it forbids.
HISTORY_SAMPLES = [
    ('X = 1\n"""Measured up to 12 % slower (bench/{N}.md, {S} 6)."""\n', "{N}.md"),
    ("# 0.95 until {S} 17, when M = 5926 read faster\n", "{S} 17"),
    ("# faster ({N}-sm90 {v}37)\n", "{N}-sm90"),
    ("# faster ({N}-sm90 {v}33-{v}35)\n", "{v}33-{v}35"),
    ("# wrote wrong values ({N}-membound, {M} 3).\n", "{M} 3"),
    ("# see docs/{n}/{N}-fp32.md\n", "docs/{n}/"),
    ('def f():\n    """with more tiles the ring measured slower, {v}31)."""\n', "{v}31"),
    ("# level in the hot duels (ratio 0.999-1.007 since {v}13)\n", "{v}13"),
    ('def f():\n    """Calibrated on an H200 (2026-11-30, seed shape)."""\n', "2026-11-30"),
    ("x = 1  # measured 2026-12-01 on the H200\n", "2026-12-01"),
]
PARTS = {"S": "sess" + "ion", "N": NOTEBOOK, "n": NOTEBOOK.lower(), "v": "v", "M": "measure" + "ment"}


@pytest.mark.parametrize("text, hit", [(t.format(**PARTS), h.format(**PARTS)) for t, h in HISTORY_SAMPLES])
def test_history_is_caught(text: str, hit: str) -> None:
    assert hit in _hits(text)


@pytest.mark.parametrize("text, suffix", [
    ('asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];");\n', ".cu"),
    ("float v0 = a; st(pack2(v0, v1));\n", ".cu"),
    ('KIND = {"apiVersion": "batch/v1", "kind": "Job"}\n"""A v1 List that kubectl takes."""\n', ".py"),
    ('"""Every session\'s --profile; a closed SSH session."""\n', ".py"),
    ('STAMP = "2025-05-14T10:00:00"  # a timestamp in data, not in prose\n', ".py"),
    ('"""The label, e.g. \'tuned YYYY-MM-DD, 12 candidates\' (ADR-0002)."""\n', ".py"),
    ("// SWAP_AB (the Python module's SWAP_TILES, ADR-0007)\n", ".cu"),
    ("/* the v2 layout of a widget */\nScreen { height: 1fr; }\n", ".tcss"),
])
def test_legitimate_text_passes(text: str, suffix: str) -> None:
    assert _hits(text, suffix) == []


def test_dates_are_data_in_tests() -> None:
    assert _hits('def test_x():\n    """Saved 2025-05-14."""\n', dates=False) == []
