"""Soak: the kernel back to back for a duration, as DCGM's targeted stress runs a GPU, watched.

The engine process (``engine.soak_worker``, by ``engine.soak_options``) launches the kernel in windows of about a quarter of a
second and reports each window: the mean launch time, SM and memory clocks, power, temperature and
throttle reasons. Every ``verify_every_s`` it re-verifies the output against the reference (silent
data corruption shows there first) and re-reads the ECC counters; before and after it reads ECC and
the kernel log's Xid events. The first error stops the soak and is named by the troubleshooting rule
that explains it. The caller keeps every window as it arrives, so a soak that is cancelled, hangs
or crashes still has its series.

The summary compares the median launch time of the first minute with the last (``drift_pct``; the
span is a third of the soak when it is shorter than three minutes), says for what share of the time
the clocks were throttled, and fails on an error or on a slowdown above ``max_drift_pct``."""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.errors import InputError
from engine.events import Event, SoakEvent
from engine.nvml import HARMFUL_THROTTLE_MASK, decode_throttle
from engine.soak_options import SoakOptions

DRIFT_SPAN_S = 60.0
"""The first and the last minute are compared (a third of the soak each, when it is shorter)."""
SoakStatus = Literal["ok", "error", "drift", "cancelled"]


_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


MAX_DURATION_S = 366 * 86400.0
"""The longest soak (or verification interval) accepted: a year; beyond is a typo."""


def parse_duration(text: str, flag: str = "--duration") -> float:
    """'30m', '90s', '1h30m', '2.5h', '500ms' or plain seconds ('45') -> seconds; InputError naming
    ``flag`` for 0, a negative or an unreadable value."""
    raw = str(text).strip().lower().replace(" ", "")
    total = None
    if re.fullmatch(r"[-+]?\d+(\.\d+)?", raw):
        total = float(raw)
    elif re.fullmatch(r"((\d+(\.\d+)?)(ms|sec|min|s|m|h|d))+", raw):
        total = sum(float(n) * _UNITS[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ms|sec|min|s|m|h|d)", raw))
    if total is None:
        raise InputError(f"{flag}={text!r}: not a duration", fix=f"write e.g. {flag} 30m, 90s, 1h30m or 45 (seconds)")
    if not total > 0:
        raise InputError(f"{flag}={text!r}: must be more than 0 s", fix=f"write e.g. {flag} 30m or 90s")
    if not total <= MAX_DURATION_S:  # also inf, from a number too long for a float
        raise InputError(f"{flag}={text!r}: at most {MAX_DURATION_S / 86400:g} days",
                         fix=f"write e.g. {flag} 30m, 12h or 7d")
    return total


def parse_percent(text: str, flag: str) -> float:
    """'5%' or '5' -> 5.0; InputError naming ``flag`` when negative or unreadable."""
    raw = str(text).strip().rstrip("%").strip()
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"{flag}={text!r}: not a percentage", fix=f"write e.g. {flag} 5%") from None
    if not 0 <= v < 1e6:
        raise InputError(f"{flag}={text!r}: must be 0 or more", fix=f"write e.g. {flag} 5%")
    return v


class SoakSummary(BaseModel):
    """What a soak found on one GPU."""

    device: int
    simulated: bool
    ok: bool
    """No error and no drift above the threshold: the exit status is 0."""
    status: SoakStatus
    error: str | None = None
    error_kind: str | None = None
    rule: dict[str, Any] | None = None
    """The troubleshooting rule naming the error (id, title, cause, fix)."""
    duration_s: float
    """Asked for."""
    elapsed_s: float = 0.0
    """Soaked (the windows' total)."""
    windows: int = 0
    launches: int = 0
    first_ms: float | None = None
    """Median launch time over the first span (``span_s``)."""
    last_ms: float | None = None
    span_s: float | None = None
    drift_pct: float | None = None
    """(last / first - 1) x 100: positive = slower at the end."""
    max_drift_pct: float
    drift_exceeded: bool = False
    median_ms: float | None = None
    throttled_share_pct: float | None = None
    """Share of the soaked time the clocks were held down (power cap, thermal, power brake)."""
    throttle_reasons: list[str] = Field(default_factory=list)
    verifications: int = 0
    verify_failures: int = 0
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_max: float | None = None
    temperature_c_max: float | None = None
    power_w_mean: float | None = None
    counters_before: dict[str, Any] = Field(default_factory=dict)
    counters_after: dict[str, Any] = Field(default_factory=dict)
    counters_delta: dict[str, Any] = Field(default_factory=dict)
    findings: list[str] = Field(default_factory=list)
    """Telemetry rules the series matches (e.g. thermal-slowdown): why a drift happened."""
    gpu_name: str | None = None
    run_id: int | None = None
    series: list[dict[str, Any]] = Field(default_factory=list, exclude=True)
    """Every window: t_s, ms, launches, sm/mem clock, power, temperature, throttle mask, verified."""


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(series: list[dict[str, Any]], opts: SoakOptions, device: int, simulated: bool,
              error: str | None = None, error_kind: str | None = None, cancelled: bool = False,
              before: dict[str, Any] | None = None, after: dict[str, Any] | None = None) -> SoakSummary:
    """The summary of a series (``SoakSummary``); ``error`` is named by the rule that matches it."""
    from engine.runner import match_rules
    from engine.soak_health import delta

    ms = [w["ms"] for w in series if w.get("ms")]
    elapsed = series[-1]["t_s"] if series else 0.0
    span = min(DRIFT_SPAN_S, elapsed / 3) if elapsed else None
    first = [w["ms"] for w in series if w.get("ms") and span and w["t_s"] <= span]
    last = [w["ms"] for w in series if w.get("ms") and span and w["t_s"] > elapsed - span]
    f_ms, l_ms = _median(first), _median(last)
    drift = 100.0 * (l_ms / f_ms - 1.0) if f_ms and l_ms else None
    throttled, total, mask = 0.0, 0.0, 0
    prev = 0.0
    for w in series:
        dt = max(0.0, w["t_s"] - prev)
        prev = w["t_s"]
        m = w.get("throttle_mask")
        if m is None:
            continue
        total += dt
        mask |= int(m)
        if int(m) & HARMFUL_THROTTLE_MASK:
            throttled += dt
    clocks = [w["sm_clock_mhz"] for w in series if w.get("sm_clock_mhz") is not None]
    temps = [w["temperature_c"] for w in series if w.get("temperature_c") is not None]
    power = [w["power_w"] for w in series if w.get("power_w") is not None]
    verified = [w.get("verified") for w in series if w.get("verified") is not None]
    exceeded = drift is not None and drift > opts.max_drift_pct
    rules = match_rules(error) if error else []
    status: SoakStatus = "cancelled" if cancelled else "error" if error else "drift" if exceeded else "ok"
    return SoakSummary(
        device=device, simulated=simulated, ok=status == "ok", status=status, error=error, error_kind=error_kind,
        rule=rules[0] if rules else None, duration_s=opts.duration_s, elapsed_s=elapsed, windows=len(series),
        launches=sum(int(w.get("launches") or 0) for w in series), first_ms=f_ms, last_ms=l_ms, span_s=span,
        drift_pct=drift, max_drift_pct=opts.max_drift_pct, drift_exceeded=exceeded, median_ms=_median(ms),
        throttled_share_pct=100.0 * throttled / total if total else None,
        throttle_reasons=decode_throttle(mask & HARMFUL_THROTTLE_MASK), verifications=len(verified),
        verify_failures=sum(1 for v in verified if not v),
        sm_clock_mhz_min=min(clocks) if clocks else None, sm_clock_mhz_max=max(clocks) if clocks else None,
        temperature_c_max=max(temps) if temps else None, power_w_mean=statistics.fmean(power) if power else None,
        counters_before=before or {}, counters_after=after or {},
        counters_delta=delta(before, after) if before and after else {},
        findings=_findings(series), series=list(series))


