"""--device all|0,2,5: parsing, validation against the GPUs there are, the spread and its outlier,
and bench / check / calibrate across several simulated or faked GPUs (nothing left running)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from engine.errors import InputError
from engine.multi_device import (
    DeviceSelection,
    resolve,
    sim_device_count,
    sim_slow_factor,
    spread,
)
from tests.unit.test_checks_support import FakeDevice, FakeNvml, healthy_answers, make_ctx
from tui.cli import check_context
from tui.cli.device_args import device_arg
from tui.cli.main import main


def _children(pid: int) -> list[tuple[int, bytes]]:
    """(pid, command line) of the live children of ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append((int(entry.name), cmd))
    return out


def child_pids() -> list[int]:
    """This process's children and the engine server's (the engine processes are forked from it);
    multiprocessing's resource tracker and the engine server left out (they outlive every run)."""
    out = []
    for pid, cmd in _children(os.getpid()):
        if b"multiprocessing.forkserver" in cmd:
            out += [p for p, _ in _children(pid)]
        elif b"resource_tracker" not in cmd:
            out.append(pid)
    return out


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SOL_COCKPIT_SIM_SLOW_DEVICES", raising=False)
    monkeypatch.setenv("SOL_COCKPIT_SIM_DEVICES", "3")


def run_json(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, dict]:
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


# --- parsing and validation -------------------------------------------------------------------------

