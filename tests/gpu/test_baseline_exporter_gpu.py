"""GPU tests (marker `gpu`): baselines and the exporter against a real GPU and NVML.

A run on the GPU becomes a baseline whose GPU model is the device's name; the next run is judged
against it with no code, driver or GPU change named; the exporter labels the GPU with NVML's UUID
and model name and reads NVML's clocks in dcgm-exporter's units."""

from __future__ import annotations

import json
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tui.cli.main import main

pytestmark = pytest.mark.gpu

CUDA = ["--backend", "cuda", "--shape", "m=2048,n=2560,k=2560", "--iterations", "50", "--warmup", "10",
        "--no-peers"]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_gpu_run_as_baseline_judges_the_next_run(capsys):
    code, out, _ = cli(capsys, "bench", *CUDA, "--json")
    run = json.loads(out)
    assert code == 0 and run["simulated"] is False
    code, out, _ = cli(capsys, "baseline", "set", str(run["run_id"]), "--json")
    b = json.loads(out)["baseline"]
    assert code == 0 and b["gpu"] == run["fingerprint"]["gpu_name"] and not b["gpu"].startswith("SIMULATED")
    assert b["fingerprint"]["driver_version"] and b["fingerprint"]["gpu_uuid"].startswith("GPU-")
    code, out, _ = cli(capsys, "bench", *CUDA, "--against-baseline", "--tolerance", "50%", "--json")
    v = json.loads(out)["against_baseline"]
    assert code == 0 and v["regression"] is False and 0.5 < v["ratio"] < 1.5
    assert not {"code", "driver", "GPU"} & set(v["changed"]), v["changes"]
    # a simulated baseline never judges the GPU
    code, out, _ = cli(capsys, "bench", "--backend", "sim", "--iterations", "5", "--warmup", "1", "--no-peers", "--json")
    code, out, _ = cli(capsys, "baseline", "set", str(json.loads(out)["run_id"]), "--json")
    assert json.loads(out)["baseline"]["gpu"].startswith("SIMULATED")
    code, out, _ = cli(capsys, "baseline", "list", "--json")
    assert len(json.loads(out)["baselines"]) == 2


def test_exporter_reads_nvml_with_dcgm_names_and_labels(capsys):
    from engine import nvml
    from engine.exporter import CockpitCollector, Exporter
    from engine.store import ResultStore
    from engine.telemetry import nvml_sampler

    info = nvml.device_info(0)
    sampler = nvml_sampler(interval_s=0.2)
    sampler.poll_once()
    exp = Exporter(CockpitCollector(ResultStore(), sampler, {d.index: d for d in nvml.devices()}), "127.0.0.1", 0)
    exp.start()
    try:
        with urllib.request.urlopen(exp.url, timeout=10) as resp:
            fams = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
    finally:
        exp.stop()
    assert fams["sol_cockpit_nvml_up"].samples[0].value == 1
    sm = [s for s in fams["DCGM_FI_DEV_SM_CLOCK"].samples if s.labels["gpu"] == "0"]
    assert len(sm) == 1 and 0 < sm[0].value < 5000  # MHz
    assert sm[0].labels["UUID"] == info.uuid and sm[0].labels["modelName"] == info.name
    assert sm[0].labels["simulated"] == "false" and sm[0].labels["pci_bus_id"]
    used = [s for s in fams["DCGM_FI_DEV_FB_USED"].samples if s.labels["gpu"] == "0"][0].value
    free = [s for s in fams["DCGM_FI_DEV_FB_FREE"].samples if s.labels["gpu"] == "0"][0].value
    assert used + free == pytest.approx(info.memory_total_mib, rel=0.01)
    assert 0 < [s for s in fams["DCGM_FI_DEV_POWER_USAGE"].samples if s.labels["gpu"] == "0"][0].value < 2000
