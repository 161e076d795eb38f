"""Validating regular expressions: user-supplied ones (profile name patterns) must compile; the
troubleshooting rules' ones must also run in linear time.

Python's ``re`` backtracks, and `tui diagnose` runs the rules over logs nobody vetted: a pattern
such as ``A.*B`` rescans the rest of the line from every ``A`` on a line of repeated ``A``\\s, and
``\\s*:?\\s*`` tries every split of a long run of spaces. :func:`check_linear` refuses the shapes
that can do that (rather than depending on a non-backtracking engine such as RE2, which would be a
compiled dependency for ~150 short patterns), and :func:`required_literal` gives the text every
match contains, so that lines without it are never searched at all.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

_c: Any
_p: Any
if sys.version_info >= (3, 11):  # the parser `re` compiles with (sre_parse before 3.11)
    from re import _constants as _c  # type: ignore[attr-defined,no-redef]
    from re import _parser as _p  # type: ignore[attr-defined,no-redef]
else:  # pragma: no cover
    import sre_constants as _c
    import sre_parse as _p

MAX_BOUND = 128
"""A repeat of at most this many characters costs a bounded amount per start; a larger or
unbounded one (``*``, ``+``, ``{n,}``) must be one of the shapes :func:`check_linear` accepts."""

MIN_LITERAL = 3
"""The shortest literal text worth prefiltering lines on (see :func:`required_literal`); a pattern
with a shorter one is searched over the whole text, in linear time but slower."""

MAX_SPREAD = 8
"""A literal whose distance from the match's start varies by at most this much is matched from each
possible start, instead of searching the lines around it."""

_BIG = 1 << 16
_FLAGS = re.IGNORECASE | re.MULTILINE
"""The flags the troubleshooting rules are compiled with."""

_NL = ord("\n")
_UNIVERSE = frozenset(range(256)) | frozenset(map(ord, "\u0660\u017f\u2028\u212a\u3000\ufeff"))
"""Characters used to compare classes: Latin-1 plus a few that classes treat specially (an Arabic
digit, the long s and Kelvin sign that fold to ASCII letters, Unicode spaces)."""
_CATEGORY = {
    getattr(_c, name): frozenset(c for c in _UNIVERSE if re.fullmatch(rx, chr(c)))
    for name, rx in (("CATEGORY_DIGIT", r"\d"), ("CATEGORY_NOT_DIGIT", r"\D"), ("CATEGORY_SPACE", r"\s"),
                     ("CATEGORY_NOT_SPACE", r"\S"), ("CATEGORY_WORD", r"\w"), ("CATEGORY_NOT_WORD", r"\W"))
}
_WORD = _CATEGORY[_c.CATEGORY_WORD]
_CHAR_OPS = (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN, _c.CATEGORY)
_REPEAT_OPS = tuple(getattr(_c, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_c, n))
_MAX_PATHS = 1024


def check_patterns(patterns: list[str]) -> list[str]:
    """Return ``patterns`` unchanged; ValueError naming the first one that does not compile."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"pattern {p!r} is not a valid regular expression: {exc}") from None
    return patterns


def check_linear(patterns: list[str], flags: int = _FLAGS) -> list[str]:
    """Return ``patterns`` unchanged; ValueError naming the first one whose search time could grow
    faster than the text (see :func:`linear_problem`)."""
    for p in patterns:
        problem = linear_problem(p, flags)
        if problem:
            raise ValueError(f"pattern {p!r} could be slow on long lines: {problem}")
    return patterns


@dataclass(frozen=True)
class _Chars:
    """One character class, repeated ``lo`` to ``hi`` times (1, 1 for a plain character)."""

    chars: frozenset[int]
    lo: int
    hi: int


@dataclass(frozen=True)
class _Anchor:
    """A zero-width item: ``line`` (^), ``word`` (\\b) or ``other`` ($, lookarounds)."""

    kind: str


class _Unsafe(Exception):
    pass


