"""K that is not a multiple of 8: 16-bit data runs (the decode path reads any K; the TMA path pads K
to whole 16-byte rows each launch and says what that costs); fp32 data is refused naming the field."""

from __future__ import annotations

import pytest

from engine.planner import plan
from engine.profiles import load_profiles
from engine.task import TaskSpec
from kernels import get_spec, nvrtc_check
from kernels.spec import render_task

H200 = load_profiles().get("h200")


def _plan(**kw):
    return plan(TaskSpec(backend="sim", **kw), H200)


@pytest.mark.parametrize("shape, block", [
    ({"m": 8192, "n": 2560, "k": 777}, None),
    ({"m": 2083, "n": 2560, "k": 777}, "168x128"),  # a swapped tile: the inner build pads its own A and W
    ({"m": 300, "n": 1024, "k": 4099}, "128x128"),
])
def test_tma_path_pads_k_and_compiles(shape, block):
    from engine.backends.cuda import compile_inputs

    p = _plan(shape=shape, block_size=block)
    assert p.ok, p.error_text()
    assert "padded to" in p.info["k_padding"] and "MB more traffic" in p.info["k_padding"]
    b = render_task(get_spec("gemm_residual"), p.task, p.limits)
    pads = [ln for ln in b.launches if ln.function == "pad_rows16"]
    kp = -(-shape["k"] // 8) * 8
    assert {(ln.args[0], ln.args[1]) for ln in pads} == {("a", "a_pad"), ("w", "w_pad")}
    rows = {ln.args[0]: ln.args[2] for ln in pads}
    assert rows == {"a": shape["m"], "w": shape["n"]}
    assert {sb.name: sb.shape for sb in b.scratch} == {"a_pad": (shape["m"], kp), "w_pad": (shape["n"], kp)}
    gemm = next(ln for ln in b.launches if ln.function == "gemm_residual_sm90")
    assert {a.buffer for a in gemm.args[:2]} == {"a_pad", "w_pad"} and all(a.cols == kp for a in gemm.args[:2])
    src, arch, opts = compile_inputs(b, p.limits)
    report = nvrtc_check.compile_cubin(src, arch, tuple(opts))
    assert report.ok and not report.spills, report.log[-500:]


def test_aligned_k_builds_no_padding():
    p = _plan(shape={"m": 8192, "n": 2560, "k": 2560})
    b = render_task(get_spec("gemm_residual"), p.task, p.limits)
    assert "k_padding" not in p.info and not any(ln.function == "pad_rows16" for ln in b.launches)


def test_decode_path_reads_any_k_without_padding():
    p = _plan(shape={"m": 8, "n": 2560, "k": 777})
    assert p.ok and p.info["path"].startswith("mma.sync") and p.info["loads"] == "2-byte"


def test_fp32_data_still_needs_k_multiple_of_8():
    p = _plan(shape={"m": 8192, "n": 2560, "k": 777}, dtype="fp32")
    assert not p.ok and any(v.field == "shape.k" for v in p.violations)
