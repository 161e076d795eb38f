"""Every GPU at once: ``--device all`` or a list (``0,2,5``) runs one engine process per GPU in
parallel and compares them, since a sick GPU is found by comparing it with its neighbours.

A selection is validated against the GPUs there are before anything runs (NVML's count, narrowed by
CUDA_VISIBLE_DEVICES; on the simulated device ``SOL_COCKPIT_SIM_DEVICES``, default 1): a GPU that
does not exist is an InputError naming it. ``fan_out`` runs one job per GPU in threads, each of
which waits on its own engine process; a Ctrl-C or an error cancels every job and waits for them,
so no engine process is left behind. ``spread`` says how far apart the GPUs are and which one is
the outlier."""

from __future__ import annotations

import math
import os
import statistics
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.errors import InputError

SIM_DEVICES_ENV = "SOL_COCKPIT_SIM_DEVICES"
"""How many GPUs the simulated device has (default 1), for rehearsing every-GPU runs."""
SIM_SLOW_ENV = "SOL_COCKPIT_SIM_SLOW_DEVICES"
"""Simulated GPUs that run slow, as ``INDEX[=FACTOR]`` entries (``2`` or ``2=1.3,5=1.1``; the factor
defaults to ``SIM_SLOW_FACTOR``): the sick neighbour a spread must find."""
SIM_SLOW_FACTOR = 1.25
MAX_SIM_DEVICES = 64
OUTLIER_PCT = 5.0
"""A GPU whose figure is this many percent off the median of the others is the outlier."""

T = TypeVar("T")


@dataclass(frozen=True)
class DeviceSelection:
    """``--device all`` (``indices`` None) or a list of GPU indices, as the user wrote it."""

    text: str
    indices: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return self.text


def is_multi(value: Any) -> bool:
    return isinstance(value, DeviceSelection)


def sim_device_count(env: Mapping[str, str] | None = None) -> int:
    """The simulated device's GPU count (``SOL_COCKPIT_SIM_DEVICES``); InputError when malformed."""
    env = os.environ if env is None else env
    text = env.get(SIM_DEVICES_ENV, "").strip()
    if not text:
        return 1
    if not text.isdigit() or not 1 <= int(text) <= MAX_SIM_DEVICES:
        raise InputError(f"{SIM_DEVICES_ENV}={text!r}: expected a GPU count from 1 to {MAX_SIM_DEVICES}",
                         fix=f"export {SIM_DEVICES_ENV}=4, or unset it for one simulated GPU")
    return int(text)


def sim_slow_factors(env: Mapping[str, str] | None = None) -> dict[int, float]:
    """``SOL_COCKPIT_SIM_SLOW_DEVICES`` ('2' or '2=1.4,5'): simulated GPU -> how much slower it runs
    (``SIM_SLOW_FACTOR`` when no factor is given); InputError naming the variable when malformed."""
    env = os.environ if env is None else env
    out: dict[int, float] = {}
    for entry in filter(None, (e.strip() for e in env.get(SIM_SLOW_ENV, "").split(","))):
        index, sep, factor = entry.partition("=")
        try:
            value = float(factor) if sep else SIM_SLOW_FACTOR
        except ValueError:
            value = math.nan
        if not index.strip().isdigit() or not 0.1 <= value <= 100:
            raise InputError(f"{SIM_SLOW_ENV}: {entry!r} is not a GPU index with an optional factor from 0.1 to 100",
                             fix=f"export {SIM_SLOW_ENV}=2 or {SIM_SLOW_ENV}=2=1.4,5, or unset it")
        out[int(index)] = value
    return out


def sim_slow_factor(device: int, env: Mapping[str, str] | None = None) -> float:
    """How much slower simulated GPU ``device`` runs (1.0: not slowed; ``SOL_COCKPIT_SIM_SLOW_DEVICES``)."""
    return sim_slow_factors(env).get(device, 1.0)


def cuda_visible_count(nvml_count: int, env: Mapping[str, str] | None = None) -> int:
    """The GPUs CUDA numbers 0..n-1: NVML's count, or CUDA_VISIBLE_DEVICES' entries when it is set."""
    env = os.environ if env is None else env
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return nvml_count
    entries = [e for e in cvd.split(",") if e.strip()]
    return min(len(entries), nvml_count) if nvml_count else len(entries)


def device_count(backend: str) -> int:
    """GPUs a run on ``backend`` ('cuda' or 'sim') can use."""
    if backend == "sim":
        return sim_device_count()
    from engine import nvml

    nvml.init()
    return cuda_visible_count(nvml.device_count())


