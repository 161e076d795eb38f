"""The engine process of a tune: times candidates one after another on one set of inputs and
reports each over the pipe (``TrialEvent``), then one result message. Spawned by ``engine.tuner``.

The search runs here so that it can follow the measurements (schedule choices are tried around
the fastest timed tiles) without a round trip per candidate; the parent keeps every trial it was
sent, and restarts this process with the trials done when a candidate kills it."""

from __future__ import annotations

import time
import traceback
from typing import Any

from engine.events import LogEvent, TrialEvent
from engine.tune_search import variations
from engine.tune_types import (
    CONFIRM_SHARE,
    CONFIRM_TOP,
    SCREEN_MIN,
    SCREEN_S,
    VARIATION_SEEDS,
    VARIATION_SHARE,
    Candidate,
    Trial,
)
from engine.worker import event_sender, task_and_profile


def tune_main(payload: dict[str, Any], conn: Any) -> None:
    """Entry point: run the search, then send {"type": "result", "result": {...}}."""
    send = event_sender(conn)
    task, profile = task_and_profile(payload)
    candidates = [Candidate(**c) for c in payload["candidates"]]
    done: dict[str, Trial] = {}
    for d in payload["done"]:
        t = Trial.from_dict(d)
        done[t.key] = t
    result: dict[str, Any] = {"notes": []}
    t0 = time.monotonic()
    budget = float(payload["budget_s"])
    bench: Any = None
    try:
        bench = _bench(payload["backend"], task, profile, payload["regime"])
        result["gpu_sm_count"] = bench.sm_count
        for note in bench.setup():
            send(LogEvent(level="info", message=note))
            result["notes"].append(note)
        for peer in bench.peers(skip=set(payload.get("peers_done") or ())):
            send(TrialEvent(state="peer", trial=peer))
        total = len(candidates)

        def best_ms() -> float | None:
            ok = [t.time_ms for t in done.values() if t.correct]
            return min(ok) if ok else None

        full = task.iterations
        screen_until = budget * (1.0 - CONFIRM_SHARE)
        first_until = budget * (1.0 - CONFIRM_SHARE - VARIATION_SHARE)

        def screen_iters() -> int:
            """Launches for a screening: ``SCREEN_S`` of the default's (or the prior's) time."""
            ref = next((t.median_ms for t in done.values() if t.default and t.correct), None)
            ref = ref or candidates[0].predicted_ms
            if not ref:
                return full
            return max(min(SCREEN_MIN, full), min(full, int(SCREEN_S * 1e3 / ref) + 1))

        def one(cand: Candidate, iters: int, confirm: bool = False) -> Trial:
            start = Trial(cand.block_size, cand.memory_pipelining, cand.schedule, "running",
                          predicted_ms=cand.predicted_ms, default=cand.key == payload["default_key"],
                          phase=cand.phase, iterations=iters, confirmed=confirm)
            send(TrialEvent(state="start", trial=start.to_dict(), done=len(done), total=total, best_ms=best_ms()))
            fault = payload.get("fault") if cand.key == payload.get("fault_key") and not confirm else "none"
            t1 = time.monotonic()
            trial = bench.trial(cand, start, fault or "none", iters)
            trial.wall_s = time.monotonic() - t1
            done[cand.key] = trial
            send(TrialEvent(state="done", trial=trial.to_dict(), done=len(done), total=total, best_ms=best_ms()))
            return trial

        def run(lst: list[Candidate], until: float) -> bool:
            """Screen ``lst`` in order until ``until`` seconds of the budget are spent; False when
            the process must restart (a candidate left the CUDA context unusable)."""
            bench.prefetch([c for c in lst if c.key not in done])
            for cand in lst:
                if cand.key in done:
                    continue
                if done and time.monotonic() - t0 >= until:
                    return True
                is_default = cand.key == payload["default_key"]
                one(cand, full if is_default else screen_iters())
                if bench.broken:
                    return False
            return True

        def confirm() -> bool:
            """The fastest screened candidates timed again with every launch, in the same regime."""
            screened = sorted((t for t in done.values() if t.correct and t.iterations < full),
                              key=lambda t: t.time_ms)[:CONFIRM_TOP]
            by_key = {c.key: c for c in candidates}
            for t in screened:
                cand = by_key.get(t.key) or Candidate(t.block_size, t.memory_pipelining, t.schedule,
                                                      t.predicted_ms, t.phase)
                if time.monotonic() - t0 >= budget:
                    break
                one(cand, full, confirm=True)
                if bench.broken:
                    return False
            return True

        def vary() -> bool:
            """Rounds of schedule variations, each around the fastest correct trials so far (a
            variation that won is varied again, one more choice at a time), until a round adds
            nothing new or the screening's share is spent; False when the process must restart."""
            nonlocal total, candidates
            # what the rounds have offered, pruned or resolved to (``variations`` adds to it), so a
            # pruned variation is reported once and a build is never offered twice under two names
            seen: set[str] = set()
            while time.monotonic() - t0 < screen_until:
                seeds = sorted((t for t in list(done.values()) if t.correct),
                               key=lambda t: t.time_ms)[:VARIATION_SEEDS]
                seen |= set(done) | {c.key for c in candidates}
                extra, pruned = variations(task, profile, seeds, seen)
                if not extra and not pruned:
                    return True
                total += len(extra) + len(pruned)
                for t in pruned:
                    send(TrialEvent(state="done", trial=t.to_dict(), done=len(done), total=total, best_ms=best_ms()))
                extra.sort(key=lambda c: (c.predicted_ms is None, c.predicted_ms or 0.0))
                candidates += extra
                if not run(extra, screen_until):
                    return False
            return True

        # tiles and stages first, then the schedule variations around the fastest of them, then
        # what the first screening left, until the confirmations' share
        if run(candidates, first_until):
            first = [c for c in candidates if c.phase == 1]
            if not vary() or not run(first, screen_until) or not confirm():
                result["restart"] = True
        else:
            result["restart"] = True
    except Exception as exc:  # the tune reports what failed; its trials are already with the parent
        result["notes"].append(f"tune stopped: {type(exc).__name__}: {exc}")
        result["error"] = traceback.format_exc().splitlines()[-6:]
    finally:
        if bench is not None:
            bench.close()
    try:
        conn.send({"type": "result", "result": result})
    finally:
        conn.close()


def _bench(backend: str, task: Any, profile: Any, regime: str) -> Any:
    if backend == "cuda":
        from engine.backends.cuda_tune import CudaTrials

        return CudaTrials(task, profile, regime)
    from engine.backends.sim_tune import SimTrials

    return SimTrials(task, profile, regime)
