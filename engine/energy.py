"""Board power and energy per launch, from NVML's total-energy counter.

At a power cap the time of a compute-bound kernel is its energy per launch divided by the capped
power, so "which variant is faster" becomes "which spends fewer joules". NVML's instantaneous and
1-second power readings are too coarse for a 0.15 ms kernel; its total-energy counter (mJ, GPU and
memory, since the driver loaded) is exact but advances in steps (tens of ms apart on an H200).

``measure`` keeps the kernel running back to back (batches of launches between CUDA events, a
bounded number in flight, so the GPU never idles and the host never runs far ahead) and polls the
counter about every half millisecond meanwhile. Power is taken edge to edge: from the first counter step seen after a
short warm phase to the first step seen after the requested window, so the steps do not bias it.
Time per launch is the median over the window's batches (CUDA events); energy per launch is power
x time per launch. Pure logic over two small interfaces (the load and the board reader), so it is
tested without a GPU; ``engine.backends.cuda_observers`` supplies CuPy and NVML.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

from engine import nvml
from engine.run_records import EnergyRecord

SOURCE = ("NVML total-energy counter (the whole board: GPU and HBM), read edge to edge over "
          "back-to-back launches")
WARM_S = 0.3
"""Back-to-back launches before the window opens (clocks and power settle toward the cap)."""
EDGE_WAIT_S = 3.0
"""How long past the window a counter step may take before the measurement gives up."""
BATCH = 20
IN_FLIGHT = 3
MIN_SECONDS = 0.5
"""The shortest window a task may ask for (``TaskSpec.energy_s``): a few counter steps."""
MAX_SECONDS = 60.0


class Reader(Protocol):
    def energy_mj(self) -> int | None: ...
    def instant_w(self) -> float | None: ...
    def clock_mhz(self) -> float | None: ...
    def reasons(self) -> int | None: ...


class Load(Protocol):
    def ready(self) -> bool:
        """True when fewer than IN_FLIGHT batches are still queued (another may be queued)."""

    def step(self) -> None:
        """Queue one more batch."""

    def batches(self) -> int:
        """Batches queued so far."""

    def ms_per_launch(self, first_batch: int, last_batch: int) -> float:
        """Median time per launch over batches [first_batch, last_batch) (waits for them)."""


class CupyLoad:
    """``launch()`` back to back on the current CuPy stream: batches of ``batch`` launches between
    two CUDA events, at most ``in_flight`` batches queued."""

    def __init__(self, cp: Any, launch: Callable[[], None], batch: int = BATCH,
                 in_flight: int = IN_FLIGHT) -> None:
        self.cp, self.launch, self.batch, self.in_flight = cp, launch, batch, in_flight
        self.events: list[tuple[Any, Any]] = []

    def ready(self) -> bool:
        return len(self.events) < self.in_flight or self.events[-self.in_flight][1].done

    def step(self) -> None:
        s, e = self.cp.cuda.Event(), self.cp.cuda.Event()
        s.record()
        for _ in range(self.batch):
            self.launch()
        e.record()
        self.events.append((s, e))

    def batches(self) -> int:
        return len(self.events)

    def ms_per_launch(self, first_batch: int, last_batch: int) -> float:
        sel = self.events[first_batch:last_batch] or self.events[-1:]
        sel[-1][1].synchronize()
        return statistics.median(self.cp.cuda.get_elapsed_time(s, e) / self.batch for s, e in sel)


class NvmlReader:
    """``Reader`` over ``engine.nvml`` for GPU ``index`` (NVML numbering)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def energy_mj(self) -> int | None:
        return nvml.energy_mj(self.index)

    def instant_w(self) -> float | None:
        return nvml.power_instant_w(self.index)

    def clock_mhz(self) -> float | None:
        return nvml.sm_clock_mhz(self.index)

    def reasons(self) -> int | None:
        return nvml.clocks_event_mask(self.index)


def batch_for(ms_per_launch: float, target_ms: float = 3.0) -> int:
    """Launches per batch so that one batch takes about ``target_ms`` (1..BATCH)."""
    if ms_per_launch <= 0:
        return BATCH
    return max(1, min(BATCH, round(target_ms / ms_per_launch)))


