"""The tune's shared types and settings: a candidate, a trial, a whole tune's result, and the budget
shares, rests and launch counts the caller (``engine.tuner``), the engine process
(``engine.tune_worker``) and the devices it times on (``engine.backends.device``) all
go by. In their own module so that none of those imports another for them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.task import TaskSpec, format_pipelining

VARIATION_SEEDS = 3
"""Schedule choices are searched around this many of the fastest timed trials, in rounds: a
variation among the fastest is varied again by the choices it leaves to the planner."""
BURST_REST_S = 0.3
"""The longest rest before each candidate and peer in the burst regime (unless the task asks for
its own); the rest taken is ``REST_PER_BUSY`` times the GPU time of the timing before, within
[``REST_MIN_S``, this]."""
REST_PER_BUSY = 5.0
REST_MIN_S = 0.05
SCREEN_S = 0.025
"""GPU time one candidate's screening timing aims at (its launch count: at least ``SCREEN_MIN``, at
most the task's iterations); the fastest few are then timed again with the task's full count."""
SCREEN_MIN = 20
CONFIRM_TOP = 3
CONFIRM_SHARE = 0.15
"""The share of the budget kept for timing the fastest ``CONFIRM_TOP`` again with every launch."""
VARIATION_SHARE = 0.25
"""The share of the budget the first screening (tiles and stages in the prior's order) leaves for
the schedule variations around its fastest; what they leave goes back to the first screening's
remaining candidates (ADR-0002)."""
SUSTAIN_HEAT_S = 8.0
"""Sustained regime: back-to-back launches before the first timing, to bring the board to its cap."""
SUSTAIN_HOLD_S = 1.0
"""Sustained regime: back-to-back launches of each candidate and peer right before its timing."""
STALL_S = 60.0
"""A candidate that sends nothing for this long (compile, load, timing) is killed as hung."""
MAX_RESTARTS = 8


@dataclass(frozen=True)
class Candidate:
    """One configuration to time: the two knobs and the schedule choices it names explicitly (the
    planner decides the rest), with the cost model's predicted time (the search order)."""

    block_size: str
    memory_pipelining: int
    schedule: dict[str, Any] = field(default_factory=dict)
    predicted_ms: float | None = None
    phase: int = 1

    @property
    def key(self) -> str:
        return knob_label(self.block_size, self.memory_pipelining, self.schedule)

    def task(self, base: TaskSpec) -> TaskSpec:
        return base.model_copy(update={"block_size": self.block_size, "memory_pipelining": self.memory_pipelining,
                                       "schedule": {**base.schedule, **self.schedule}})


def knob_label(block_size: Any, stages: Any, schedule: dict[str, Any] | None = None) -> str:
    """'128x128/5' or '128x128/5 consumers=cooperative,cluster=1'."""
    text = f"{block_size}/{format_pipelining(stages)}"
    if schedule:
        text += " " + ",".join(f"{k}={v}" for k, v in sorted(schedule.items()))
    return text


@dataclass
class Trial:
    """A candidate's outcome: timed and verified (``ok`` / ``incorrect``), failed (``compile_error``,
    ``launch_error``, ``timeout``, ``crashed``) or pruned before compiling (``skipped``)."""

    block_size: str
    memory_pipelining: int
    schedule: dict[str, Any]
    status: str
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    sol_pct: float | None = None
    predicted_ms: float | None = None
    reason: str = ""
    resolved: dict[str, Any] = field(default_factory=dict)
    """The schedule as the planner resolved it (every choice)."""
    default: bool = False
    """The planner's own choice for the task (the untuned default)."""
    phase: int = 1
    iterations: int = 0
    """Timed launches behind ``median_ms`` (screening takes fewer; the confirmed ones the task's)."""
    confirmed: bool = False
    """Timed again with the task's full launch count after the screening."""
    wall_s: float = 0.0
    """Wall time of this trial in the engine process: compile (or cache), load, rest, timing, verify."""

    @property
    def key(self) -> str:
        return knob_label(self.block_size, self.memory_pipelining, self.schedule)

    @property
    def correct(self) -> bool:
        return self.status == "ok" and self.median_ms is not None

    @property
    def time_ms(self) -> float:
        """The median for ranking: infinite where the trial has none."""
        return float("inf") if self.median_ms is None else self.median_ms

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trial:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class TuneResult:
    """A whole tune: every trial, the skipped candidates with their reasons, the peers timed the same
    way, the best correct trial and the planner's default for comparison."""

    task: TaskSpec
    profile: str
    gpu: str
    sm_count: int
    simulated: bool
    regime: str
    budget_s: float
    tune_id: str
    status: str = "ok"
    """ok (budget spent or every candidate tried), cancelled, crashed (gave up restarting), or
    no_candidate (nothing could be timed)."""
    trials: list[Trial] = field(default_factory=list)
    skipped: list[Trial] = field(default_factory=list)
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Peer name -> {label, median_ms, baseline}."""
    elapsed_s: float = 0.0
    t_sol_ms: float = 0.0
    saved: bool = False
    notes: list[str] = field(default_factory=list)
    total: int = 0

    @property
    def best(self) -> Trial | None:
        """The fastest correct trial timed with the task's full launch count (the default and the
        confirmed ones), else the fastest correct screening."""
        ok = [t for t in self.trials if t.correct]
        full = [t for t in ok if t.iterations >= self.task.iterations]
        pool = full or ok
        return min(pool, key=lambda t: t.time_ms) if pool else None

    @property
    def default(self) -> Trial | None:
        return next((t for t in self.trials if t.default), None)

    def peer_ms(self, name: str) -> float | None:
        p = self.peers.get(name)
        return None if p is None else p.get("median_ms")

    def to_dict(self) -> dict[str, Any]:
        best, default = self.best, self.default
        return {"status": self.status, "tune_id": self.tune_id, "kernel": self.task.kernel,
                "shape": self.task.shape, "dtype": self.task.dtype.value, "fusion": self.task.fusion,
                "profile": self.profile, "gpu": self.gpu, "sm_count": self.sm_count, "simulated": self.simulated,
                "regime": self.regime, "budget_s": self.budget_s, "elapsed_s": round(self.elapsed_s, 2),
                "t_sol_ms": self.t_sol_ms, "candidates_total": self.total, "timed": len(self.trials),
                "best": None if best is None else best.to_dict(),
                "default": None if default is None else default.to_dict(),
                "speedup_vs_default": (None if best is None or default is None or not default.correct
                                       else default.time_ms / best.time_ms),
                "peers": self.peers, "saved": self.saved, "notes": self.notes,
                "trials": [t.to_dict() for t in self.trials], "skipped": [t.to_dict() for t in self.skipped]}
