"""What every backend shares: the emitter for stage events and the run context."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.events import Event, LogEvent, LogLevel, ProgressEvent, Stage, StageEvent
from engine.job import REPLANNED
from engine.profiles import Profile
from engine.task import TaskSpec
from kernels.spec import DeviceLimits, KernelPlan, KernelSpec, Refusal

LIMIT_FIELDS = ("compute_capability", "sm_count", "shared_memory_per_block_bytes", "shared_memory_per_sm_bytes",
                "registers_per_sm", "max_threads_per_block")


class RunFailure(Exception):
    """A failure inside a run that becomes a result (not a crash): status + error text."""

    def __init__(self, status: str, message: str, error_kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_kind = error_kind or status


@dataclass
class Emitter:
    """Sends typed events to the caller and keeps the stage timings and the log."""

    send: Callable[[Event], None]
    log: list[str] = field(default_factory=list)
    _t0: dict[str, float] = field(default_factory=dict)
    current: Stage | None = None

    def start(self, stage: Stage, detail: str = "") -> None:
        self.current = stage
        self._t0[stage] = time.perf_counter()
        self.send(StageEvent(stage=stage, state="start", detail=detail))

    def done(self, stage: Stage, detail: str = "") -> None:
        el = time.perf_counter() - self._t0.get(stage, time.perf_counter())
        self.send(StageEvent(stage=stage, state="done", detail=detail, elapsed_s=el))

    def skip(self, stage: Stage, detail: str) -> None:
        self.send(StageEvent(stage=stage, state="skip", detail=detail))

    def fail(self, stage: Stage, detail: str) -> None:
        el = time.perf_counter() - self._t0.get(stage, time.perf_counter())
        self.send(StageEvent(stage=stage, state="fail", detail=detail[:500], elapsed_s=el))

    def progress(self, stage: Stage, done: int, total: int) -> None:
        self.send(ProgressEvent(stage=stage, done=done, total=total))

    def info(self, message: str, level: LogLevel = "info") -> None:
        self.log.append(message)
        self.send(LogEvent(level=level, message=message))


@dataclass
class RunContext:
    """The inputs of one run inside the engine process."""

    task: TaskSpec
    profile: Profile
    spec: KernelSpec
    emit: Emitter
    plan: KernelPlan | None = None
    """The caller's plan of ``task`` against ``profile`` (None: plan here, as a tool calling a
    backend directly does)."""

    def device_plan(self, limits: DeviceLimits) -> KernelPlan:
        """The plan to render on a device with ``limits``: the caller's where the device's limits
        are the profile's; else the spec's plan against the device's own, said in the log
        (``REPLANNED``). RunFailure 'invalid' where the device refuses the task."""
        planned = DeviceLimits.from_profile(self.profile)
        if self.plan is not None and limits == planned:
            return self.plan
        out = self.spec.plan(self.task, limits)
        if isinstance(out, Refusal):
            raise RunFailure("invalid", f"{out} (on this device)", "constraint")
        if self.plan is not None:
            differ = ", ".join(f"{f} {getattr(planned, f)} -> {getattr(limits, f)}" for f in LIMIT_FIELDS
                               if getattr(planned, f) != getattr(limits, f))
            self.emit.info(f"{REPLANNED} its limits differ from profile {self.profile.name}'s ({differ})", "warning")
        return out


FAIR_REST_S = 1.0
"""The rest before ours and before each peer when a run times peers and the task asks for none: every
implementation then starts from the same rested card (a peer timed right after ours reads slow:
ADR-0004)."""


def fair_rest_s(task: TaskSpec) -> float:
    """The rest every timed implementation of this run gets: the task's, or ``FAIR_REST_S`` where it
    times peers and asks for none."""
    return task.rest_s if task.rest_s > 0 or not task.peers else FAIR_REST_S


def progress_every(total: int) -> int:
    """Emit progress about 20 times per stage, never more often than every launch."""
    return max(1, total // 20)
