"""Troubleshooting rules as data (engine/rules.toml): error text, failed checks and telemetry
windows -> the likely cause, the fix, and the knob or command that applies it.

The same rules serve the TUI's panel, `tui diagnose` on a log file, failed runs (engine.runner) and
failed checks (engine.checks). Rules are loaded and validated once; a broken rules file is a bug
and fails loudly with the rule id and field.

Logs are hostile input (megabyte lines, repeated text), so every pattern must search in linear time
(engine.regex.check_linear refuses the shapes that backtrack), and :func:`match_text` tries a pattern
only where its required literal text occurs, found with ``str.find``: a log costs one fast scan per
pattern instead of one regex step per character per pattern.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.errors import InputError
from engine.regex import (
    MAX_SPREAD,
    MIN_LITERAL,
    RequiredLiteral,
    check_linear,
    check_patterns,
    required_literal,
)
from engine.text_safety import visible
from engine.tomlio import load_toml

RULES_PATH = Path(__file__).resolve().parent / "rules.toml"

CONTEXT_LINES = 4
"""A pattern whose literal text may sit anywhere in a match (``\\d+ NaN``) is searched on the lines
holding that text and this many lines either side: the furthest such a match may reach from it."""


class Condition(BaseModel):
    """One comparison on one telemetry field of a sample."""

    model_config = ConfigDict(extra="forbid")
    field: str
    """A Sample field (tensor_activity_pct, throttle_mask, ...) or a derived one: power_ratio
    (power_w / power_limit_w), temp_margin_c (slowdown - current), clock_ratio (sm / max clock)."""
    op: Literal["<", "<=", ">", ">=", "has_bits"]
    """Comparison; has_bits is true when the field (a bit mask) shares a bit with ``value``."""
    value: float
    """Threshold (percent, watts ratio, degrees C) or bit mask."""

    def holds(self, sample: dict[str, Any]) -> bool | None:
        """True/False, or None when the sample lacks the field."""
        v = sample.get(self.field)
        if v is None:
            return None
        if self.op == "has_bits":
            return bool(int(v) & int(self.value))
        return bool({"<": v < self.value, "<=": v <= self.value, ">": v > self.value,
                     ">=": v >= self.value}[self.op])


class TelemetryCondition(BaseModel):
    """Conditions that must hold in enough samples of a window."""

    model_config = ConfigDict(extra="forbid")
    all: list[Condition] = []
    """Every one of these must hold in a sample for it to count."""
    any: list[Condition] = []
    """At least one of these must hold in a sample for it to count."""
    min_fraction: float = Field(default=0.6, gt=0, le=1)
    """Share of the samples that carry the fields which must count."""
    min_samples: int = Field(default=3, ge=1)
    """Fewer usable samples than this never match (one sample is not a window)."""
    during_run: bool = False
    """Only meaningful while a kernel runs (e.g. low utilisation): judged on the samples taken
    during the last run, never on an idle GPU."""

    @model_validator(mode="after")
    def _some(self) -> TelemetryCondition:
        if not self.all and not self.any:
            raise ValueError("a telemetry condition needs `all` or `any` conditions")
        return self

    def evaluate(self, samples: list[dict[str, Any]]) -> tuple[float, int] | None:
        """(share of usable samples that satisfy it, usable count), or None below min_samples."""
        usable = hits = 0
        for s in samples:
            alls = [c.holds(s) for c in self.all]
            anys = [c.holds(s) for c in self.any]
            if None in alls or (self.any and all(a is None for a in anys)):
                continue
            usable += 1
            if all(alls) and (not self.any or any(a for a in anys if a)):
                hits += 1
        if usable < self.min_samples:
            return None
        return hits / usable, usable


class Rule(BaseModel):
    """A known failure pattern and what to do about it."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    """Stable identifier, shown next to every match."""
    title: str
    """The symptom, in a few words."""
    cause: str
    """The likely cause."""
    fix: str
    """What to do, in words."""
    patterns: list[str] = []
    """Regular expressions matched (case-insensitively) against error text and logs; each must pass
    engine.regex.check_linear, because logs are untrusted input."""
    checks: list[str] = []
    """Check ids whose failure or warning this rule explains."""
    telemetry: TelemetryCondition | None = None
    """A condition over a window of telemetry samples."""
    knob: dict[str, str | int | bool] | None = None
    """Knob changes that apply the fix, e.g. {block_size = "smaller"} or {memory_pipelining = 3}."""
    command: str | None = None
    """A command that applies or investigates the fix."""
    sticky: bool = False
    """A CUDA error that poisons the context: the engine process must restart."""
    engine_note: str = ""
    """What the cockpit itself does about it (runs each task in a fresh process, shows '-'), for
    its own runs; ``fix`` stands alone for a log from elsewhere."""
    yields_to: list[str] = []
    """Ids of more specific rules: a line one of them explains does not fire this rule too."""
    priority: int = Field(default=50, ge=0, le=100)
    """Orders rules that match the same text: the more specific rule ranks higher."""

    @field_validator("patterns")
    @classmethod
    def _compile(cls, v: list[str]) -> list[str]:
        return check_linear(check_patterns(v))

    @model_validator(mode="after")
    def _matches_something(self) -> Rule:
        if not (self.patterns or self.checks or self.telemetry):
            raise ValueError("a rule needs patterns, checks or a telemetry condition")
        return self

    def regexes(self) -> list[re.Pattern[str]]:
        return [re.compile(p, re.IGNORECASE | re.MULTILINE) for p in self.patterns]


class Match(BaseModel):
    """One rule that matched, with the evidence that made it match."""

    id: str
    """The rule's id."""
    title: str
    """The rule's title."""
    cause: str
    """The likely cause."""
    fix: str
    """What to do."""
    knob: dict[str, str | int | bool] | None = None
    """Knob changes the cockpit can apply."""
    command: str | None = None
    """A command that applies or investigates the fix."""
    sticky: bool = False
    """The engine process must restart (the CUDA context is poisoned)."""
    engine_note: str = ""
    """What the cockpit does about it, for its own runs (``Rule.engine_note``)."""
    evidence: str = ""
    """The line (or telemetry summary, or check) that matched, its control characters visible
    (``engine.text_safety``): a log is text from elsewhere."""
    score: float = 0.0
    """Higher is a better explanation; matches are returned best first."""

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def load_rules(path: Path | None = None) -> list[Rule]:
    """Load and validate the rules file; InputError naming the rule and field on any problem."""
    path = path or RULES_PATH
    data = load_toml(path, "rules")
    rules: list[Rule] = []
    for i, raw in enumerate(data.get("rule", [])):
        try:
            rules.append(Rule.model_validate(raw))
        except ValidationError as exc:
            where = raw.get("id", f"#{i + 1}") if isinstance(raw, dict) else f"#{i + 1}"
            errs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise InputError(f"rules file {path}: rule {where}: {errs}") from None
    ids = [r.id for r in rules]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(f"rules file {path}: duplicate rule ids {', '.join(dupes)}")
    for r in rules:
        unknown = [y for y in r.yields_to if y not in ids]
        if unknown:
            raise InputError(f"rules file {path}: rule {r.id}: yields_to names no rule: {', '.join(unknown)}")
    return rules


