"""A persistent grid of clusters is capped at the clusters the device holds at once (the driver's
answer is faked here: no GPU)."""
from __future__ import annotations

import pytest

from engine.backends import clusters


def test_fit_grid_caps_at_resident_clusters(monkeypatch):
    seen = []

    def fake(func, grid, block, smem):
        seen.append((func, grid, block, smem))
        return 32  # e.g. 4-CTA clusters on a 132-SM H200: GPCs leave SMs over

    monkeypatch.setattr(clusters, "_libcuda", lambda: None)  # a driver that has the call
    monkeypatch.setattr(clusters, "max_active_clusters", fake)
    assert clusters.fit_grid(7, (132, 1, 1), (384, 1, 1), 200_000, 4) == (128, 1, 1)
    assert seen == [(7, 132, 384, 200_000)]
    assert clusters.fit_grid(7, (84, 1, 1), (384, 1, 1), 200_000, 4) == (84, 1, 1)  # all resident
    assert clusters.fit_grid(7, (132, 1, 1), (384, 1, 1), 200_000, 1) == (132, 1, 1)
    assert len(seen) == 2  # no cluster: no driver call


def test_fit_grid_refuses_a_cluster_that_never_fits(monkeypatch):
    monkeypatch.setattr(clusters, "_libcuda", lambda: None)
    monkeypatch.setattr(clusters, "max_active_clusters", lambda *a: 0)
    with pytest.raises(RuntimeError, match="no cluster of 4 CTAs"):
        clusters.fit_grid(7, (132, 1, 1), (384, 1, 1), 230_000, 4)


def test_fit_grid_leaves_the_grid_where_the_driver_cannot_answer(monkeypatch):
    """No libcuda (or one without the call, before CUDA 12): the planned grid, unchanged."""
    def missing():
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(clusters, "_libcuda", missing)
    assert clusters.fit_grid(7, (132, 1, 1), (384, 1, 1), 200_000, 2) == (132, 1, 1)
