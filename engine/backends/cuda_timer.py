"""Timing on the GPU: the rest before each timed implementation, CUDA events around each queued
launch (``QueuedTimer``, behind a hold kernel where the host cannot keep ahead), and the plain
event timing of bench scripts (``launch_times``)."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any

import cupy as cp
import numpy as np

from engine.backends.cuda_support import HOLD_SOURCE, held_chunk, hold_ns, needs_hold


def rest(seconds: float, em: Any, what: str) -> None:
    """Let the GPU idle ``seconds`` before ``what`` is warmed up and timed (``TaskSpec.rest_s``), so
    ours and every peer start from the same rested card."""
    if seconds > 0:
        em.info(f"resting {seconds:g} s before timing {what}")
        time.sleep(seconds)


def back_to_back(launch: Any, seconds: float) -> None:
    """Launch back to back for ``seconds`` (synchronising every ~20 ms so the queue stays short)."""
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        t = time.monotonic()
        while time.monotonic() - t < 0.02:
            launch(i)
            i += 1
        cp.cuda.Device().synchronize()


def settle(launch: Any, regime: str, rest_s: float, busy_s: float) -> None:
    """A tune's regime right before a timing. Sustained: back-to-back launches
    (``SUSTAIN_HOLD_S``). Burst: rest, as long as ``REST_PER_BUSY`` times the last timing's busy
    time ``busy_s`` (at least ``REST_MIN_S``, at most the rest asked for): 100 launches of a 15 us
    kernel heat nothing, a seed-sized GEMM's 16 ms of work warms the card a little, and the card is
    rested in the same measure for every candidate and peer."""
    from engine.tune_types import REST_MIN_S, REST_PER_BUSY, SUSTAIN_HOLD_S

    if regime == "sustained":
        back_to_back(launch, SUSTAIN_HOLD_S)
    elif rest_s > 0:
        cp.cuda.Device().synchronize()
        time.sleep(min(rest_s, max(REST_MIN_S, REST_PER_BUSY * busy_s)))


def _event_pairs(n: int) -> list[tuple[Any, Any]]:
    return [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(n)]


def _queue(launch: Any, first: int, evs: list[tuple[Any, Any]]) -> None:
    """Launches ``first``, ``first + 1``, ... each between its event pair: the per-launch host work
    that ``QueuedTimer.probe`` measures and ``QueuedTimer.run`` times, the same in both."""
    for i, (e0, e1) in enumerate(evs):
        e0.record()
        launch(first + i)
        e1.record()


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No garbage collection while launches are queued (as timeit does): a collection pause there
    would be a launch gap in a held chunk."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class QueuedTimer:
    """Times launches queued back to back between CUDA events (one pair per launch). Where the GPU
    finishes a launch faster than the host queues the next (small kernels, peers called through
    Python), each event pair would time the host's launch rate; then a chunk of launches is queued
    behind ``sol_hold_kernel`` (``cuda_support.hold_ns``), so they run back to back on the GPU.
    Counts what it did for ``validity["queue_hold"]``."""

    def __init__(self, hold_fn: Any) -> None:
        self.hold_fn = hold_fn
        self.stats: dict[str, Any] = {"held": [], "not_held": [], "held_chunks": 0, "expired_chunks": 0,
                                      "expired": []}

    @staticmethod
    def probe(launch: Any, first: int, n: int) -> tuple[float | None, float]:
        """Launches ``first`` .. ``first + n - 1`` queued between two events, each between its own
        event pair as ``run`` times them (so the host time counts the same per-launch work): (GPU s
        per launch, host s per launch); (None, 20 us) without launches. A starved GPU reads the
        host's rate."""
        if n <= 0:
            return None, 20e-6
        cp.cuda.Device().synchronize()
        evs = _event_pairs(n)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        with _no_gc():
            e0.record()
            t0 = time.perf_counter()
            _queue(launch, first, evs)
            host = (time.perf_counter() - t0) / n
            e1.record()
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1) / 1e3 / n, host

    def warm(self, launch: Any, warmups: int, n_probe: int, every: int = 0,
             on_progress: Any = None) -> tuple[float | None, float]:
        """``warmups`` launches, the last ``n_probe`` of them queued as ``probe``; its result. With
        ``every``, the device is synchronised after every ``every``-th of the launches before the
        probe and ``on_progress(done)`` called, so progress reports follow the GPU, not the queue."""
        n_probe = min(n_probe, warmups)
        for i in range(warmups - n_probe):
            launch(i)
            if every and (i + 1) % every == 0:
                cp.cuda.Device().synchronize()
                if on_progress is not None:
                    on_progress(i + 1)
        return self.probe(launch, warmups - n_probe, n_probe)

    def run(self, name: str, launch: Any, iters: int, probed: tuple[float | None, float], chunk: int,
            on_chunk: Any = None) -> list[float]:
        """``iters`` timed launches (``launch(i)``) of ``name``, in chunks of ``chunk`` (one chunk
        under a hold, as long as the hold can cover it); ms per launch."""
        gpu_s, host_s = probed
        held = needs_hold(gpu_s, host_s)
        self.stats["held" if held else "not_held"].append(name)
        if held:
            chunk = held_chunk(host_s, iters)
        times: list[float] = []
        for start in range(0, iters, chunk):
            n = min(chunk, iters - start)
            evs = _event_pairs(n)  # created before the hold: its window covers only the queueing
            with _no_gc():
                if held:
                    self.hold_fn((1,), (1,), (np.uint64(hold_ns(gpu_s, host_s, n)),))
                    hold_done = cp.cuda.Event(block=False, disable_timing=True)
                    hold_done.record()
                    t0 = time.perf_counter()
                _queue(launch, start, evs)
                if held:
                    self.stats["held_chunks"] += 1
                    if hold_done.done:  # the hold ran out before the last launch was queued
                        self.stats["expired_chunks"] += 1
                        if name not in self.stats["expired"]:
                            self.stats["expired"].append(name)
                    host_s = max(host_s, (time.perf_counter() - t0) / n)
            evs[-1][1].synchronize()
            times += [cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]
            if on_chunk is not None:
                on_chunk(start + n)
        return times


def queued_timer() -> QueuedTimer:
    """A QueuedTimer outside an engine run (bench scripts): the hold kernel through CuPy's
    RawKernel, launched on CuPy's current stream (the legacy default stream, which torch's default
    stream also is)."""
    return QueuedTimer(cp.RawKernel(HOLD_SOURCE, "sol_hold_kernel"))


def time_queued(timer: QueuedTimer, name: str, launch: Any, iters: int) -> list[float]:
    """Bench scripts: 10 warm-ups (the last 3 probe whether the host keeps ahead), then ``iters``
    launches ``launch(i)`` timed by ``timer`` in one chunk, as the engine times ours; ms per launch."""
    return timer.run(name, launch, iters, timer.warm(launch, 10, 3), iters)



def launch_times(launch: Any, warmup: int = 10, iters: int = 100) -> list[float]:
    """Bench scripts: ``warmup`` launches ``launch(i)``, then ``iters`` queued back to back, each
    between its own CUDA events (no hold, unlike ``QueuedTimer``): the per-launch times in ms, in
    launch order."""
    for i in range(warmup):
        launch(i)
    evs = _event_pairs(iters)
    _queue(launch, 0, evs)
    evs[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]