_Compiled = tuple[re.Pattern[str], RequiredLiteral]
"""A rule's compiled pattern and the literal text every match contains."""


@lru_cache(maxsize=1)
def _default_rules() -> tuple[tuple[Rule, list[_Compiled]], ...]:
    return tuple((r, [(rx, required_literal(rx.pattern)) for rx in r.regexes()]) for r in load_rules())


def rules() -> list[Rule]:
    """The built-in rules, loaded once."""
    return [r for r, _ in _default_rules()]


def _match(rule: Rule, evidence: str, score: float) -> Match:
    return Match(id=rule.id, title=rule.title, cause=rule.cause, fix=rule.fix, knob=rule.knob,
                 command=rule.command, sticky=rule.sticky, engine_note=rule.engine_note,
                 evidence=visible(evidence[:300]), score=round(score, 3))


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:end if end >= 0 else len(text)].strip()


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _lowered(text: str) -> str:
    """``text`` in lower case with every character where it was, so that positions carry over
    (``str.lower`` lengthens a few characters, such as the dotted capital I)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


DENSE_AFTER = 64
"""Tries of a pattern near its literal text after which, when that text is so frequent that the
tries cost more than the text itself, the rest of the text is searched in one pass instead."""


def _windows(text: str, low: str, literal: str) -> Iterator[tuple[int, int | None]]:
    """Spans of ``text``, in order and merged, of the lines holding ``literal`` (found in ``low``)
    and ``CONTEXT_LINES`` lines either side; the end is None (the rest of the text) once a span
    has merged ``DENSE_AFTER`` lines."""
    n, pos = len(text), 0
    cur: list[int] | None = None
    while (i := low.find(literal, pos)) >= 0:
        start = text.rfind("\n", 0, i) + 1
        for _ in range(CONTEXT_LINES):
            if start == 0:
                break
            start = text.rfind("\n", 0, start - 1) + 1
        line_end = text.find("\n", i + len(literal))
        end = line_end = n if line_end < 0 else line_end
        for _ in range(CONTEXT_LINES):
            if end >= n:
                break
            nxt = text.find("\n", end + 1)
            end = n if nxt < 0 else nxt
        if cur is not None and start <= cur[1]:
            cur[1], cur[2] = max(cur[1], end), cur[2] + 1
            if cur[2] > DENSE_AFTER:
                yield cur[0], None
                return
        else:
            if cur is not None:
                yield cur[0], cur[1]
            cur = [start, end, 1]
        pos = line_end + 1
    if cur is not None:
        yield cur[0], cur[1]


def _search(compiled: _Compiled, text: str, low: str) -> re.Match[str] | None:
    """The first match of the pattern, tried only where its literal text occurs: from each start
    the literal allows when its place in a match is (nearly) fixed, else on the lines around it.
    Where the literal is dense (a line of it repeated), one pass over the rest is cheaper."""
    rx, literal = compiled
    if len(literal.text) < MIN_LITERAL:
        return rx.search(text)
    if literal.before is None or literal.before[1] - literal.before[0] > MAX_SPREAD:
        for start, end in _windows(text, low, literal.text):
            m = rx.search(text, start) if end is None else rx.search(text, start, end)
            if m is not None:
                return m
        return None
    first, last = literal.before
    i = low.find(literal.text)
    since, tries = i, 0
    while i >= 0:
        tries += 1
        if tries > DENSE_AFTER and tries * 16 > i - since:
            return rx.search(text, max(0, i - last))
        for start in range(max(0, i - last), i - first + 1):
            m = rx.match(text, start)
            if m is not None:
                return m
        i = low.find(literal.text, i + 1)
    return None


YIELD_RETRIES = 64
"""Lines a rule that yields (``Rule.yields_to``) is searched past, for one that no more specific
rule explains, before it gives up."""


def _first_hit(compiled: list[_Compiled], text: str, low: str, offset: int = 0) -> tuple[int, int] | None:
    """(position of the first match of any pattern at or after ``offset``, patterns matching)."""
    hits = [m for m in (_search(c, text[offset:], low[offset:]) if offset else _search(c, text, low)
                        for c in compiled) if m is not None]
    return (offset + min(m.start() for m in hits), len(hits)) if hits else None


def match_text(text: str) -> list[Match]:
    """Rules whose patterns occur in ``text`` (a traceback, dmesg, nvidia-smi, a build log), best
    first. Score = priority, plus a little for each further pattern of the rule that matched. A rule
    that yields to others (``Rule.yields_to``) matches only a line none of them explains.

    Time is linear in ``len(text)``: each pattern is searched only near its literal text (see
    ``CONTEXT_LINES``), and patterns are checked to search in linear time when rules load."""
    if not text:
        return []
    low = _lowered(text)
    found: list[tuple[Rule, list[_Compiled], int, int]] = []
    for rule, compiled in _default_rules():
        first = _first_hit(compiled, text, low)
        if first is not None:
            found.append((rule, compiled, *first))
    lines = {rule.id: _line_at(text, pos) for rule, _, pos, _ in found}
    out = []
    for rule, compiled, pos, n in found:
        taken = {lines[r] for r in rule.yields_to if r in lines}
        tries = 0
        hit: tuple[int, int] | None = (pos, n)
        while hit is not None and _line_at(text, hit[0]) in taken:
            nl, tries = text.find("\n", hit[0]), tries + 1
            hit = None if nl < 0 or tries > YIELD_RETRIES else _first_hit(compiled, text, low, nl + 1)
        if hit is not None:
            out.append(_match(rule, _line_at(text, hit[0]), rule.priority + 0.1 * (hit[1] - 1)))
    return sorted(out, key=lambda m: -m.score)


def match_check(result: Any) -> list[Match]:
    """Rules that explain a failed or warning check result (anything with id, status, detail)."""
    if getattr(result, "status", None) not in ("fail", "warn"):
        return []
    cid, detail = result.id, getattr(result, "detail", "")
    out = [_match(r, f"check {cid}: {detail}", r.priority + 100) for r in rules() if cid in r.checks]
    seen = {m.id for m in out}
    out += [m for m in match_text(detail) if m.id not in seen]
    return sorted(out, key=lambda m: -m.score)


def _derived(sample: dict[str, Any]) -> dict[str, Any]:
    s = dict(sample)
    if s.get("power_w") is not None and s.get("power_limit_w"):
        s["power_ratio"] = s["power_w"] / s["power_limit_w"]
    if s.get("temperature_c") is not None and s.get("temperature_slowdown_c") is not None:
        s["temp_margin_c"] = s["temperature_slowdown_c"] - s["temperature_c"]
    if s.get("sm_clock_mhz") is not None and s.get("sm_clock_max_mhz"):
        s["clock_ratio"] = s["sm_clock_mhz"] / s["sm_clock_max_mhz"]
    return s


def _summary(cond: TelemetryCondition, samples: list[dict[str, Any]]) -> str:
    parts = []
    for c in cond.all + cond.any:
        vals = [s[c.field] for s in samples if s.get(c.field) is not None]
        if not vals:
            continue
        if c.op == "has_bits":
            parts.append(f"{c.field} & {int(c.value):#x} in {sum(1 for v in vals if int(v) & int(c.value))} samples")
        else:
            parts.append(f"median {c.field} {statistics.median(vals):.3g} ({c.op} {c.value:g})")
    return ", ".join(dict.fromkeys(parts))


def match_telemetry(samples: list[dict[str, Any]], run_samples: list[dict[str, Any]] | None = None) -> list[Match]:
    """Rules whose telemetry condition holds over the window ``samples`` (dicts with
    engine.nvml.Sample's fields), best first. Rules marked ``during_run`` are judged on
    ``run_samples`` (those taken while the last run was in flight) and skipped without them."""
    def clean(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_derived(s) for s in rows if isinstance(s, dict) and not s.get("error")]

    window, run_window = clean(samples), clean(run_samples or [])
    out = []
    for rule in rules():
        if rule.telemetry is None:
            continue
        res = rule.telemetry.evaluate(run_window if rule.telemetry.during_run else window)
        if res is None or res[0] < rule.telemetry.min_fraction:
            continue
        frac, usable = res
        used = run_window if rule.telemetry.during_run else window
        evidence = f"{round(frac * usable)}/{usable} samples: {_summary(rule.telemetry, used)}"
        out.append(_match(rule, evidence, rule.priority + frac))
    return sorted(out, key=lambda m: -m.score)


def rule_by_id(rule_id: str) -> Rule | None:
    return next((r for r in rules() if r.id == rule_id), None)


_SOAK_REHEARSAL = re.compile(r"^SIMULATED fault (\w+)")


def rehearsed_fault(result: Any) -> str | None:
    """The fault a run on the simulated device was asked to inject (``fault=nan``, ``soak fault
    corrupt``), or None: what such a run "found" is the rehearsal working, never a finding about
    this machine, and reports and rule lists leave it out."""
    if not getattr(result, "simulated", False):
        return None
    fault = getattr(getattr(result, "task", None), "fault", None)
    fault = getattr(fault, "value", fault)
    if fault not in (None, "", "none"):
        return f"fault={fault}"
    for line in getattr(result, "log", None) or []:
        m = _SOAK_REHEARSAL.match(str(line))
        if m:
            return f"soak fault {m.group(1)}"
    return None


SLOW_KNOBS_FACTOR = 2.0
"""A run this many times slower than the fastest stored run of the same task with other knobs
fires ``knobs-much-slower``."""


def _knobs(block_size: Any, stages: Any) -> str:
    return f"{block_size or 'default'}/{'off' if stages == 0 else stages if stages is not None else 'default'}"


def match_slow_knobs(result: Any, store: Any) -> list[Match]:
    """``knobs-much-slower`` for an ok run at least ``SLOW_KNOBS_FACTOR`` times slower than the
    fastest stored ok bench of the same kernel, shape, dtype, profile and kind of device whose
    knobs differ (the same knobs, slower, is the card or the noise, not the choice)."""
    timing = getattr(result, "timing", None)
    if getattr(result, "status", None) is None or result.status.value != "ok" or timing is None:
        return []
    task = result.task
    mine = (str(task.block_size) if task.block_size is not None else None, task.memory_pipelining)
    best = None
    for r in store.list(kernel=task.kernel, profile=result.profile, limit=500, status="ok", kind="bench"):
        if r.id == result.run_id or (r.shape, r.dtype, r.simulated) != (task.shape, task.dtype, result.simulated):
            continue
        if not r.median_ms or r.correct is False or (r.block_size, r.memory_pipelining) == mine:
            continue
        if best is None or r.median_ms < best.median_ms:
            best = r
    if best is None or timing.median_ms < SLOW_KNOBS_FACTOR * best.median_ms:
        return []
    text = (f"this run took {timing.median_ms:.4g} ms with {_knobs(*mine)}: {timing.median_ms / best.median_ms:.1f}x "
            f"the {best.median_ms:.4g} ms of run #{best.id} with {_knobs(best.block_size, best.memory_pipelining)}")
    return [m for m in match_text(text) if m.id == "knobs-much-slower"]
