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
from datetime import datetime, timezone
from typing import Any

from engine import tune_jobs
from engine.errors import InputError
from engine.events import Event, TrialEvent
from engine.job import JobRequest, TuneOptions
from engine.process import ProcessOutcome, run_in_engine_process
from engine.task import BackendName, TaskSpec
from engine.tune_search import held_fixed, search_space
from engine.tune_types import MAX_RESTARTS, STALL_S, Trial, TuneResult
from engine.tuning_cache import REGIMES, CacheScope, gpu_label, now_iso
from engine.worker import child_main


def tune(task: TaskSpec, profile_name: str | None = None, *, budget_s: float = 60.0, regime: str = "burst",
         store: Any = None, on_event: Callable[[Event], None] | None = None,
         cancel: threading.Event | None = None, profiles: Any = None, backend_choice: Any = None,
         stall_s: float = STALL_S, client: str = "engine") -> TuneResult:
    """Tune ``task`` (knobs it sets are held fixed) within ``budget_s`` seconds of wall time. Saves
    every trial and, where one is correct, the cache entry in ``store``, and notes the tune as a job
    there (``engine.tune_jobs``; ``client`` says what started it). Raises InputError for a task
    that cannot run at all; anything that happens after is in the result."""
    from engine.runner import prepare

    if regime not in REGIMES:
        raise InputError(f"regime={regime!r}: one of {', '.join(REGIMES)}")
    if not 1 <= budget_s <= 86_400:
        raise InputError(f"budget={budget_s:g}: seconds of wall time for one shape, 1..86400")
    t0 = time.monotonic()  # the budget is wall time: planning the candidates spends it too
    t0_wall = datetime.now(timezone.utc)
    prep = prepare(task, profile_name, profiles, backend_choice)
    base_plan, candidates, skipped = search_space(task, prep.profile)
    base = held_fixed(base_plan, task).model_copy(update={"backend": BackendName(prep.backend)})
    scope = CacheScope(store, gpu_label(prep.device_name, prep.profile, prep.simulated), prep.profile.sm_count, regime)
    res = TuneResult(task=base_plan.task, profile=prep.profile.name, gpu=scope.gpu, sm_count=scope.sm_count,
                     simulated=prep.simulated, regime=regime, budget_s=budget_s, tune_id=uuid.uuid4().hex[:12],
                     skipped=list(skipped), t_sol_ms=base_plan.t_sol_ms, notes=list(prep.notices),
                     total=len(candidates))
    key = scope.key(base_plan.task)
    sink = _Sink(res, store, key, on_event)
    if on_event is not None:  # the candidates the planner pruned, listed before any is timed
        for t in skipped:
            on_event(TrialEvent(state="done", trial=t.to_dict(), done=0, total=res.total))
    assert base_plan.kernel is not None, "search_space plans the task or raises"
    request = JobRequest(kind="tune", task=base, profile=prep.profile, backend=prep.backend,  # type: ignore[arg-type]
                         plan=base_plan.kernel,
                         options=TuneOptions(regime=regime, budget_s=budget_s, candidates=tuple(candidates),  # type: ignore[arg-type]
                                             default_key=candidates[0].key, fault=task.fault.value,
                                             fault_key=candidates[1].key if len(candidates) > 1 else None))
    _job(store, res, lambda: tune_jobs.started(store, res.tune_id, base_plan.task.label(), client, t0_wall))
    ended = "interrupted"
    try:
        _search(request, sink, scope.sm_count, cancel, stall_s, t0)
        res.elapsed_s = time.monotonic() - t0
        if not res.trials or res.best is None:
            res.status = "no_candidate" if res.status == "ok" else res.status
        if store is not None and res.best is not None:
            _save_best(res, store, key)
        ended = {"ok": "done"}.get(res.status, res.status.replace("_", " "))
    finally:
        best = res.best
        detail = f"best {best.median_ms:.4f} ms ({best.key})" if best is not None and best.median_ms else (
            f"{len(res.trials)} timed, no correct candidate")
        _job(store, res, lambda: tune_jobs.ended(store, res.tune_id, ended, detail))
    return res


def _job(store: Any, res: TuneResult, note: Callable[[], None]) -> None:
    """Note the tune's start or end as a job in the store; the tune goes on where it cannot."""
    if store is None:
        return
    try:
        note()
    except Exception as exc:
        res.notes.append(f"tune not noted as a job: {exc}")


