"""Verification: tolerances, NaN/Inf, poison, and merging the verdicts of several outputs."""

import numpy as np

from engine.verify import compare, merge


def test_compare_passes_rounding_and_fails_nan_and_unwritten():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((64, 64)) * 50
    out = ref * (1 + 1e-3)
    assert compare(np, out, ref, 1.6e-2).correct
    bad = out.copy()
    bad[3, 3] = np.nan
    c = compare(np, bad, ref, 1.6e-2)
    assert not c.correct and c.nan_count == 1
    assert not compare(np, out, ref, 1.6e-2, unwritten=2).correct
    assert not compare(np, ref + 10.0, ref, 1.6e-2).correct


def test_merge_takes_the_worst_and_needs_all():
    ref = np.ones((8, 8))
    good = compare(np, ref, ref, 1e-3)
    off = compare(np, ref * 1.5, ref, 1e-3)
    m = merge({"out": good, "residual_out": off})
    assert not m.correct and m.max_rel_err == off.max_rel_err and m.checked_elements == 128
    assert "residual_out" in m.note
    assert merge({"out": good}) is good