def resolve(selection: int | DeviceSelection, count: int, simulated: bool = False) -> list[int]:
    """The GPU indices ``selection`` names, each checked against ``count``: InputError naming the
    first that does not exist."""
    where = (f"the simulated device has {count} GPU(s) (set {SIM_DEVICES_ENV} for more)" if simulated
             else f"this machine has {count} GPU(s)")
    if isinstance(selection, int):
        selection = DeviceSelection(str(selection), (selection,))
    if selection.indices is None:
        if count < 1:
            raise InputError(f"--device=all: {where}", fix="check `nvidia-smi -L` and CUDA_VISIBLE_DEVICES")
        return list(range(count))
    for i in selection.indices:
        if i >= count:
            raise InputError(f"--device={selection.text}: GPU {i} does not exist; {where}",
                             fix=f"use indices 0..{count - 1}, or --device all")
    return list(selection.indices)


def devices_for(selection: int | DeviceSelection, backend_requested: str) -> tuple[list[int], str]:
    """(GPU indices, backend 'cuda'|'sim') for a task's backend choice ('auto', 'cuda', 'sim')."""
    from engine.backends.select import choose_backend

    name = choose_backend(backend_requested, 0).name
    return resolve(selection, device_count(name), simulated=name == "sim"), name


def fan_out(indices: list[int], job: Callable[[int, threading.Event], T],
            cancel: threading.Event | None = None) -> dict[int, T | BaseException]:
    """``job(index, cancel)`` for every GPU in parallel threads (each job waits on its own engine
    process); the result or the exception of each. A Ctrl-C (or a signal raised as one) sets
    ``cancel``, waits until every job has killed its engine process, and re-raises."""
    cancel = cancel or threading.Event()
    out: dict[int, T | BaseException] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, len(indices)), thread_name_prefix="sol-gpu")
    futures = {i: pool.submit(job, i, cancel) for i in indices}
    try:
        for i, fut in futures.items():
            try:
                out[i] = fut.result()
            except Exception as exc:  # one GPU's failure is its row, not the end of the others
                out[i] = exc
    except BaseException:
        cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out


def spread(values: Mapping[int, float | None], higher_is_better: bool = False, threshold_pct: float = OUTLIER_PCT,
           metric: str = "median_ms") -> dict[str, Any]:
    """How far apart the GPUs are on ``metric``: the slowest and the fastest, their ratio, each GPU's
    deviation from the median of the others (percent, positive = slower), and the outlier: the GPU
    deviating most, when that is more than ``threshold_pct``. With two GPUs either could be off;
    the slower one is named (a third GPU would settle it)."""
    vals = {i: float(v) for i, v in values.items() if v is not None and v > 0}
    out: dict[str, Any] = {"metric": metric, "higher_is_better": higher_is_better, "threshold_pct": threshold_pct,
                           "gpus": len(vals), "slowest": None, "fastest": None, "ratio": None, "spread_pct": None,
                           "deviation_pct": {}, "outlier": None, "outlier_deviation_pct": None, "note": None}
    if not vals:
        out["note"] = "no GPU has a figure to compare"
        return out
    slow = min(vals, key=vals.__getitem__) if higher_is_better else max(vals, key=vals.__getitem__)
    fast = max(vals, key=vals.__getitem__) if higher_is_better else min(vals, key=vals.__getitem__)
    ratio = vals[fast] / vals[slow] if higher_is_better else vals[slow] / vals[fast]
    out.update(slowest={"device": slow, "value": vals[slow]}, fastest={"device": fast, "value": vals[fast]},
               ratio=ratio, spread_pct=100.0 * (ratio - 1.0))
    if len(vals) < 2:
        out["note"] = "one GPU: nothing to compare it with"
        return out
    dev: dict[int, float] = {}
    for i, v in vals.items():
        med = statistics.median([x for j, x in vals.items() if j != i])
        pct = 100.0 * (v / med - 1.0)
        dev[i] = -pct if higher_is_better else pct
    out["deviation_pct"] = {str(i): d for i, d in dev.items()}
    worst = slow if len(vals) == 2 else max(dev, key=lambda i: abs(dev[i]))
    if abs(dev[worst]) > threshold_pct:
        out.update(outlier=worst, outlier_deviation_pct=dev[worst])
        if len(vals) == 2:
            out["note"] = "two GPUs: the slower one is named; a third would say which one is off"
    return out


def spread_text(s: dict[str, Any], unit: str = "ms", fmt: str = ".4f") -> str:
    """One line for people: slowest against fastest and the outlier."""
    if s.get("slowest") is None:
        return f"spread: {s.get('note') or 'nothing to compare'}"
    slow, fast = s["slowest"], s["fastest"]
    text = (f"spread ({s['metric']}): slowest GPU {slow['device']} {slow['value']:{fmt}} {unit} against fastest "
            f"GPU {fast['device']} {fast['value']:{fmt}} {unit}: {s['spread_pct']:.1f} %")
    if s.get("outlier") is not None:
        text += (f"; OUTLIER: GPU {s['outlier']} ({s['outlier_deviation_pct']:+.1f} % against the median of the "
                 f"others, threshold {s['threshold_pct']:g} %)")
    elif s.get("gpus", 0) >= 2:
        text += f"; no outlier (threshold {s['threshold_pct']:g} %)"
    if s.get("note") and s.get("gpus", 0) >= 2:
        text += f" ({s['note']})"
    return text
