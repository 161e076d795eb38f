"""`tui fleet-report` on the real GPUs: every visible GPU benched with its NVML identity (UUID,
driver, PCI bus id), the report not SIMULATED, and `tui fleet` reading it back with a SOL % per GPU.
Runs the bench in the engine process, like `tui bench`: the test process creates no CUDA context."""

from __future__ import annotations

import json

import pytest

from tui.cli.main import main

pytestmark = pytest.mark.gpu


@pytest.mark.timeout(900)
def test_fleet_report_benches_every_visible_gpu_and_fleet_reads_it(tmp_path, capsys):
    from engine import nvml

    n = nvml.device_count()
    code = main(["fleet-report", "--backend", "cuda", "--no-peers", "--iterations", "20", "--host", "gpu-host",
                 "--out-dir", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 1)  # 1: a check failed on this box (the report says which)
    assert report["simulated"] is False and report["backend"] == "cuda"
    assert [g["index"] for g in report["gpus"]] == list(range(n))
    for gpu, bench in zip(report["gpus"], report["benches"], strict=True):
        assert gpu["uuid"].startswith("GPU-") and gpu["driver_version"] and gpu["pci_bus_id"]
        assert not gpu["name"].startswith("SIMULATED")
        assert bench["result"]["status"] == "ok", bench
        assert bench["result"]["fingerprint"]["gpu_uuid"] == gpu["uuid"]
        assert 0 < bench["result"]["sol_pct"] <= 100
    assert json.loads((tmp_path / "gpu-host.json").read_text()) == report
    main(["fleet", str(tmp_path), "--json"])
    view = json.loads(capsys.readouterr().out)
    assert len(view["rows"]) == n and not view["errors"]
    assert all(r["sol_pct"] is not None and r["uuid"] for r in view["rows"])
