"""Statistics over per-launch times."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.result import Timing


def timing_stats(samples_ms: Sequence[float] | np.ndarray) -> Timing:
    """Median, p10, p90, mean and min of the timed runs (milliseconds)."""
    arr = np.asarray(samples_ms, dtype=np.float64)
    if arr.size == 0:
        raise ValueError("no timed samples")
    return Timing(
        median_ms=float(np.median(arr)),
        p10_ms=float(np.percentile(arr, 10)),
        p90_ms=float(np.percentile(arr, 90)),
        mean_ms=float(arr.mean()),
        min_ms=float(arr.min()),
        samples=int(arr.size),
    )