def measure(load: Load, reader: Reader, seconds: float, launches_per_batch: int = BATCH,
            now: Callable[[], float] = time.perf_counter, warm_s: float = WARM_S,
            edge_wait_s: float = EDGE_WAIT_S, sample_every_s: float = 0.01,
            poll_s: float = 0.0005, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Run ``load`` back to back for about ``warm_s + seconds`` and return the figures, or
    ``{"note": why not}`` where the counter is missing or does not advance. Keys: watts,
    ms_per_launch, mj_per_launch, window_s, launches, sm_clock_mhz, instant_w (medians of the
    samples in the window; None where NVML has no reading), throttle_reasons (union), source,
    counter_step_s (the counter's update spacing seen) and uncertainty_pct: the counter's value can lag
    its update by up to a step at either end, so power is known to about 2 steps / window (measured
    on an H200: 100 ms steps, 2 s windows of one kernel scatter by +-5-10 %)."""
    last = reader.energy_mj()
    if last is None:
        return {"note": "this GPU or driver keeps no NVML energy counter: energy not measured"}
    t_start = now()
    e0: int | None = None  # the counter at the window's start, None until warm-up ends
    e1, t0, t1 = 0, 0.0, 0.0
    b0 = b1 = 0
    clocks: list[float] = []
    inst: list[float] = []
    mask = 0
    t_sample = 0.0
    edges: list[float] = []
    while True:
        if load.ready():
            load.step()
        else:
            sleep(poll_s)
        t = now()
        e = reader.energy_mj()
        if e is None:
            return {"note": "the NVML energy counter stopped answering during the run"}
        if e != last:
            last = e
            if e0 is not None:
                edges.append(t)
            if e0 is None and t - t_start >= warm_s:
                e0, t0, b0 = e, t, load.batches()
                edges = [t]
            elif e0 is not None and t - t0 >= seconds:
                e1, t1, b1 = e, t, load.batches()
                break
        if t - t_start > warm_s + seconds + edge_wait_s:
            return {"note": f"the NVML energy counter did not advance within "
                            f"{warm_s + seconds + edge_wait_s:.1f} s of load: energy not measured"}
        if e0 is not None and t - t_sample >= sample_every_s:
            t_sample = t
            c = reader.clock_mhz()
            if c is not None:
                clocks.append(float(c))
            w = reader.instant_w()
            if w is not None:
                inst.append(float(w))
            mask |= reader.reasons() or 0
    assert e0 is not None  # the loop breaks only once the window has started
    ms = load.ms_per_launch(b0, b1)
    watts = (e1 - e0) / 1e3 / (t1 - t0)
    step_s = statistics.median(b - a for a, b in zip(edges, edges[1:], strict=False))
    return {
        "watts": watts,
        "ms_per_launch": ms,
        "mj_per_launch": watts * ms,
        "window_s": t1 - t0,
        "counter_step_s": step_s,
        "uncertainty_pct": 100.0 * 2 * step_s / (t1 - t0),
        "launches": (b1 - b0) * launches_per_batch,
        "sm_clock_mhz": statistics.median(clocks) if clocks else None,
        "instant_w": statistics.median(inst) if inst else None,
        "throttle_reasons": nvml.decode_throttle(mask & ~0x1),
        "source": SOURCE,
    }


def per_work(fig: dict[str, Any], flops: int, nbytes: int) -> dict[str, Any]:
    """Add GFLOP/J and GB/J (work per launch over energy per launch) to ``measure``'s figures."""
    mj = fig.get("mj_per_launch")
    if not mj:
        return fig
    joules = mj / 1e3
    return fig | {"gflop_per_j": flops / joules / 1e9 if flops else None,
                  "gb_per_j": nbytes / joules / 1e9 if nbytes else None}


def describe(fig: EnergyRecord) -> str:
    """One line for people: 'energy: 698 W board power (...), 0.1530 ms and 107 mJ per launch, ...'."""
    if fig.note is not None or fig.watts is None:
        return f"energy: not measured: {fig.note}"
    cond = []
    if fig.instant_w is not None:
        cond.append(f"instant {fig.instant_w:.0f} W")
    if fig.sm_clock_mhz is not None:
        cond.append(f"SM {fig.sm_clock_mhz:.0f} MHz")
    if fig.throttle_reasons:
        cond.append(", ".join(fig.throttle_reasons))
    work = []
    if fig.gflop_per_j:
        work.append(f"{fig.gflop_per_j:.0f} GFLOP/J")
    if fig.gb_per_j:
        work.append(f"{fig.gb_per_j:.1f} GB/J")
    return (f"energy: {fig.watts:.0f} W board power" + (f" ({'; '.join(cond)})" if cond else "")
            + f", {fig.ms_per_launch or 0:.4f} ms and {fig.mj_per_launch or 0:.3g} mJ per launch"
            + (f", {', '.join(work)}" if work else "")
            + f", over {fig.window_s or 0:.2f} s of back-to-back launches (NVML energy counter"
            + (f", +-{fig.uncertainty_pct:.0f} %" if fig.uncertainty_pct else "") + ")")
