"""SOL math against hand-computed values."""

import pytest

from engine.profiles import load_profiles
from engine.sol import classify_bound, sol_figures, solexec_score, t_sol_ms
from kernels import get_spec


def test_seed_shape_on_h100_sxm_datasheet():
    spec = get_spec("gemm_residual")
    prof = load_profiles().get("h100")
    shape = {"m": 16 * 512, "n": 2560, "k": 2560}
    flops = spec.flops(shape)
    nbytes = spec.bytes_moved(shape, "bf16")
    assert flops / 1e9 == pytest.approx(107.37, abs=0.005)
    # A, W, R read once, out written once: 2 * (8192*2560*3 + 2560*2560) bytes
    assert nbytes == 2 * (8192 * 2560 * 3 + 2560 * 2560)
    f = sol_figures(flops, nbytes, prof.peak_flops("bf16"), prof.bandwidth_bytes_per_s)
    assert f.t_sol_ms == pytest.approx(0.1085, abs=5e-5)
    assert f.sol_bound == "compute"
    assert f.t_memory_ms == pytest.approx(nbytes / 3.35e12 * 1e3)


def test_measured_figures():
    # 1 TFLOP in 2 ms on a 1000 TFLOP/s, 1 TB/s device with 1 GB moved
    f = sol_figures(10**12, 10**9, 1000e12, 1e12, time_ms=2.0)
    assert f.t_sol_ms == pytest.approx(1.0)
    assert f.tflops == pytest.approx(500.0)
    assert f.gbps == pytest.approx(500.0)
    assert f.compute_util_pct == pytest.approx(50.0)
    assert f.bandwidth_util_pct == pytest.approx(50.0)
    assert f.sol_pct == pytest.approx(50.0)
    assert f.bound == "latency"


@pytest.mark.parametrize("cu,bu,expected", [(0.7, 0.2, "compute"), (0.2, 0.8, "memory"), (0.59, 0.59, "latency"),
                                            (0.6, 0.1, "compute"), (0.65, 0.9, "memory")])
def test_bound_uses_nsight_60_percent_threshold(cu, bu, expected):
    assert classify_bound(cu, bu) == expected


def test_solexec_score():
    assert solexec_score(0.2, 0.2, 0.1) == pytest.approx(0.5)      # as fast as the baseline
    assert solexec_score(0.1, 0.2, 0.1) == pytest.approx(1.0)      # at the speed of light
    assert solexec_score(0.15, 0.2, 0.1) == pytest.approx(1 / 1.5)
    assert solexec_score(0.15, 0.09, 0.1) is None                   # baseline under T_SOL: undefined


def test_t_sol_takes_the_larger_term():
    assert t_sol_ms(1e12, 1e9, 1e15, 1e12) == pytest.approx(1.0)    # both 1 ms
    assert t_sol_ms(1e12, 4e9, 1e15, 1e12) == pytest.approx(4.0)    # memory term wins
