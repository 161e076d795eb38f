"""`tui tune`: search a kernel's knobs for the fastest correct configuration at one shape.

The search space is the plan's: every BLOCK_SIZE and MEMORY_PIPELINING the kernel offers for the
profile and shape (``engine.plan`` prunes what does not fit, each skipped candidate with its
reason), then, around the fastest few, every schedule choice the kernel has (consumers, clusters,
tile order, split of the last round, split-K, ...). The kernel's cost model (its simulated
efficiency) orders the search, with the planner's own choice first: a prior, not the answer. The
survivors are timed and verified in the engine process with the engine's timer, in the regime asked
(``burst``: each after a rest; ``sustained``: each after back-to-back launches at the board's power
cap), beside the kernel's peers timed the same way. Every trial goes to the store as it lands, so a
tune that is cancelled or crashes keeps what it measured; a hung or crashing candidate is recorded
as such and the search goes on in a fresh engine process. The fastest correct trial becomes the
tuning cache's entry (``engine.tuning_cache``)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.errors import InputError
from engine.events import Event, TrialEvent
from engine.planner import Plan, PlanError, plan
from engine.process import run_in_engine_process
from engine.profiles import Profile
from engine.task import BackendName, TaskSpec, format_pipelining
from engine.tuning_cache import REGIMES, CacheScope, gpu_label, now_iso

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


# --- the search space ----------------------------------------------------------------------------
def _predicted_ms(p: Plan) -> float | None:
    """The kernel's cost model's time for a plan (``KernelSpec.predict_ms``: a roofline with the
    tile's reuse and its rounds of tiles), or None where the model has nothing to say."""
    from kernels import get_spec

    dtype = p.task.dtype.value
    try:
        return float(get_spec(p.task.kernel).predict_ms(p.task, p.limits, p.profile.sol_peak_flops(dtype),
                                                         p.profile.bandwidth_bytes_per_s))
    except Exception:
        return None


def _check(base: TaskSpec, profile: Profile, cand: Candidate) -> tuple[Plan | None, str]:
    """(plan, '') where the candidate fits, else (None, the reason naming the limit)."""
    try:
        p = plan(cand.task(base), profile)
    except PlanError as exc:
        return None, str(exc)
    return (p, "") if p.ok else (None, p.error_text())


def _held_fixed(base_plan: Plan, task: TaskSpec) -> TaskSpec:
    """The task every candidate starts from: the plan's resolved task with only the knobs the user
    set (tile, stages, schedule choices); what the planner chose or lent is the tuner's to vary."""
    return base_plan.task.model_copy(update={"block_size": task.block_size, "memory_pipelining": task.memory_pipelining,
                                             "schedule": dict(task.schedule)})


def search_space(task: TaskSpec, profile: Profile) -> tuple[Plan, list[Candidate], list[Trial]]:
    """(the task's own plan, the (tile, stages) candidates that fit in search order, the ones
    pruned with their reasons). Knobs the task sets are held fixed; the planner's choice comes first,
    then the rest by predicted time."""
    try:
        base_plan = plan(task, profile)
    except PlanError as exc:
        raise InputError(str(exc)) from None
    if not base_plan.ok:
        raise InputError(base_plan.error_text(), fix=base_plan.fix)
    base = _held_fixed(base_plan, task)
    tiles = [task.block_size] if task.block_size else list(base_plan.block_size_options)
    out: list[Candidate] = []
    skipped: list[Trial] = []
    # the default as the planner gives it: with the schedule it lends from a tuned shape (a knob the
    # tuner varies, not one held fixed), beside the same tile and depth with the kernel's own choices
    lent = {k: v for k, v in base_plan.task.schedule.items() if k not in task.schedule}
    default = Candidate(str(base_plan.task.block_size), int(base_plan.task.memory_pipelining or 0), lent,
                        _predicted_ms(base_plan))
    seen = {default.key}
    for tile in tiles:
        try:
            stages = ([task.memory_pipelining] if task.memory_pipelining is not None else
                      list(plan(base.model_copy(update={"block_size": tile}), profile).pipelining_options))
        except PlanError:
            stages = []
        if not stages:
            skipped.append(Trial(tile, 0, {}, "skipped", reason=f"no MEMORY_PIPELINING fits BLOCK_SIZE={tile}"))
        for st in stages:
            cand = Candidate(tile, int(st), {})
            if cand.key in seen:
                continue
            seen.add(cand.key)
            p, why = _check(base, profile, cand)
            if p is None:
                skipped.append(Trial(tile, int(st), {}, "skipped", reason=why))
            else:
                out.append(Candidate(tile, int(st), {}, _predicted_ms(p)))
    out.sort(key=lambda c: (c.predicted_ms is None, c.predicted_ms or 0.0))
    return base_plan, [default, *out], skipped


def _resolved_key(block_size: str, stages: int, p: Plan) -> str:
    """A build's identity among the variations: its knobs and every schedule choice as planned."""
    return f"plan {block_size}/{stages} " + ",".join(f"{k}={v}" for k, v in sorted(p.schedule.items()))


def variations(base: TaskSpec, profile: Profile, seeds: list[Trial],
               seen: set[str]) -> tuple[list[Candidate], list[Trial]]:
    """Schedule choices around the fastest timed trials: each choice the kernel has that neither the
    task nor the seed sets, set to each value other than the one the planner resolved, one at a
    time on top of the seed's own choices; (candidates, pruned). A variation that resolves to a build
    already offered (multicast=w is cluster=2 on an unswapped tile) is not offered again."""
    out: list[Candidate] = []
    skipped: list[Trial] = []
    for t in seeds:
        try:
            p = plan(base.model_copy(update={"block_size": t.block_size, "memory_pipelining": t.memory_pipelining,
                                              "schedule": {**base.schedule, **t.schedule}}), profile)
        except PlanError:
            continue
        seen.add(_resolved_key(t.block_size, t.memory_pipelining, p))
        for knob in p.schedule_options:
            if knob.name in base.schedule or knob.name in t.schedule:
                continue
            for value in knob.values:
                if p.schedule.get(knob.name) == value:
                    continue
                cand = Candidate(t.block_size, t.memory_pipelining, {**t.schedule, knob.name: value}, phase=2)
                if cand.key in seen:
                    continue
                seen.add(cand.key)
                cp, why = _check(base, profile, cand)
                if cp is None:
                    skipped.append(Trial(cand.block_size, cand.memory_pipelining, cand.schedule, "skipped",
                                         reason=why, phase=2))
                elif (rk := _resolved_key(cand.block_size, cand.memory_pipelining, cp)) in seen:
                    continue
                else:
                    seen.add(rk)
                    out.append(Candidate(cand.block_size, cand.memory_pipelining, cand.schedule,
                                         _predicted_ms(cp), phase=2))
    return out, skipped


# --- running it ----------------------------------------------------------------------------------
def tune(task: TaskSpec, profile_name: str | None = None, *, budget_s: float = 60.0, regime: str = "burst",
         store: Any = None, on_event: Callable[[Event], None] | None = None,
         cancel: threading.Event | None = None, profiles: Any = None, backend_choice: Any = None,
         stall_s: float = STALL_S) -> TuneResult:
    """Tune ``task`` (knobs it sets are held fixed) within ``budget_s`` seconds of wall time. Saves
    every trial and, where one is correct, the cache entry in ``store``. Raises InputError for a task
    that cannot run at all; anything that happens after is in the result."""
    from engine.runner import prepare

    if regime not in REGIMES:
        raise InputError(f"regime={regime!r}: one of {', '.join(REGIMES)}")
    if not 1 <= budget_s <= 86_400:
        raise InputError(f"budget={budget_s:g}: seconds of wall time for one shape, 1..86400")
    prep = prepare(task, profile_name, profiles, backend_choice)
    base_plan, candidates, skipped = search_space(task, prep.profile)
    base = _held_fixed(base_plan, task).model_copy(update={"backend": BackendName(prep.backend)})
    scope = CacheScope(store, gpu_label(prep.device_name, prep.profile, prep.simulated), prep.profile.sm_count, regime)
    res = TuneResult(task=base_plan.task, profile=prep.profile.name, gpu=scope.gpu, sm_count=scope.sm_count,
                     simulated=prep.simulated, regime=regime, budget_s=budget_s, tune_id=uuid.uuid4().hex[:12],
                     skipped=list(skipped), t_sol_ms=base_plan.t_sol_ms, notes=list(prep.notices),
                     total=len(candidates))
    key = scope.key(base_plan.task)
    t0 = time.monotonic()
    done: dict[str, Trial] = {}
    in_flight: dict[str, Any] = {}
    lock = threading.Lock()

    def handle(ev: Event) -> None:
        if isinstance(ev, TrialEvent) and ev.state == "peer":
            res.peers[str(ev.trial.get("name"))] = dict(ev.trial)
        elif isinstance(ev, TrialEvent):
            trial = Trial.from_dict(ev.trial)
            if ev.state == "start":
                in_flight["trial"] = trial
            else:
                in_flight.pop("trial", None)
                if trial.status == "skipped":
                    res.skipped.append(trial)
                else:
                    with lock:
                        if trial.key in done:  # a confirmation replaces its screening
                            res.trials[res.trials.index(done[trial.key])] = trial
                        else:
                            res.trials.append(trial)
                        done[trial.key] = trial
                    if store is not None:
                        try:
                            store.save_trial(res.tune_id, key, trial.to_dict())
                        except Exception as exc:  # the tune goes on; the note says what was not kept
                            res.notes.append(f"trial not stored: {exc}")
            res.total = max(res.total, ev.total)
        if on_event is not None:
            on_event(ev)

    if on_event is not None:  # the candidates the planner pruned, listed before any is timed
        for t in skipped:
            on_event(TrialEvent(state="done", trial=t.to_dict(), done=0, total=res.total))
    restarts = 0
    while True:
        left = budget_s - (time.monotonic() - t0)
        payload = {"task": base.model_dump(mode="json"), "profile": prep.profile.model_dump(mode="json"),
                   "backend": prep.backend, "regime": regime, "budget_s": max(0.0, left),
                   "candidates": [asdict(c) for c in candidates], "done": [t.to_dict() for t in res.trials],
                   "default_key": candidates[0].key, "fault": task.fault.value, "peers_done": sorted(res.peers),
                   "fault_key": candidates[1].key if len(candidates) > 1 else None}
        out = run_in_engine_process(_tune_entry, payload, max(left, 0.0) + stall_s + 30.0, handle, cancel,
                                    name="sol-tune", stall_s=stall_s, daemon=False)
        if out.status == "ok":
            r = out.result or {}
            res.peers.update(r.get("peers") or {})
            res.notes += [n for n in r.get("notes", []) if n not in res.notes]
            if r.get("gpu_sm_count") and r["gpu_sm_count"] != scope.sm_count:
                res.notes.append(f"the GPU has {r['gpu_sm_count']} SMs, the profile {scope.sm_count}: "
                                 "entries are keyed by the profile's")
            if not r.get("restart"):
                break
        elif out.status == "cancelled":
            res.status = "cancelled"
            break
        flying = in_flight.pop("trial", None)
        if out.status != "ok" and flying is not None and flying.key not in done:
            what = {"stalled": "timeout", "timeout": "timeout"}.get(out.status, "crashed")
            why = (f"no progress for {stall_s:g} s: killed (a hung kernel?)" if what == "timeout" else
                   f"the engine process died (exit code {out.exitcode})")
            handle(TrialEvent(state="done", trial=dict(flying.to_dict(), status=what, reason=why),
                              done=len(done) + 1, total=res.total))
        restarts += 1
        if restarts > MAX_RESTARTS or time.monotonic() - t0 >= budget_s:
            if out.status != "ok":
                res.status = "crashed"
            break
    res.elapsed_s = time.monotonic() - t0
    if not res.trials or res.best is None:
        res.status = "no_candidate" if res.status == "ok" else res.status
    if store is not None and res.best is not None:
        best, default = res.best, res.default
        try:
            store.put_tuned({**key, "block_size": best.block_size, "memory_pipelining": best.memory_pipelining,
                             "schedule": best.schedule, "median_ms": best.median_ms,
                             "default_ms": default.median_ms if default and default.correct else None,
                             "candidates": len(res.trials), "simulated": int(res.simulated), "tuned_at": now_iso(),
                             "host": _host(), "origin": None})
            res.saved = True
        except Exception as exc:
            res.notes.append(f"tuning cache not written: {exc}")
    return res


def _host() -> str:
    import socket

    return socket.gethostname()


def _tune_entry(payload: dict[str, Any], conn: Any) -> None:
    from engine.tune_worker import tune_main

    tune_main(payload, conn)

