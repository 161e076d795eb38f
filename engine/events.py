"""Typed, serialisable events the engine process emits while it runs a task."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

STAGES = ("compile", "load", "inputs", "warmup", "timed", "verify", "peers", "collect")
"""The stages of one run, in order."""

Stage = Literal["compile", "load", "inputs", "warmup", "timed", "verify", "peers", "collect"]


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
    level: Literal["info", "warning", "error"] = "info"
    message: str


Event = StageEvent | ProgressEvent | LogEvent


def event_from_dict(d: dict) -> Event:
    kind = d.get("kind")
    if kind == "stage":
        return StageEvent.model_validate(d)
    if kind == "progress":
        return ProgressEvent.model_validate(d)
    return LogEvent.model_validate(d)
