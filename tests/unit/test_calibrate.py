"""Calibration: the measured profile, SOL against it beside the datasheet, and the CLI without a GPU."""

import json

import pytest

from engine import nvml
from engine.calibrate import measured_for, measured_profile
from engine.profiles import load_profiles, save_user_profile
from engine.runner import prepare, run_prepared
from engine.task import TaskSpec
from tui.cli.main import main

CEILINGS = {"copy_gbps": 4137.0, "tflops": {"bf16": 790.0, "fp16": 760.0, "tf32": 380.0, "fp32": 50.0},
            "gpu_name": "NVIDIA H100 80GB HBM3", "copy_bytes": 2**30}


def test_measured_profile_keeps_limits_and_takes_measured_peaks():
    base = load_profiles().get("h100")
    p = measured_profile(base, CEILINGS, host="box")
    assert p.name == "h100-sxm-measured" and p.measured and p.base_profile == "h100-sxm"
    assert p.peak_tflops.bf16 == 790.0 and p.peak_tflops.fp8 is None and p.memory_bandwidth_gbps == 4137.0
    assert p.shared_memory_per_block_bytes == base.shared_memory_per_block_bytes
    assert "tui calibrate on box" in p.source and p.aliases == []


def test_sol_against_measured_ceilings_beside_the_datasheet():
    base = load_profiles().get("h100")
    save_user_profile(measured_profile(base, CEILINGS))
    ps = load_profiles()
    assert measured_for(ps, base).name == "h100-sxm-measured"
    assert ps.detect("NVIDIA H100 80GB HBM3").name == "h100-sxm"   # never auto-detected
    res = run_prepared(prepare(TaskSpec(backend="sim", iterations=5, warmup=1), "h100"))
    assert res.measured_profile == "h100-sxm-measured"
    assert res.sol_measured.t_sol_ms == pytest.approx(2 * 8192 * 2560 * 2560 / 790e12 * 1e3)
    assert res.sol_measured.sol_pct > res.sol.sol_pct
    assert res.summary_json()["sol_pct_measured"] == res.sol_measured.sol_pct


def test_no_measured_profile_no_measured_sol():
    res = run_prepared(prepare(TaskSpec(backend="sim", iterations=5, warmup=1), "h100"))
    assert res.sol_measured is None and res.measured_profile is None


def test_calibrate_without_driver_exits_3(capsys, monkeypatch):
    monkeypatch.setattr(nvml, "probe", lambda: (False, "no NVIDIA driver found", "install the driver"))
    assert main(["calibrate", "--json"]) == 3
    assert main(["calibrate", "--profile", "h200", "--json"]) == 3
    out, err = capsys.readouterr()
    assert "no NVIDIA driver found" in err
    # --json: one object each, whatever the outcome
    dec, objs, pos = json.JSONDecoder(), [], 0
    while out[pos:].strip():
        obj, end = dec.raw_decode(out, pos + len(out[pos:]) - len(out[pos:].lstrip()))
        objs.append(obj)
        pos = end
    assert len(objs) == 2 and all(o["exit_code"] == 3 and o["status"] == "unavailable" for o in objs)


def test_calibrate_unknown_profile_exits_2(capsys):
    assert main(["calibrate", "--profile", "h900"]) == 2
    assert "known profiles" in capsys.readouterr().err


def test_bench_json_has_measured_fields(capsys):
    main(["bench", "--backend", "sim", "--iterations", "5", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert "sol_pct_measured" in d and d["sol_pct_measured"] is None


def test_run_screen_summary_shows_measured_sol():
    from tui.screens.run import summary_text

    base = load_profiles().get("h100")
    save_user_profile(measured_profile(base, CEILINGS))
    res = run_prepared(prepare(TaskSpec(backend="sim", iterations=5, warmup=1), "h100"))
    text = summary_text(res).plain
    assert "vs measured ceilings (h100-sxm-measured)" in text


def test_calibrate_without_a_gpu_does_not_offer_the_simulated_device(monkeypatch, capsys):
    """`tui calibrate` takes no --backend: its fix must not suggest `--backend sim`."""
    from engine import nvml
    from tui.cli.main import main

    monkeypatch.setattr(nvml, "probe", lambda: (False, "no NVIDIA driver found", "install the driver; "
                                                "in a container run with --gpus all; or use --backend sim"))
    assert main(["calibrate"]) == 3
    err = capsys.readouterr().err
    assert "no NVIDIA driver found" in err and "--backend sim" not in err and "measures a real GPU" in err