def linear_problem(pattern: str, flags: int = _FLAGS) -> str | None:
    """Why a backtracking search for ``pattern`` could take more than linear time, or None.

    Accepted: repeats of one character class only (no nested or multi-character repeats, no
    backreferences); every repeat of more than ``MAX_BOUND`` either ends the pattern (it then
    succeeds at once), or follows a mandatory character it cannot match, a ``^`` (for a class
    without newline) or a ``\\b`` before word characters, so that the runs it scans from different
    starts do not overlap; and two repeats whose classes share a character are separated by a
    mandatory character the first cannot match, so that the text between them splits one way only.
    These are checked on every way through the pattern (each alternative, each optional part
    present and absent).
    """
    try:
        parsed = _p.parse(pattern, flags)
        icase = bool(parsed.state.flags & re.IGNORECASE)
        dotall = bool(parsed.state.flags & re.DOTALL)
        for path in _paths(parsed, icase, dotall):
            problem = _path_problem(path)
            if problem:
                return problem
    except _Unsafe as exc:
        return str(exc)
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    return None


@dataclass(frozen=True)
class RequiredLiteral:
    """Text every match of a pattern contains, and where it sits in the match."""

    text: str
    """Literal ASCII characters (lower case when the pattern ignores case); "" when there are none."""
    before: tuple[int, int] | None
    """Fewest and most characters a match holds before ``text``; None when there is no bound."""


def required_literal(pattern: str, flags: int = _FLAGS) -> RequiredLiteral:
    """The run of literal characters that every match of ``pattern`` contains, for a prefilter:
    of the runs of ``MIN_LITERAL`` characters or more, the longest of those at a nearly fixed
    distance from the match's start (at most ``MAX_SPREAD`` apart), else the longest."""
    parsed = _p.parse(pattern, flags)
    icase = bool(parsed.state.flags & re.IGNORECASE)
    runs: list[RequiredLiteral] = []
    run: list[str] = []
    lo = hi = 0
    run_at = (0, 0)

    def close() -> None:
        if run:
            runs.append(RequiredLiteral("".join(run), run_at if run_at[1] <= _BIG else None))
            run.clear()

    def walk(seq: Any) -> None:
        nonlocal lo, hi, run_at
        for op, av in seq:
            if op is _c.SUBPATTERN:
                walk(av[-1])
                continue
            if op is _c.LITERAL and av < 128:
                if not run:
                    run_at = (lo, hi)
                run.append(chr(av).lower() if icase else chr(av))
            else:
                close()
            w_lo, w_hi = _p.SubPattern(parsed.state, [(op, av)]).getwidth()
            lo, hi = lo + w_lo, min(hi + w_hi, _BIG + 1)

    walk(parsed)
    close()
    long = [r for r in runs if len(r.text) >= MIN_LITERAL]
    near = [r for r in long if r.before is not None and r.before[1] - r.before[0] <= MAX_SPREAD]
    return max(near or long or runs or [RequiredLiteral("", None)], key=lambda r: len(r.text))


def _chars(op: Any, av: Any, icase: bool, dotall: bool) -> frozenset[int]:
    if op is _c.LITERAL:
        return _fold({av}, icase)
    if op is _c.NOT_LITERAL:
        return _UNIVERSE - _fold({av}, icase)
    if op is _c.ANY:
        return _UNIVERSE if dotall else _UNIVERSE - {_NL}
    if op is _c.CATEGORY:
        return _CATEGORY[av]
    s: set[int] = set()
    negate = False
    for iop, iav in av:
        if iop is _c.NEGATE:
            negate = True
        elif iop is _c.LITERAL:
            s.add(iav)
        elif iop is _c.RANGE:
            s |= {c for c in _UNIVERSE if iav[0] <= c <= iav[1]}
        elif iop is _c.CATEGORY:
            s |= _CATEGORY[iav]
        else:
            raise _Unsafe(f"unsupported class item {iop}")
    folded = _fold(s, icase)
    return _UNIVERSE - folded if negate else folded


