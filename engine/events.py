"""Typed, serialisable events the engine process emits while it runs a task."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

STAGES = ("compile", "load", "inputs", "warmup", "timed", "verify", "peers", "collect")
"""The stages of one run, in order."""

Stage = Literal["compile", "load", "inputs", "warmup", "timed", "verify", "peers", "collect"]

LogLevel = Literal["info", "warning", "error"]


class StageEvent(BaseModel):
    """A stage started or finished (``state``), with a short human detail."""

    kind: Literal["stage"] = "stage"
    stage: Stage
    state: Literal["start", "done", "skip", "fail"]
    detail: str = ""
    elapsed_s: float = 0.0


class ProgressEvent(BaseModel):
    """Progress within a stage (warm-up or timed runs): ``done`` of ``total``."""

    kind: Literal["progress"] = "progress"
    stage: Stage
    done: int
    total: int


class LogEvent(BaseModel):
    """A line for the run log (compiler report, fallback notices, warnings)."""

    kind: Literal["log"] = "log"
    level: LogLevel = "info"
    message: str


class TrialEvent(BaseModel):
    """A tune's candidate started (``state`` 'start') or finished ('done', with its trial: knobs,
    status, time, reason); ``done`` of ``total`` candidates so far, the step of the search it belongs
    to with that step's own count, and the best time yet."""

    kind: Literal["trial"] = "trial"
    state: Literal["start", "done", "peer"]
    trial: dict
    """The trial (``engine.tuner.Trial`` as a dict); for state 'peer', {name, label, median_ms, baseline}."""
    done: int = 0
    """Candidates timed so far (a confirmation re-times one: it does not count again)."""
    total: int = 0
    """Candidates known so far: the search adds schedule variations round by round, so this grows;
    a progress display counts ``step_done`` of ``step_total`` instead, which does not."""
    step: str = ""
    """The step of the search: 'tiles/stages' (the first screening, resumed after the variations),
    'variations round N' (around the fastest so far), 'confirming' (the fastest timed again); '' for
    events outside the steps (a pruned candidate, a peer, a trial lost with its engine process)."""
    step_done: int = 0
    step_total: int = 0
    """The step's candidates timed and its candidates, fixed when the step starts."""
    best_ms: float | None = None


class SoakEvent(BaseModel):
    """A soak's window (t_s, ms, launches, clocks, power, temperature, throttle mask, verified) or
    facts about the GPU it runs on (``info``: gpu_name, nvml_index, pci_bus_id, counters_before)."""

    kind: Literal["soak"] = "soak"
    window: dict | None = None
    info: dict | None = None


Event = StageEvent | ProgressEvent | LogEvent | TrialEvent | SoakEvent


def event_from_dict(d: dict) -> Event:
    kind = d.get("kind")
    if kind == "stage":
        return StageEvent.model_validate(d)
    if kind == "progress":
        return ProgressEvent.model_validate(d)
    if kind == "trial":
        return TrialEvent.model_validate(d)
    if kind == "soak":
        return SoakEvent.model_validate(d)
    return LogEvent.model_validate(d)
