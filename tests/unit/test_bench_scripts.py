"""The GPU-machine bench scripts refuse malformed arguments before touching a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def refused(script: str, *argv: str) -> str:
    """Run bench/SCRIPT with ARGV; it must exit 2 (argparse's usage error). Returns its stderr."""
    pytest.importorskip("cupy")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr


def test_ncu_probe_unknown_case_exits_2_naming_the_flag():
    err = refused("ncu_probe.py", "--cases", "seed-bf16,bogus")
    assert "--cases" in err and "bogus" in err and "seed-fp16" in err


@pytest.mark.parametrize("argv,needle", [(["--shape", "8192,2560"], "--shape"),
                                         (["--shape", "8192,2560,2561"], "--shape"),
                                         (["--seconds", "0"], "--seconds")])
def test_energy_probe_bad_arguments_exit_2_naming_the_flag(argv, needle):
    pytest.importorskip("pynvml")
    assert needle in refused("energy_probe.py", *argv)


@pytest.mark.parametrize("value", ["7976,x", "0,8192"])
def test_sm90_gemm_bad_m_list_exits_2_naming_the_flag(value):
    err = refused("sm90_gemm.py", "--msweep-alt", "--m-list", value)
    assert "--m-list" in err and value in err


@pytest.mark.parametrize("argv,needle", [(["--variants", "default,3/0"], "--variants"),
                                         (["--variants", "0-1"], "--variants"),
                                         (["--iters", "0"], "--iters"),
                                         (["--round-warmup", "-1"], "--round-warmup"),
                                         (["--rounds", "x"], "--rounds")])
def test_membound_hints_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("membound_hints.py", *argv)


@pytest.mark.parametrize("argv,needle", [(["--cold-duel", "--idle", "-1"], "--idle"),
                                         (["--cold-duel", "--idle", "soon"], "--idle"),
                                         (["--duel", "--rounds", "0"], "--rounds"),
                                         (["--pp160", "--iters", "0"], "--iters")])
def test_sm90_gemm_bad_numbers_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("sm90_gemm.py", *argv)


def test_sm90_gemm_bad_sweep_dtype_and_bench_rest_exit_2_naming_the_flag():
    assert "--sweep-dtype" in refused("sm90_gemm.py", "--cold-duel", "--m-list", "256", "--sweep-dtype", "fp8")
    assert "--rest" in refused("bench.py", "--rest", "61")
