"""What `tui bench` says about its peers and its bounds (issue 47, defects 7 and 20): one baseline
peer, the one the score is against and named beside it; torch peers are timed on the simulated
device only where torch is installed; the roofline's bound and the run's read without contradiction."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tui.cli.main import main

BENCH = ["bench", "--backend", "sim", "--iterations", "5", "--warmup", "1"]


def cli(capsys, monkeypatch, *argv):
    monkeypatch.setenv("COLUMNS", "200")
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kernel", ["gemm_residual", "add_rmsnorm", "bias_gelu"])
def test_exactly_one_baseline_peer_the_score_is_against(kernel, capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, *BENCH, "--kernel", kernel, "--json")
    doc = json.loads(out)
    marked = [p["name"] for p in doc["peers"] if p["baseline"]]
    assert code == 0 and marked == [doc["baseline_peer"]]
    code, out, _ = cli(capsys, monkeypatch, *BENCH, "--kernel", kernel)
    assert out.count("(score baseline)") == 1 and "(baseline)" not in out
    label = next(p["label"] for p in doc["peers"] if p["baseline"])
    assert f"against {label}" in " ".join(out.split())


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_the_simulated_device_times_no_torch_peer_without_torch(capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, *BENCH, "--json")
    torch_peers = [p for p in json.loads(out)["peers"] if p["name"].startswith("torch")]
    assert torch_peers and all(p["timing"] is None and "not installed" in p["error"] for p in torch_peers)
    code, out, _ = cli(capsys, monkeypatch, *BENCH)
    assert "failed" not in out and "not run" in out


def test_bounds_read_without_contradiction(capsys, monkeypatch):
    code, out, _ = cli(capsys, monkeypatch, *BENCH, "--shape", "m=16,n=16,k=16", "--no-peers")
    line = " ".join(out.split())
    assert code == 0 and "measured bound" not in line and "0.0000 ms" not in line
    assert "set by the" in line and "latency-bound" in line
    code, out, _ = cli(capsys, monkeypatch, *BENCH, "--no-peers")
    assert "set by the compute ceiling (the run is compute-bound too)" in " ".join(out.split())
