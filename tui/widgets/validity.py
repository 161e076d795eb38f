"""The validity badge: one line saying whether the conditions of a run let its times be trusted
(clocks steady, no throttling, no other processes on the GPU, launches queued behind the hold),
read from ``RunResult.validity``. Pure: tested without an app."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from engine import ValidityRecord

CLOCK_STEADY_FRACTION = 0.01
"""SM clocks whose lowest sample is within this share of the highest count as steady: NVML reports
clocks in steps of about 15 MHz, and a busy H100 at 1980 MHz may read one step lower now and then."""

SHORT_REASONS = {
    "software power cap": "sw power cap",
    "hardware slowdown": "hw slowdown",
    "software thermal slowdown": "sw thermal",
    "hardware thermal slowdown": "hw thermal",
    "hardware power brake slowdown": "hw power brake",
    "application clocks setting": "app clocks",
    "display clock setting": "display clocks",
}
"""NVML's clock event reasons as the badge names them (others as NVML words them)."""

OK_STYLE, WARN_STYLE, UNKNOWN_STYLE = "green", "bold yellow", "dim"


@dataclass(frozen=True)
class Part:
    """One condition of the badge: ``long`` and ``short`` wordings, and its state."""

    long: str
    short: str
    state: str
    """'ok', 'warn' (the times may not be trusted) or 'unknown' (not recorded)."""


def _clocks(v: ValidityRecord) -> Part:
    lo, hi = v.sm_clock_mhz_min, v.sm_clock_mhz_max
    if lo is None or hi is None:
        return Part("clocks not sampled", "clocks ?", "unknown")
    if hi - lo <= CLOCK_STEADY_FRACTION * hi:
        return Part(f"clocks {hi:.0f} MHz steady", f"{hi:.0f} MHz steady", "ok")
    return Part(f"clocks {lo:.0f}-{hi:.0f} MHz", f"clocks {lo:.0f}-{hi:.0f} MHz", "warn")


def _throttle(v: ValidityRecord) -> Part:
    if v.throttle_reasons_seen is None and v.harmful_throttle is None:
        return Part("throttling not sampled", "throttle ?", "unknown")
    reasons = [SHORT_REASONS.get(r, r) for r in v.throttle_reasons_seen or []]
    if v.harmful_throttle:
        words = ", ".join(reasons) or "yes"
        return Part(f"throttled: {words}", f"throttled: {words}", "warn")
    if reasons:  # clock events that do not slow a running kernel (app clocks, sync boost)
        return Part(f"no throttling ({', '.join(reasons)})", "no throttling", "ok")
    return Part("no throttling", "no throttling", "ok")


def _processes(v: ValidityRecord) -> Part:
    others = v.other_processes
    if others is None:
        return Part("other processes not checked", "procs ?", "unknown")
    if not others:
        return Part("no other processes", "no other procs", "ok")
    n = len(others)
    noun = "process" if n == 1 else "processes"
    pids = ", ".join(str(p.pid) for p in others[:2]) + (", ..." if n > 2 else "")
    return Part(f"{n} other {noun} on the GPU (pid {pids})", f"{n} other {noun} (pid {pids})", "warn")


def _queue(v: ValidityRecord) -> Part | None:
    hold = v.queue_hold
    if hold is None:
        return None
    expired = hold.expired_chunks or 0
    if expired:
        who = f" ({', '.join(hold.expired)})" if hold.expired else ""
        chunks = "?" if hold.held_chunks is None else hold.held_chunks
        return Part(f"queue hold ran out in {expired} of {chunks} chunks{who}", f"hold ran out {expired}x", "warn")
    if hold.held:
        return Part("queue held", "queue held", "ok")
    return Part("no queue hold needed", "queue ok", "ok")


def validity_parts(validity: ValidityRecord | None) -> list[Part]:
    """The badge's conditions in reading order: clocks, throttling, other processes, queue hold.
    Empty for a simulated run (its ``note`` says why) or a result that recorded none."""
    v = validity or ValidityRecord()
    if set(v.model_dump()) <= {"note"}:
        return []
    parts = [_clocks(v), _throttle(v), _processes(v)]
    queue = _queue(v)
    if queue is not None:
        parts.append(queue)
    return parts


def verdict(parts: list[Part]) -> str:
    """'valid', 'suspect' (a condition is off) or 'unchecked' (none off, some not recorded)."""
    states = {p.state for p in parts}
    if "warn" in states:
        return "suspect"
    return "unchecked" if "unknown" in states or not parts else "valid"


def validity_badge(validity: ValidityRecord | None, width: int = 200) -> Text:
    """``valid: clocks 1980 MHz steady · no throttling · no other processes · queue held`` in at
    most ``width`` cells: the long wording when it fits, else the short one for the conditions
    that are fine, else the short one for all, else cut. A condition that is off comes first, in
    the warning colour, and the verdict says 'suspect'. The simulated device's validity note is
    shown as it is."""
    parts = validity_parts(validity)
    if not parts:
        note = validity.note if validity is not None else None
        if note:
            return Text(str(note), style="bold magenta", no_wrap=True, overflow="ellipsis")
        return Text("validity: not recorded for this run", style=UNKNOWN_STYLE, no_wrap=True, overflow="ellipsis")
    word = verdict(parts)
    parts = sorted(parts, key=lambda p: p.state != "warn")  # what is off first: a cut line keeps it
    head_style = {"valid": "bold green", "suspect": WARN_STYLE, "unchecked": "bold"}[word]
    variants = [[p.long for p in parts], [p.long if p.state == "warn" else p.short for p in parts],
                [p.short for p in parts]]
    words = next((w for w in variants if len(word) + 2 + len(" · ".join(w)) <= width), variants[-1])
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"{word}: ", style=head_style)
    for i, (part, text) in enumerate(zip(parts, words, strict=True)):
        if i:
            out.append(" · ", style="dim")
        out.append(text, style={"ok": OK_STYLE, "warn": WARN_STYLE}.get(part.state, UNKNOWN_STYLE))
    if len(out) > width:
        out.truncate(width, overflow="ellipsis")
    return out
