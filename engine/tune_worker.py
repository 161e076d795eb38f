"""The engine-process body of a tune: times candidates one after another on one set of inputs and
reports each over the pipe (``TrialEvent``), then returns one result. Run by ``engine.worker`` for a
``JobRequest`` of kind ``tune`` (``engine.tuner`` sends it).

A trial composes the device's stage primitives (``engine.backends.device``): plan and render the
candidate, compile, load, bind to the tune's inputs, settle in the regime, warm up, time, verify.
The search runs here so that it can follow the measurements (schedule choices are tried around the
fastest timed tiles) without a round trip per candidate; the parent keeps every trial it was sent,
and restarts this process with the trials done when a candidate kills it."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, Literal, Protocol, runtime_checkable

from engine.backends.base import Emitter, RunFailure
from engine.backends.device import Bound, Device, Inputs
from engine.backends.stages import open_device
from engine.events import LogEvent, TrialEvent
from engine.job import JobRequest, TuneOptions
from engine.sol import t_sol_ms
from engine.timing import Timing, timing_stats
from engine.tune_search import variations
from engine.tune_types import (
    BURST_REST_S,
    CONFIRM_SHARE,
    CONFIRM_TOP,
    SCREEN_MIN,
    SCREEN_S,
    VARIATION_SEEDS,
    VARIATION_SHARE,
    Candidate,
    Trial,
)
from kernels.spec import Build, plan_or_raise, render_task


@runtime_checkable
class TuneDevice(Device, Protocol):
    """What a tune needs of a device beyond the stage primitives: its regime, compiling ahead, its
    peers timed as the candidates are."""

    def regime(self, inputs: Inputs, regime: str, rest_s: float) -> list[str]:
        """Notes on how candidates are timed in ``regime``; sustained: the board heated first."""
        ...

    def settle(self, bound: Bound, regime: str, rest_s: float, busy_s: float) -> None:
        """Right before a timing: back-to-back launches (sustained) or a rest (burst)."""
        ...

    def clock(self) -> str:
        """The clock and throttle reasons right now, as text (advisory)."""
        ...

    def prefetch(self, builds: Iterable[tuple[str, Build]]) -> None:
        """Compile these builds ahead (by key) while others are timed (a device that compiles
        nothing ahead leaves them unrendered: ``builds`` may be lazy)."""
        ...

    def prefetched(self, key: str) -> None: ...

    def tune_peers(self, inputs: Inputs, skip: set[str],
                   time_fn: Callable[[str, Bound], Any]) -> list[dict[str, Any]]:
        """The peers timed as the candidates are (``time_fn``), as rows for the tune."""
        ...


def tune_body(request: JobRequest, send: Callable[[Any], None]) -> dict[str, Any]:
    """The search within the budget left; the result: notes, the GPU's SM count, ``restart`` where
    a candidate left the device unusable (the caller goes on in a fresh engine process)."""
    opts = request.options
    assert isinstance(opts, TuneOptions)
    result: dict[str, Any] = {"notes": []}
    dev: Device | None = None
    try:
        dev = open_device(request.backend, request.task, request.profile, regime=opts.regime)
        if not isinstance(dev, TuneDevice):
            raise RuntimeError(f"the {dev.name} device cannot tune")
        result["gpu_sm_count"] = dev.limits.sm_count
        search = _Search(dev, opts, Emitter(send=send), result)
        search.setup()
        if not search.run_all():
            result["restart"] = True
    except Exception as exc:  # the tune reports what failed; its trials are already with the parent
        result["notes"].append(f"tune stopped: {type(exc).__name__}: {exc}")
        result["error"] = traceback.format_exc().splitlines()[-6:]
    finally:
        if dev is not None:
            dev.close()
    return result


class _Search:
    """One engine process's share of the search: the first screening, the rounds of schedule
    variations, the rest of the first screening, the confirmations, each within its budget share."""

    def __init__(self, dev: TuneDevice, opts: TuneOptions, em: Emitter, result: dict[str, Any]) -> None:
        self.dev, self.opts, self.em, self.result = dev, opts, em, result
        self.task = dev.task
        self.candidates = list(opts.candidates)
        self.done: dict[str, Trial] = {t.key: t for t in opts.done}
        self.total = len(self.candidates)
        self.t0 = time.monotonic()
        self.budget = opts.budget_s
        self.full = self.task.iterations
        self.screen_until = self.budget * (1.0 - CONFIRM_SHARE)
        self.first_until = self.budget * (1.0 - CONFIRM_SHARE - VARIATION_SHARE)
        self.rest_s = 0.0 if opts.regime == "sustained" else (self.task.rest_s or BURST_REST_S)
        self.busy_s = 0.0
        shape = dev.spec.normalize_shape(self.task.shape)
        dtype = self.task.dtype.value
        assert dev.profile is not None, "a tune is planned against a profile"
        self.profile = profile = dev.profile
        self.t_sol = t_sol_ms(dev.spec.flops(shape), dev.spec.bytes_moved(shape, dtype),
                              profile.sol_peak_flops(dtype), profile.bandwidth_bytes_per_s)
        self.inputs: Inputs | None = None
        self.step, self.confirming, self.round = "", False, 0
        self.step_keys: list[str] = []
        """The step of the search in flight, its candidates' keys (fixed when it starts), whether it
        is the confirmations, and the variation rounds so far (see ``TrialEvent.step``)."""

    def setup(self) -> None:
        """The inputs, the regime (its notes in the log and the result), the peers not yet timed."""
        self.inputs = self.dev.inputs(rotate=True)
        for note in self.dev.regime(self.inputs, self.opts.regime, self.rest_s):
            self.em.send(LogEvent(level="info", message=note))
            self.result["notes"].append(note)
        for peer in self.dev.tune_peers(self.inputs, set(self.opts.peers_done), self.timed):
            self.em.send(TrialEvent(state="peer", trial=peer))

    def run_all(self) -> bool:
        """Tiles and stages first, then the schedule variations around the fastest of them, then
        what the first screening left, until the confirmations' share; False: restart."""
        first = [c for c in self.candidates if c.phase == 1]
        self.begin("tiles/stages", first)
        if not self.run(self.candidates, self.first_until):
            return False
        if not self.vary():
            return False
        self.begin("tiles/stages", first)
        return self.run(first, self.screen_until) and self.confirm()

    def begin(self, step: str, cands: list[Candidate], confirming: bool = False) -> None:
        """A step of the search starts: its candidates are known now, so its count never grows."""
        self.step, self.step_keys, self.confirming = step, [c.key for c in cands], confirming

    def step_done(self) -> int:
        if self.confirming:
            return sum(1 for k in self.step_keys if k in self.done and self.done[k].confirmed)
        return sum(1 for k in self.step_keys if k in self.done)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def best_ms(self) -> float | None:
        ok = [t.time_ms for t in self.done.values() if t.correct]
        return min(ok) if ok else None

    def screen_iters(self) -> int:
        """Launches for a screening: ``SCREEN_S`` of the default's (or the prior's) time."""
        ref = next((t.median_ms for t in self.done.values() if t.default and t.correct), None)
        ref = ref or self.candidates[0].predicted_ms
        if not ref:
            return self.full
        return max(min(SCREEN_MIN, self.full), min(self.full, int(SCREEN_S * 1e3 / ref) + 1))

    def report(self, state: Literal["start", "done"], trial: Trial, in_step: bool = True) -> None:
        step, step_done, step_total = (self.step, self.step_done(), len(self.step_keys)) if in_step else ("", 0, 0)
        self.em.send(TrialEvent(state=state, trial=trial.to_dict(), done=len(self.done), total=self.total,
                                step=step, step_done=step_done, step_total=step_total, best_ms=self.best_ms()))

    def one(self, cand: Candidate, iters: int, confirm: bool = False) -> bool:
        """Time ``cand``; False where it left the device unusable."""
        start = Trial(cand.block_size, cand.memory_pipelining, cand.schedule, "running",
                      predicted_ms=cand.predicted_ms, default=cand.key == self.opts.default_key,
                      phase=cand.phase, iterations=iters, confirmed=confirm)
        self.report("start", start)
        fault = self.opts.fault if cand.key == self.opts.fault_key and not confirm else "none"
        t1 = time.monotonic()
        trial, broken = self.trial(cand, start, fault or "none", iters)
        trial.wall_s = time.monotonic() - t1
        self.done[cand.key] = trial
        self.report("done", trial)
        return not broken

    def run(self, lst: list[Candidate], until: float) -> bool:
        """Screen ``lst`` in order until ``until`` seconds of the budget are spent; False when the
        process must restart (a candidate left the device unusable)."""
        self.prefetch([c for c in lst if c.key not in self.done])
        for cand in lst:
            if cand.key in self.done:
                continue
            if self.done and self.elapsed() >= until:
                return True
            if not self.one(cand, self.full if cand.key == self.opts.default_key else self.screen_iters()):
                return False
        return True

    def confirm(self) -> bool:
        """The fastest screened candidates timed again with every launch, in the same regime."""
        screened = sorted((t for t in self.done.values() if t.correct and t.iterations < self.full),
                          key=lambda t: t.time_ms)[:CONFIRM_TOP]
        by_key = {c.key: c for c in self.candidates}
        self.begin("confirming", [Candidate(t.block_size, t.memory_pipelining, t.schedule) for t in screened],
                   confirming=True)
        for t in screened:
            cand = by_key.get(t.key) or Candidate(t.block_size, t.memory_pipelining, t.schedule, t.predicted_ms,
                                                  t.phase)
            if self.elapsed() >= self.budget:
                break
            if not self.one(cand, self.full, confirm=True):
                return False
        return True

    def vary(self) -> bool:
        """Rounds of schedule variations, each around the fastest correct trials so far (a variation
        that won is varied again, one more choice at a time), until a round adds nothing new or the
        screening's share is spent; False when the process must restart."""
        # what the rounds have offered, pruned or resolved to (``variations`` adds to it), so a
        # pruned variation is reported once and a build is never offered twice under two names
        seen: set[str] = set()
        while self.elapsed() < self.screen_until:
            seeds = sorted((t for t in list(self.done.values()) if t.correct), key=lambda t: t.time_ms)[:VARIATION_SEEDS]
            seen |= set(self.done) | {c.key for c in self.candidates}
            extra, pruned = variations(self.task, self.profile, seeds, seen)
            if not extra and not pruned:
                return True
            self.total += len(extra)  # the pruned are listed as skipped, never timed: not candidates
            for t in pruned:
                self.report("done", t, in_step=False)
            if not extra:
                return True
            extra.sort(key=lambda c: (c.predicted_ms is None, c.predicted_ms or 0.0))
            self.candidates += extra
            self.round += 1
            self.begin(f"variations round {self.round}", extra)
            if not self.run(extra, self.screen_until):
                return False
        return True

    def prefetch(self, cands: list[Candidate]) -> None:
        """Compile these candidates ahead (on a GPU, in a pool of processes) while the ones before
        them are timed; each is rendered only where the device takes it (``builds`` is lazy)."""
        def builds() -> Iterator[tuple[str, Build]]:
            for cand in cands:
                try:
                    yield cand.key, render_task(self.dev.spec, cand.task(self.task), self.dev.limits)
                except ValueError:
                    continue

        self.dev.prefetch(builds())

    def timed(self, name: str, bound: Bound, iters: int | None = None) -> Timing:
        """One timing in the regime: settle, warm up (the last 3 launches probe), ``iters`` launches."""
        iters = iters or self.full
        warmups = max(3, self.task.warmup)
        self.dev.settle(bound, self.opts.regime, self.rest_s, self.busy_s)
        probed = self.dev.warm(bound, warmups, 3)
        timing = timing_stats(self.dev.time(name, bound, iters, probed, iters))
        self.busy_s = timing.median_ms * 1e-3 * (iters + warmups)
        return timing

    def trial(self, cand: Candidate, start: Trial, fault: str, iters: int) -> tuple[Trial, bool]:
        """Plan, render, compile, load, time and verify one candidate: its Trial (a failure is a
        result) and whether the device is left unusable (a CUDA error: restart the process)."""
        dev, task = self.dev, cand.task(self.task)
        assert self.inputs is not None
        try:
            kp = plan_or_raise(dev.spec, task, dev.limits)
            build = dev.spec.render(kp, dev.limits)
        except ValueError as exc:
            return replace(start, status="skipped", reason=str(exc)), False
        if fault == "none":
            dev.prefetched(cand.key)  # compiled ahead into the cache (or compiled below)
        try:
            compiled = dev.compile(build, fault)
        except RunFailure as exc:
            return replace(start, status="compile_error", reason=exc.message[:400]), False
        try:
            bound = dev.bind(dev.load(compiled), self.inputs, "trial", self.em, task)
            dev.inject(bound, fault, self.em)
            timing = self.timed(cand.key, bound, iters)
            clock = dev.clock()
            c = dev.verify(bound, self.inputs, fault)
        except ValueError as exc:  # the simulated device's model refuses the knobs
            return replace(start, status="compile_error", reason=str(exc)), False
        except RunFailure as exc:
            return replace(start, status="launch_error", reason=exc.message[:400]), False
        except dev.errors as exc:
            return self.failed(start, exc)
        reason = clock
        if not c.correct:
            reason = (f"max rel err {c.max_rel_err:.3g} (rtol {c.rtol:g}), {c.nan_count} NaN, "
                      f"{c.unwritten_count} unwritten" + (f"; {c.note}" if c.note else ""))
        return replace(start, status="ok" if c.correct else "incorrect", median_ms=timing.median_ms,
                       p10_ms=timing.p10_ms, p90_ms=timing.p90_ms, sol_pct=100.0 * self.t_sol / timing.median_ms,
                       resolved=dict(kp.schedule), reason=reason), False

    def failed(self, start: Trial, exc: BaseException) -> tuple[Trial, bool]:
        """A fault of the device: a launch_error; the device is unusable after any but out of memory."""
        message, kind = self.dev.failure(exc)
        return replace(start, status="launch_error", reason=message[:400]), kind != "out_of_memory"
