"""Output verification against a higher-precision reference, shared by every backend."""

from __future__ import annotations

from typing import Any

from engine.result import Correctness


def compare(xp: Any, out64: Any, ref64: Any, rtol: float, unwritten: int = 0, note: str = "") -> Correctness:
    """Compare ``out64`` (the kernel's output, widened to float64) with ``ref64``.

    An element passes when |out - ref| <= rtol * (|ref| + rms(ref)): relative where values are
    large, absolute at the scale of the output where they are near zero (cancellation). NaN or Inf
    anywhere, or an element left holding the poison value, fails the run whatever the error."""
    finite = xp.isfinite(out64)
    nan_count = int(xp.isnan(out64).sum())
    inf_count = int(xp.isinf(out64).sum())
    ref_rms = float(xp.sqrt(xp.mean(ref64 * ref64))) if ref64.size else 0.0
    scale = ref_rms if ref_rms > 0 else 1.0
    diff = xp.where(finite, xp.abs(out64 - ref64), 0.0)
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / (xp.abs(ref64) + scale)
    max_rel = float(rel.max()) if rel.size else 0.0
    ref_norm = float(xp.linalg.norm(ref64.ravel()))
    normwise = float(xp.linalg.norm(diff.ravel())) / (ref_norm if ref_norm > 0 else 1.0)
    correct = nan_count == 0 and inf_count == 0 and unwritten == 0 and max_rel <= rtol
    return Correctness(
        correct=correct, max_abs_err=max_abs, max_rel_err=max_rel, normwise_rel_err=normwise,
        nan_count=nan_count, inf_count=inf_count, unwritten_count=unwritten, rtol=rtol,
        checked_elements=int(out64.size), note=note,
    )


def merge(parts: dict[str, Correctness]) -> Correctness:
    """One verdict for a kernel with several outputs: the worst of each figure, all must pass."""
    if len(parts) == 1:
        return next(iter(parts.values()))
    vals = list(parts.values())
    worst = max(vals, key=lambda c: c.max_rel_err)
    return Correctness(
        correct=all(c.correct for c in vals), max_abs_err=max(c.max_abs_err for c in vals),
        max_rel_err=worst.max_rel_err, normwise_rel_err=max(c.normwise_rel_err for c in vals),
        nan_count=sum(c.nan_count for c in vals), inf_count=sum(c.inf_count for c in vals),
        unwritten_count=sum(c.unwritten_count for c in vals), rtol=worst.rtol,
        checked_elements=sum(c.checked_elements for c in vals),
        note="; ".join(f"{k}: max rel {c.max_rel_err:.3g}" for k, c in parts.items())
        + (f" -- {vals[0].note}" if vals[0].note else ""),
    )