def _fold(s: set[int], icase: bool) -> frozenset[int]:
    if not icase:
        return frozenset(s)
    return frozenset(s) | {ord(chr(c).lower()[0]) for c in s} | {ord(chr(c).upper()[0]) for c in s}


def _paths(seq: Any, icase: bool, dotall: bool) -> list[list[_Chars | _Anchor]]:
    """Every way through ``seq`` as a flat list, alternatives and optional parts expanded."""
    paths: list[list[_Chars | _Anchor]] = [[]]
    for op, av in seq:
        alts: list[list[_Chars | _Anchor]]
        if op in _CHAR_OPS:
            alts = [[_Chars(_chars(op, av, icase, dotall), 1, 1)]]
        elif op is _c.SUBPATTERN or op is getattr(_c, "ATOMIC_GROUP", None):
            alts = _paths(av[-1] if op is _c.SUBPATTERN else av, icase, dotall)
        elif op is _c.BRANCH:
            alts = [p for alt in av[1] for p in _paths(alt, icase, dotall)]
        elif op in _REPEAT_OPS:
            lo, hi, sub = av
            if hi <= 1:
                alts = ([[]] if lo == 0 else []) + (_paths(sub, icase, dotall) if hi == 1 else [])
            else:
                items = list(sub)
                while len(items) == 1 and items[0][0] is _c.SUBPATTERN:
                    items = list(items[0][1][-1])
                if len(items) != 1 or items[0][0] not in _CHAR_OPS:
                    raise _Unsafe("only a single character or class may repeat more than once "
                                  "(a repeated group can match the same text many ways)")
                (item_op, item_av), = items
                alts = [[_Chars(_chars(item_op, item_av, icase, dotall), lo, hi)]]
        elif op is _c.AT:
            kind = {_c.AT_BEGINNING: "line", _c.AT_BEGINNING_LINE: "line", _c.AT_BOUNDARY: "word"}.get(av, "other")
            alts = [[_Anchor(kind)]]
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            if any(isinstance(t, _Chars) and t.hi > 1 for p in _paths(av[1], icase, dotall) for t in p):
                raise _Unsafe("a lookaround may not repeat anything")
            alts = [[_Anchor("other")]]
        else:
            raise _Unsafe(f"{str(op).lower()} is not allowed in a rule's pattern")
        paths = [p + a for p in paths for a in alts]
        if len(paths) > _MAX_PATHS:
            raise _Unsafe(f"more than {_MAX_PATHS} alternative paths to check")
    return paths


def _path_problem(path: list[_Chars | _Anchor]) -> str | None:
    for j, t in enumerate(path):
        if not isinstance(t, _Chars) or t.hi <= 1:
            continue
        if t.hi > MAX_BOUND and j < len(path) - 1 and not _guarded(path[:j + 1], t.chars):
            return (f"a repeat of more than {MAX_BOUND} characters can rescan the same text from every "
                    "earlier start: put a character it cannot match before it, or bound it (e.g. {0,120})")
        for u in path[j + 1:]:
            if not isinstance(u, _Chars):
                continue
            if u.lo >= 1 and not (u.chars & t.chars):
                break
            if u.hi > 1 and u.chars & t.chars:
                return ("two repeats that share characters can split the same text many ways: "
                        "separate them by a character the first cannot match, or merge them")
    return None


def _guarded(upto: list[_Chars | _Anchor], chars: frozenset[int]) -> bool:
    """Whether something before the repeat (the last item of ``upto``) stops its runs from
    overlapping between starts."""
    for i, t in enumerate(upto[:-1]):
        if isinstance(t, _Chars) and t.lo >= 1 and not (t.chars & chars):
            return True
        if isinstance(t, _Anchor) and t.kind == "line" and _NL not in chars:
            return True
        if isinstance(t, _Anchor) and t.kind == "word" and chars <= _WORD:
            nxt = upto[i + 1]
            if isinstance(nxt, _Chars) and nxt.lo >= 1 and nxt.chars <= _WORD:
                return True
    return False
