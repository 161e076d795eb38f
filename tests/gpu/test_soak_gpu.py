"""Soak and every-GPU runs on the GPU: a 20 s soak of the seed task on device 0 (windows, NVML clocks
and temperatures, verifications, counters read, the series stored), and `--device all` on every GPU
of the machine (one on a single H200: the spread then says there is nothing to compare)."""

from __future__ import annotations

import json

import pytest

from engine.store import ResultStore
from tests.unit.test_multi_device import child_pids
from tui.cli.main import main

pytestmark = pytest.mark.gpu


def run_json(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, dict]:
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


def test_soak_20s_on_the_gpu(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["soak", "--backend", "cuda", "--duration", "20s", "--verify-every", "5s",
                                "--max-drift", "20%", "--json"])
    assert out["simulated"] is False and out["error"] is None, out.get("error")
    assert rc == 0 and out["status"] == "ok"
    assert 19 <= out["elapsed_s"] <= 25 and out["windows"] >= 60 and out["launches"] > 1000
    assert out["verifications"] >= 4 and out["verify_failures"] == 0
    assert out["sm_clock_mhz_max"] and out["temperature_c_max"] and out["power_w_mean"]
    assert out["counters_before"]["ecc_enabled"] is not None  # H200: ECC reported
    assert 0 <= out["throttled_share_pct"] <= 100
    rows = ResultStore().soak_series(out["run_id"])
    assert len(rows) == out["windows"] and all(r["ms"] > 0 for r in rows)
    assert child_pids() == []


def test_every_gpu_bench_and_soak(capsys: pytest.CaptureFixture) -> None:
    from engine import nvml

    n = nvml.device_count()
    rc, out = run_json(capsys, ["bench", "--backend", "cuda", "--device", "all", "--no-peers", "--json"])
    assert [d["device"] for d in out["devices"]] == list(range(n))
    assert all(d["status"] == "ok" for d in out["devices"]) and out["spread"]["gpus"] == n, \
        [{key: d.get(key) for key in ("device", "status", "error")} for d in out["devices"]]
    assert rc == (0 if out["spread"]["outlier"] is None else 1)
    rc, out = run_json(capsys, ["soak", "--backend", "cuda", "--device", "all", "--duration", "10s", "--json",
                                "--max-drift", "20%"])
    # the devices' own summaries on failure (status, drift, error): a soak that fails says why
    assert [d["device"] for d in out["devices"]] == list(range(n)) and all(d["ok"] for d in out["devices"]), \
        [{key: d.get(key) for key in ("device", "status", "drift_pct", "error", "ok")} for d in out["devices"]]
    rc, out = run_json(capsys, ["bench", "--backend", "cuda", "--device", f"0,{n}", "--json"])
    assert rc == 2 and out["field"] == "--device"
    assert child_pids() == []