def test_device_arg_forms() -> None:
    assert device_arg("0") == 0 and device_arg(" 3 ") == 3
    assert device_arg("all") == DeviceSelection("all")
    assert device_arg("0,2,5") == DeviceSelection("0,2,5", (0, 2, 5))
    for bad in ("", "0,,1", "0,0", "x", "-1", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            device_arg(bad)


def test_resolve_names_the_missing_gpu() -> None:
    assert resolve(DeviceSelection("all"), 4) == [0, 1, 2, 3]
    assert resolve(DeviceSelection("0,2", (0, 2)), 4) == [0, 2]
    with pytest.raises(InputError) as exc:
        resolve(DeviceSelection("0,5", (0, 5)), 4, simulated=True)
    assert "GPU 5 does not exist" in exc.value.message and exc.value.message.startswith("--device=0,5")
    with pytest.raises(InputError):
        resolve(DeviceSelection("all"), 0)


def test_sim_device_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sim_device_count({}) == 1 and sim_device_count({"SOL_COCKPIT_SIM_DEVICES": "8"}) == 8
    for bad in ("0", "many", "999"):
        with pytest.raises(InputError):
            sim_device_count({"SOL_COCKPIT_SIM_DEVICES": bad})
    env = {"SOL_COCKPIT_SIM_SLOW_DEVICES": "2,4=1.5"}
    assert sim_slow_factor(2, env) == 1.25 and sim_slow_factor(4, env) == 1.5 and sim_slow_factor(0, env) == 1.0
    for bad in ("x", "2=slow", "2=nan", "2=inf", "2=0", "-1", "2=1.5=3"):
        with pytest.raises(InputError) as exc:
            sim_slow_factor(0, {"SOL_COCKPIT_SIM_SLOW_DEVICES": bad})
        assert "SOL_COCKPIT_SIM_SLOW_DEVICES" in exc.value.message


@pytest.mark.parametrize("var, bad", [("SOL_COCKPIT_SIM_SLOW_DEVICES", "2=fast"), ("SOL_SIM_SOAK_SPEED", "nan"),
                                      ("SOL_SIM_SOAK_SPEED", "inf"), ("SOL_SIM_SOAK_SPEED", "quick"),
                                      ("SOL_COCKPIT_SIM_DEVICES", "lots")])
def test_a_malformed_rehearsal_variable_is_exit_2_naming_it(monkeypatch, capsys, var, bad) -> None:
    """Checked where the run is prepared, before an engine process starts (never a crash in it)."""
    from tui.cli.main import main

    monkeypatch.setenv(var, bad)
    assert main(["bench", "--backend", "sim", "--no-store", "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert var in out["error"]


# --- the spread --------------------------------------------------------------------------------------

def test_spread_finds_the_slow_gpu() -> None:
    s = spread({0: 1.00, 1: 1.01, 2: 1.30, 3: 0.99})
    assert s["slowest"]["device"] == 2 and s["fastest"]["device"] == 3
    assert s["spread_pct"] == pytest.approx(100 * (1.30 / 0.99 - 1))
    assert s["outlier"] == 2 and s["outlier_deviation_pct"] == pytest.approx(30.0)


def test_spread_without_outlier_and_edge_cases() -> None:
    assert spread({0: 1.00, 1: 1.01, 2: 1.02})["outlier"] is None
    assert spread({0: 1.0, 1: 1.2})["outlier"] == 1  # two GPUs: the slower one is named
    assert spread({0: 1.0})["outlier"] is None and spread({})["slowest"] is None
    fast = spread({0: 3000.0, 1: 3010.0, 2: 2000.0}, higher_is_better=True)  # bandwidth: lower is worse
    assert fast["slowest"]["device"] == 2 and fast["outlier"] == 2
    assert spread({0: 1.0, 1: 1.01, 2: 1.3}, threshold_pct=50)["outlier"] is None


# --- bench --------------------------------------------------------------------------------------------

BENCH = ["bench", "--backend", "sim", "--no-peers", "--iterations", "20", "--warmup", "2", "--no-store", "--json"]


def test_bench_every_gpu_finds_the_injected_slow_one(capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_COCKPIT_SIM_SLOW_DEVICES", "1")
    rc, out = run_json(capsys, [*BENCH, "--device", "all"])
    assert rc == 1 and out["status"] == "failed" and out["simulated"] is True
    assert [d["device"] for d in out["devices"]] == [0, 1, 2]
    assert all(d["status"] == "ok" for d in out["devices"])
    assert out["spread"]["outlier"] == 1 and out["spread"]["slowest"]["device"] == 1
    assert child_pids() == []


def test_bench_list_of_healthy_gpus_passes(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, [*BENCH, "--device", "0,2"])
    assert rc == 0 and out["ok"] is True and out["spread"]["outlier"] is None
    assert [d["device"] for d in out["devices"]] == [0, 2] and out["spread"]["spread_pct"] < 5
    assert child_pids() == []


@pytest.mark.slow
def test_bench_table_names_the_outlier(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_COCKPIT_SIM_SLOW_DEVICES", "2=1.4")
    assert main([a for a in BENCH if a != "--json"] + ["--device", "all"]) == 1
    text = capsys.readouterr().out
    assert "OUTLIER: GPU 2" in text and "SIMULATED" in text


@pytest.mark.parametrize("argv", [["bench", "--backend", "sim", "--device", "0,7", "--json"],
                                  ["soak", "--backend", "sim", "--duration", "5s", "--device", "3,0", "--json"],
                                  ["tune", "--backend", "sim", "--device", "all", "--json"]])
def test_a_gpu_that_does_not_exist_is_exit_2(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, argv)
    assert rc == 2 and out["status"] == "invalid" and out["field"] == "--device"
    assert child_pids() == []


def test_bad_device_text_is_argparse_exit_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--backend", "sim", "--device", "0,0", "--json"])
    assert exc.value.code == 2 and "twice" in json.loads(capsys.readouterr().out)["error"]


# --- check and calibrate --------------------------------------------------------------------------------

def three_gpus(sick: int | None = None) -> FakeNvml:
    answers = healthy_answers()
    for per in answers.values():
        if 0 in per:
            per.update({1: per[0], 2: per[0]})
    if sick is not None:
        answers["ecc_uncorrectable"][sick] = {"enabled": True, "volatile": 3, "aggregate": 3}
    devs = [FakeDevice(i, pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(3)]
    return FakeNvml(devs=devs, answers=answers)


def test_check_per_gpu_names_the_disagreeing_gpu(capsys: pytest.CaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_context, "make_context", lambda profile: make_ctx(nvml=three_gpus(sick=2)))
    rc, out = run_json(capsys, ["check", "--device", "all", "--json"])
    assert rc == 1 and [d["device"] for d in out["devices"]] == [0, 1, 2]
    ecc = {d["device"]: next(c for c in d["checks"] if c["id"] == "health.ecc")["status"] for d in out["devices"]}
    assert ecc == {0: "pass", 1: "pass", 2: "fail"}
    assert out["spread"]["outlier"] == 2 and "health.ecc" in out["spread"]["disagreements"]
    assert any(c["id"] == "driver.loaded" for c in out["machine"])  # the machine's checks run once


def test_check_healthy_gpus_agree(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_context, "make_context", lambda profile: make_ctx(nvml=three_gpus()))
    assert main(["check", "--device", "0,1"]) == 0
    assert "every GPU agrees" in capsys.readouterr().out
    rc, out = run_json(capsys, ["check", "--device", "4", "--json"])
    assert rc == 2 and out["field"] == "--device"


def test_calibrate_every_gpu_spread(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import calibrate, nvml

    monkeypatch.setattr(nvml, "probe", lambda: (True, None, None))
    monkeypatch.setattr(nvml, "device_count", lambda: 3)

    def fake_measure(device: int, on_event=None, cancel=None, timeout_s: float = 300.0) -> dict:
        copy = 3000.0 if device != 1 else 2400.0
        return {"copy_gbps": copy, "tflops": {"bf16": 800.0, "fp16": 800.0, "tf32": 400.0, "fp32": 60.0},
                "gpu_name": "NVIDIA H200", "copy_bytes": 2**30}

    monkeypatch.setattr(calibrate, "measure", fake_measure)
    rc, out = run_json(capsys, ["calibrate", "--device", "all", "--json"])
    assert rc == 1 and out["spread"]["metric"] == "copy_gbps" and out["spread"]["outlier"] == 1
    assert out["saved_to"] is None and len(out["devices"]) == 3


def test_calibrate_every_gpu_without_a_driver_is_exit_3(capsys: pytest.CaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import nvml

    monkeypatch.setattr(nvml, "probe", lambda: (False, "no NVIDIA driver found", "install it; or use --backend sim"))
    rc, out = run_json(capsys, ["calibrate", "--device", "all", "--json"])
    assert rc == 3 and "--backend sim" not in (out["fix"] or "")