class _Sink:
    """Where the engine process's trial events land: each trial in the result (a confirmation
    replaces its screening) and in the store as it arrives, the peers, the trial in flight."""

    def __init__(self, res: TuneResult, store: Any, key: dict[str, Any],
                 on_event: Callable[[Event], None] | None) -> None:
        self.res, self.store, self.key, self.on_event = res, store, key, on_event
        self.done: dict[str, Trial] = {}
        self.in_flight: Trial | None = None
        self.lock = threading.Lock()

    def __call__(self, ev: Event) -> None:
        res = self.res
        if isinstance(ev, TrialEvent) and ev.state == "peer":
            res.peers[str(ev.trial.get("name"))] = dict(ev.trial)
        elif isinstance(ev, TrialEvent):
            trial = Trial.from_dict(ev.trial)
            if ev.state == "start":
                self.in_flight = trial
            else:
                self.in_flight = None
                self.land(trial)
            res.total = max(res.total, ev.total)
        if self.on_event is not None:
            self.on_event(ev)

    def land(self, trial: Trial) -> None:
        res = self.res
        if trial.status == "skipped":
            res.skipped.append(trial)
            return
        with self.lock:
            if trial.key in self.done:  # a confirmation replaces its screening
                res.trials[res.trials.index(self.done[trial.key])] = trial
            else:
                res.trials.append(trial)
            self.done[trial.key] = trial
        if self.store is not None:
            try:
                self.store.save_trial(res.tune_id, self.key, trial.to_dict())
            except Exception as exc:  # the tune goes on; the note says what was not kept
                res.notes.append(f"trial not stored: {exc}")


def _search(request: JobRequest, sink: _Sink, sm_count: int, cancel: threading.Event | None,
            stall_s: float, t0: float | None = None) -> None:
    """Engine processes, one after another, until the search ends, the budget (counted from ``t0``,
    the start of the tune) is spent, it is cancelled or ``MAX_RESTARTS`` processes died; each new
    one is sent the trials done. A process given no time left still times the default."""
    res, opts = sink.res, request.options
    assert isinstance(opts, TuneOptions)
    t0 = time.monotonic() if t0 is None else t0
    restarts = 0
    while True:
        left = opts.budget_s - (time.monotonic() - t0)
        job = JobRequest(kind="tune", task=request.task, profile=request.profile, backend=request.backend,
                         plan=request.plan, options=_share(opts, max(0.0, left), res))
        out = run_in_engine_process(child_main, job, max(left, 0.0) + stall_s + 30.0, sink, cancel,
                                    name="sol-tune", stall_s=stall_s, daemon=False)
        if out.status == "ok":
            r = out.result or {}
            res.peers.update(r.get("peers") or {})
            res.notes += [n for n in r.get("notes", []) if n not in res.notes]
            if r.get("gpu_sm_count") and r["gpu_sm_count"] != sm_count:
                res.notes.append(f"the GPU has {r['gpu_sm_count']} SMs, the profile {sm_count}: "
                                 "entries are keyed by the profile's")
            if not r.get("restart"):
                break
        elif out.status == "cancelled":
            res.status = "cancelled"
            break
        _lost(sink, out, stall_s)
        restarts += 1
        if restarts > MAX_RESTARTS or time.monotonic() - t0 >= opts.budget_s:
            if out.status != "ok":
                res.status = "crashed"
            break


def _share(opts: TuneOptions, left: float, res: TuneResult) -> TuneOptions:
    """The options of the next engine process: the budget left, the trials and peers done."""
    return TuneOptions(regime=opts.regime, budget_s=left, candidates=opts.candidates, default_key=opts.default_key,
                       done=tuple(res.trials), peers_done=tuple(sorted(res.peers)), fault=opts.fault,
                       fault_key=opts.fault_key)


def _lost(sink: _Sink, out: ProcessOutcome, stall_s: float) -> None:
    """The trial in flight when an engine process died or hung: recorded as such."""
    flying, sink.in_flight = sink.in_flight, None
    if out.status != "ok" and flying is not None and flying.key not in sink.done:
        what = {"stalled": "timeout", "timeout": "timeout"}.get(out.status, "crashed")
        why = (f"no progress for {stall_s:g} s: killed (a hung kernel?)" if what == "timeout" else
               f"the engine process died (exit code {out.exitcode})")
        sink(TrialEvent(state="done", trial=dict(flying.to_dict(), status=what, reason=why),
                        done=len(sink.done) + 1, total=sink.res.total))


def _save_best(res: TuneResult, store: Any, key: dict[str, Any]) -> None:
    """The fastest correct trial as the tuning cache's entry (with the default's time beside it)."""
    best, default = res.best, res.default
    assert best is not None
    try:
        store.put_tuned({**key, "block_size": best.block_size, "memory_pipelining": best.memory_pipelining,
                         "schedule": best.schedule, "median_ms": best.median_ms,
                         "default_ms": default.median_ms if default and default.correct else None,
                         "candidates": len(res.trials), "simulated": int(res.simulated), "tuned_at": now_iso(),
                         "host": _host(), "origin": None})
        res.saved = True
    except Exception as exc:
        res.notes.append(f"tuning cache not written: {exc}")


def _host() -> str:
    import socket

    return socket.gethostname()

