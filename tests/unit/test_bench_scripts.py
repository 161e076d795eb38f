"""The GPU-machine bench scripts refuse malformed arguments before touching a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ncu_probe_unknown_case_exits_2_naming_the_flag():
    pytest.importorskip("cupy")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "ncu_probe.py"), "--cases", "seed-bf16,bogus"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--cases" in proc.stderr and "bogus" in proc.stderr and "seed-fp16" in proc.stderr


@pytest.mark.parametrize("argv,needle", [(["--shape", "8192,2560"], "--shape"),
                                         (["--shape", "8192,2560,2561"], "--shape"),
                                         (["--seconds", "0"], "--seconds")])
def test_energy_probe_bad_arguments_exit_2_naming_the_flag(argv, needle):
    pytest.importorskip("cupy")
    pytest.importorskip("pynvml")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "energy_probe.py"), *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr


@pytest.mark.parametrize("value", ["7976,x", "0,8192"])
def test_sm90_gemm_bad_m_list_exits_2_naming_the_flag(value):
    pytest.importorskip("cupy")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "sm90_gemm.py"), "--msweep-alt", "--m-list", value],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--m-list" in proc.stderr and value in proc.stderr


@pytest.mark.parametrize("argv,needle", [(["--variants", "default,3/0"], "--variants"),
                                         (["--variants", "0-1"], "--variants"),
                                         (["--iters", "0"], "--iters"),
                                         (["--round-warmup", "-1"], "--round-warmup"),
                                         (["--rounds", "x"], "--rounds")])
def test_membound_hints_bad_arguments_exit_2_naming_the_flag(argv, needle):
    pytest.importorskip("cupy")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "membound_hints.py"), *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr


@pytest.mark.parametrize("argv,needle", [(["--cold-duel", "--idle", "-1"], "--idle"),
                                         (["--cold-duel", "--idle", "soon"], "--idle"),
                                         (["--duel", "--rounds", "0"], "--rounds"),
                                         (["--pp160", "--iters", "0"], "--iters")])
def test_sm90_gemm_bad_numbers_exit_2_naming_the_flag(argv, needle):
    pytest.importorskip("cupy")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "sm90_gemm.py"), *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert needle in proc.stderr