def _findings(series: list[dict[str, Any]]) -> list[str]:
    """Telemetry rules over the windows (each window a sample): thermal slowdown, power cap."""
    try:
        from engine.troubleshoot import match_telemetry
    except ImportError:
        return []
    rows = [{k: w.get(k) for k in ("throttle_mask", "temperature_c", "temperature_slowdown_c", "power_w",
                                   "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz")} for w in series]
    return [m.id for m in match_telemetry(rows)][:3]


def run_soak(prep: Any, opts: SoakOptions, on_event: Callable[[Event], None] | None = None,
             cancel: threading.Event | None = None, store: Any = None) -> tuple[SoakSummary, Any]:
    """Soak ``prep`` (a ``PreparedRun``) in an engine process; blocks until the soak ends, fails, is
    cancelled or hangs (no word from the engine process for the task's timeout). Returns the
    summary and the RunResult stored for it (the series in the store's soak table)."""
    from engine.job import JobRequest
    from engine.process import run_in_engine_process
    from engine.soak_result import soak_run_result
    from engine.worker import child_main

    series: list[dict[str, Any]] = []
    info: dict[str, Any] = {}

    def seen(ev: Event) -> None:
        if isinstance(ev, SoakEvent):
            if ev.window:
                series.append(ev.window)
            if ev.info:
                info.update(ev.info)
        if on_event is not None:
            on_event(ev)

    request = JobRequest(kind="soak", task=prep.task, profile=prep.profile, backend=prep.backend,
                         plan=prep.plan.kernel, options=opts)
    t0 = time.monotonic()
    timeout = opts.duration_s * 1.5 + prep.task.timeout_s + 30.0
    out = run_in_engine_process(child_main, request, timeout, seen, cancel, name="sol-soak",
                                stall_s=prep.task.timeout_s)
    result = out.result or {}
    error, kind = result.get("error"), result.get("error_kind")
    if out.status == "stalled":
        error, kind = (f"timed out after {prep.task.timeout_s:g} s without a word from the engine process during "
                       f"the soak (a hung kernel): it was killed", "hang")
    elif out.status == "timeout":
        error, kind = f"timed out after {timeout:g} s: the soak ran past its duration and was killed", "timeout"
    elif out.status == "crashed":
        error, kind = f"the engine process died during the soak (exit code {out.exitcode})", "crashed"
    before = result.get("counters_before") or info.get("counters_before")
    after = result.get("counters_after")
    if after is None and before is not None and out.status != "cancelled":  # read them here when the child could not
        from engine.soak_health import read_counters

        after = read_counters(info.get("nvml_index"), info.get("pci_bus_id")) if not prep.simulated else before
        if error is None and (found := _new(before, after)):
            error, kind = found, "counters"
    summary = summarize(series, opts, prep.task.device, prep.simulated, error, kind,
                        cancelled=out.status == "cancelled", before=before, after=after)
    summary.gpu_name = result.get("gpu_name") or info.get("gpu_name")
    run = soak_run_result(prep, summary, result, out.log, time.monotonic() - t0)
    if store is not None:
        try:
            summary.run_id = store.save(run)
            store.save_soak_series(summary.run_id, series)
        except Exception as exc:  # the summary is still shown; the log says it was not stored
            run.log.append(f"not stored: {exc}")
    return summary, run


def _new(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    from engine.soak_health import new_errors

    return new_errors(before, after)

