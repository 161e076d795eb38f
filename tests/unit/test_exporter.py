"""`tui exporter`: /metrics scraped over loopback and read with prometheus-client's own parser;
dcgm-exporter names and labels for GPUs (the simulated one labelled simulated="true"), the store's
latest runs, baselines and checks in base units; a port in use is exit 2; nothing left running."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.exporter import CockpitCollector, Exporter
from engine.store import ResultStore
from engine.telemetry import SimulatedSource, simulated_sampler
from tui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SIM = ["--backend", "sim", "--iterations", "10", "--warmup", "2", "--no-peers"]
KEY = {"kernel": "gemm_residual", "shape": "k=2560,m=8192,n=2560", "dtype": "bf16", "gpu": "SIMULATED h100-sxm",
       "simulated": "true"}


def cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families, name, **labels):
    fam = families[name]
    found = [s.value for s in fam.samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, fam.samples)
    return found[0]


@pytest.fixture
def populated(capsys):
    """A store holding a simulated run, a baseline it regressed from, and a check summary."""
    code, out, _ = cli(capsys, "bench", *SIM, "--json")
    run = json.loads(out)
    assert code == 0
    cli(capsys, "baseline", "set")
    import sqlite3

    from engine.paths import store_path

    conn = sqlite3.connect(store_path())
    with conn:
        conn.execute("UPDATE baselines SET median_ms = median_ms / 1.25")
    conn.close()
    from engine.checklist import Checklist

    Checklist(ResultStore()).record_checks({"pass": 7, "warn": 2, "fail": 1, "skip": 3},
                                        {"driver.loaded": "pass", "gpu.ecc": "fail"})
    return run


@pytest.fixture
def serve():
    """Start exporters on free loopback ports; stop every one of them afterwards."""
    started = []

    def start(collector, host="127.0.0.1"):
        exp = Exporter(collector, host, 0)
        exp.start()
        started.append(exp)
        return exp

    yield start
    for exp in started:
        exp.stop()
    import threading

    left = [t.name for t in threading.enumerate() if t.name in ("sol-exporter", "sol-telemetry")]
    assert left == [], f"left running: {left}"


def test_scrape_gpu_and_store_metrics(populated, serve):
    sampler = simulated_sampler(SimulatedSource(), interval_s=0.2)
    sampler.poll_once()
    exp = serve(CockpitCollector(ResultStore(), sampler, simulated_model="SIMULATED H100"))
    assert exp.port > 0 and exp.url == f"http://127.0.0.1:{exp.port}/metrics"
    fams = scrape(exp.url)
    gpu = {"gpu": "0", "UUID": "SIMULATED-GPU-0", "modelName": "SIMULATED H100", "simulated": "true"}
    assert value(fams, "sol_cockpit_nvml_up") == 0  # simulated telemetry is not NVML's
    assert value(fams, "sol_cockpit_gpu_up", **gpu) == 1
    assert value(fams, "DCGM_FI_DEV_SM_CLOCK", **gpu) == 345.0  # MHz, as dcgm-exporter
    assert value(fams, "DCGM_FI_DEV_FB_USED", **gpu) == 600.0  # MiB
    assert value(fams, "DCGM_FI_DEV_POWER_USAGE", **gpu) == 72.0  # W
    assert 0 <= value(fams, "DCGM_FI_PROF_SM_ACTIVE", **gpu) <= 1  # a ratio, as dcgm-exporter
    assert {"Hostname", "device", "pci_bus_id"} <= set(fams["DCGM_FI_DEV_GPU_TEMP"].samples[0].labels)

    run = populated
    assert value(fams, "sol_cockpit_store_up") == 1
    assert value(fams, "sol_cockpit_last_run_seconds", **KEY) == pytest.approx(run["time_ms"]["median"] / 1e3)
    assert value(fams, "sol_cockpit_last_run_sol_ratio", **KEY) == pytest.approx(run["sol_pct"] / 100)
    assert value(fams, "sol_cockpit_last_run_correct", **KEY) == 1
    assert value(fams, "sol_cockpit_last_run_ok", **KEY) == 1
    assert value(fams, "sol_cockpit_last_run_tuned", **KEY) == 0
    assert abs(value(fams, "sol_cockpit_last_run_timestamp_seconds", **KEY) - time.time()) < 600
    assert value(fams, "sol_cockpit_baseline_ratio", **KEY) == pytest.approx(1.25)
    assert value(fams, "sol_cockpit_baseline_regression", **KEY) == 1
    assert value(fams, "sol_cockpit_baseline_seconds", **KEY) == pytest.approx(run["time_ms"]["median"] / 1.25e3)
    assert value(fams, "sol_cockpit_checks", status="fail") == 1 and value(fams, "sol_cockpit_checks", status="pass") == 7
    assert value(fams, "sol_cockpit_checklist_step_done", step="checks") == 0  # one check failed
    assert value(fams, "sol_cockpit_check_status", check="gpu.ecc", status="fail") == 1
    assert value(fams, "sol_cockpit_check_status", check="gpu.ecc", status="pass") == 0
    assert value(fams, "sol_cockpit_check_status", check="driver.loaded", status="pass") == 1
    assert all(f.type == "gauge" for f in fams.values())


def test_without_nvml_the_store_is_still_served(populated, serve, monkeypatch):
    from engine import nvml
    from engine.telemetry import nvml_sampler

    monkeypatch.setattr(nvml, "probe", lambda: (False, "no NVIDIA driver found", "install the driver"))
    exp = serve(CockpitCollector(ResultStore(), nvml_sampler(interval_s=0.2)))
    fams = scrape(exp.url)
    assert value(fams, "sol_cockpit_nvml_up") == 0
    assert not any(name.startswith("DCGM_") for name in fams)
    assert value(fams, "sol_cockpit_last_run_ok", **KEY) == 1


def test_an_unreadable_store_is_a_gauge_not_a_crash(serve, monkeypatch):
    store = ResultStore()
    monkeypatch.setattr(store, "list", lambda **kw: (_ for _ in ()).throw(RuntimeError("database is locked")))
    fams = scrape(serve(CockpitCollector(store)).url)
    assert value(fams, "sol_cockpit_store_up") == 0 and "sol_cockpit_last_run_seconds" not in fams


def test_a_non_loopback_address_is_served_with_a_warning(serve, caplog):
    with caplog.at_level("WARNING", logger="engine.exporter"):
        exp = serve(CockpitCollector(ResultStore()), host="0.0.0.0")
    assert "not loopback" in caplog.text and "0.0.0.0" in caplog.text
    assert value(scrape(f"http://127.0.0.1:{exp.port}/metrics"), "sol_cockpit_store_up") == 1


def test_once_prints_the_exposition_or_json(populated, capsys):
    code, out, _ = cli(capsys, "exporter", "--once", "--sim")
    fams = {f.name: f for f in text_string_to_metric_families(out)}
    assert code == 0 and value(fams, "sol_cockpit_last_run_ok", **KEY) == 1
    assert value(fams, "DCGM_FI_DEV_GPU_UTIL", gpu="0", simulated="true") >= 0
    code, out, _ = cli(capsys, "exporter", "--once", "--json")
    d = json.loads(out)
    assert code == 0 and "sol_cockpit_last_run_seconds" in {m["name"] for m in d["metrics"]}


@pytest.mark.parametrize("argv, needle", [
    (["--port", "70000"], "--port"),
    (["--port", "http"], "--port"),
    (["--interval", "0"], "--interval"),
    (["--profile", "h200", "--once"], "--profile"),
    (["--host", "192.0.2.1", "--port", "0"], "--host"),
])
def test_bad_input_is_exit_2_naming_it(capsys, argv, needle):
    code, out, _ = cli(capsys, "exporter", *argv, "--json")
    d = json.loads(out)
    assert code == 2 and d["status"] == "invalid" and needle in d["error"], d


def _start_cli(*argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "tui.cli.main", "exporter", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _serving(proc):
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, f"exporter exited: {proc.wait()} {proc.stderr.read()}"
        lines.append(line)
        if line.startswith("}"):
            return json.loads("".join(lines))


def test_cli_serves_refuses_a_port_in_use_and_stops_on_sigterm(populated, capsys):
    proc = _start_cli("--sim", "--port", "0", "--json", "--interval", "0.2")
    try:
        info = _serving(proc)
        assert info["status"] == "serving" and info["simulated"] is True and info["host"] == "127.0.0.1"
        fams = scrape(info["url"])
        assert value(fams, "sol_cockpit_gpu_up", gpu="0", simulated="true") == 1
        assert value(fams, "sol_cockpit_baseline_regression", **KEY) == 1

        code, out, err = cli(capsys, "exporter", "--port", str(info["port"]), "--json")
        d = json.loads(out)
        assert code == 2 and str(info["port"]) in d["error"] and "in use" in d["error"] and "--port" in d["fix"]

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_the_exporter_command_leaves_the_logger_as_it_found_it(populated, capsys, serve, caplog):
    """A run of the command (here --once) must not leave a handler bound to that run's stderr, nor
    stop the exporter's warnings reaching the caller's logging afterwards."""
    import logging

    logger = logging.getLogger("engine.exporter")
    before = (list(logger.handlers), logger.propagate, logger.level)
    assert cli(capsys, "exporter", "--once", "--sim")[0] == 0
    assert (list(logger.handlers), logger.propagate, logger.level) == before
    with caplog.at_level("WARNING", logger="engine.exporter"):
        serve(CockpitCollector(ResultStore()), host="0.0.0.0")
    assert "not loopback" in caplog.text
