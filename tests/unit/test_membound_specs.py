"""add_rmsnorm and bias_gelu specs without a GPU: knob spaces, violations naming the field,
FLOPs/bytes, references against a numpy formula, and simulated runs where the knobs matter."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.runner import prepare, run_prepared
from engine.task import TaskSpec
from kernels import get_spec
from kernels.add_rmsnorm import SPEC as RMS
from kernels.add_rmsnorm import (
    blocks_per_sm,
    bulk_blocks_per_sm,
    register_estimate,
    slot_bytes,
    uses_bulk,
    vpt_for,
)
from kernels.bias_gelu import SPEC as GELU
from kernels.spec import DeviceLimits, render_task, violations_of

H200 = DeviceLimits((9, 0), 132, 232448, 233472, profile="h200")
BENCH = Path(__file__).resolve().parents[2] / "bench"
L40S = DeviceLimits((8, 9), 142, 101376, 102400, profile="l40s")


def task(spec, **kw):
    base = dict(shape=dict(spec.default_shape), dtype="bf16", block_size=None, memory_pipelining=None, fusion=True)
    base.update(kw)
    return SimpleNamespace(**base)


def fields(vs):
    return [v.field for v in vs]


def test_registered():
    assert get_spec("add_rmsnorm") is RMS and get_spec("bias_gelu") is GELU
    assert RMS.dims == GELU.dims == ("m", "n")
    assert RMS.default_shape == {"m": 32768, "n": 4096} and GELU.default_shape == {"m": 8192, "n": 10240}
    assert set(RMS.outputs) == {"out", "residual_out"} and GELU.outputs == ("out",)


@pytest.mark.parametrize("spec", [RMS, GELU])
def test_knob_spaces(spec):
    for lim in (H200, L40S):
        for dt in ("bf16", "fp16", "fp32"):
            opts = spec.block_size_options(lim, dt)
            assert set(opts) == {"128", "256", "512", "1024"}
            for bs in opts:
                st = spec.pipelining_options(lim, dt, bs)
                assert 0 in st and 2 in st and 1 not in st
    assert spec.block_size_options(H200, "int8") == []
    assert spec.pipelining_options(H200, "bf16", "96") == []


def test_rmsnorm_defaults_follow_the_row_length():
    # Hopper: the bulk ring, 3 rows in flight; older GPUs: the register path, 2
    assert RMS.default_knobs(H200, "bf16", {"m": 32768, "n": 4096}) == ("256", 3)
    assert RMS.default_knobs(H200, "bf16", {"m": 8192, "n": 2560}) == ("128", 3)   # 320 vectors: 3 x 128
    assert RMS.default_knobs(H200, "fp32", {"m": 32768, "n": 4096}) == ("512", 3)
    assert RMS.default_knobs(L40S, "bf16", {"m": 32768, "n": 4096}) == ("256", 2)
    assert RMS.default_knobs(L40S, "bf16", {"m": 8192, "n": 2560}) == ("128", 2)
    assert GELU.default_knobs(H200, "bf16") == ("256", 0)


def test_rmsnorm_bulk_path_where_it_applies():
    """Compute capability >= 9.0, fused, the row in registers and the ring in shared memory: the
    TMA bulk ring with its slots as dynamic shared memory; everywhere else the register path."""
    def built(limits, **kw):
        b = render_task(RMS, task(RMS, **kw), limits)
        return b, b.launches[-1], b.info

    b, ln, info = built(H200)
    assert info["path"] == "TMA bulk ring, 3 rows in flight" and "#define AR_BULK 1" in b.source
    assert ln.shared_mem_bytes == 3 * slot_bytes(4096, "bf16") == 3 * 16384 == info["shared_memory_bytes"]
    assert info["blocks_per_sm"] == 4 and ln.grid == (132 * 4, 1, 1)   # 4 x (48 KB + 1.5 KB) <= 228 KB
    assert built(H200, memory_pipelining=0)[2]["path"] == "TMA bulk ring, no overlap"
    assert built(H200, memory_pipelining=0)[1].shared_mem_bytes == 16384
    # the register path: an older GPU, fusion off, a row too long for registers
    for limits, kw in ((L40S, {}), (H200, {"fusion": False}),
                       (H200, {"shape": {"m": 7, "n": 131072}, "block_size": "256"})):
        b, ln, info = built(limits, **kw)
        assert "#define AR_BULK 1" not in b.source and ln.shared_mem_bytes == 0, (limits.profile, kw)
        assert not info["path"].startswith("TMA"), info["path"]
    # fp32 rows of 16384: 128 KB a slot, so 2 slots do not fit a block: registers for 2, ring for off
    assert not uses_bulk("fp32", 16384, 1024, 2, True, H200) and uses_bulk("fp32", 16384, 1024, 0, True, H200)
    assert bulk_blocks_per_sm("bf16", 4096, 256, 4, H200) == 3 and bulk_blocks_per_sm("bf16", 4096, 256, 2, H200) == 4
    assert bulk_blocks_per_sm("bf16", 4096, 1024, 2, H200) == 1                    # 40 registers x 1024
    assert bulk_blocks_per_sm("bf16", 131072, 256, 2, H200) == 0                   # no row in registers


def test_rmsnorm_register_model_and_occupancy():
    assert vpt_for(4096, "bf16", 256) == 2 and vpt_for(4096, "fp32", 256) == 4
    assert vpt_for(2560, "bf16", 128) == 3 and vpt_for(131072, "bf16", 1024) == 0
    assert register_estimate("bf16", 256, 2, 4, True) > register_estimate("bf16", 256, 2, 2, True) \
        > register_estimate("bf16", 256, 2, 0, True)
    assert blocks_per_sm("bf16", 256, 2, 2, True, H200) == 2
    assert blocks_per_sm("bf16", 1024, 1, 4, True, H200) == 0     # > 64 registers at 1024 threads
    assert blocks_per_sm("bf16", 1024, 1, 0, True, L40S) == 1     # 1536 threads per SM there


@pytest.mark.parametrize("spec", [RMS, GELU])
def test_violations_name_the_field(spec):
    assert violations_of(spec, task(spec), H200) == []
    assert fields(violations_of(spec, task(spec, shape={"m": 64, "n": 100}), H200)) == ["shape.n"]
    assert fields(violations_of(spec, task(spec, block_size="96"), H200)) == ["block_size"]
    assert fields(violations_of(spec, task(spec, block_size="128x128"), H200)) == ["block_size"]
    assert fields(violations_of(spec, task(spec, memory_pipelining=5), H200)) == ["memory_pipelining"]
    assert fields(violations_of(spec, task(spec, dtype="int8"), H200)) == ["dtype"]
    assert fields(violations_of(spec, task(spec, shape={"m": 8}), H200)) == ["shape"]
    small = DeviceLimits((9, 0), 132, 232448, 233472, max_threads_per_block=512)
    v = violations_of(spec, task(spec, block_size="1024"), small)
    assert fields(v) == ["block_size"] and "512 threads" in str(v[0])
    with pytest.raises(ValueError, match="shape.n"):
        render_task(spec, task(spec, shape={"m": 4, "n": 12}), H200)


def test_rmsnorm_pipelining_options_follow_the_shape():
    """With a shape, only the depths that fit are offered: 1024 threads on a 65536-element row
    hold 8 vectors a thread (too many registers for any depth, and a 256 KB slot: no ring)."""
    long_row = {"m": 64, "n": 65536}
    assert RMS.pipelining_options(H200, "bf16", "1024", long_row) == []
    assert RMS.pipelining_options(H200, "bf16", "256", long_row) == [4, 3, 2, 0]   # the re-read path
    assert RMS.pipelining_options(H200, "bf16", "1024", {"m": 64, "n": 4096}) == [4, 3, 2, 0]
    assert RMS.pipelining_options(L40S, "bf16", "1024", {"m": 64, "n": 4096}) == [2, 0]
    assert RMS.pipelining_options(H200, "bf16", "1024") == [4, 3, 2, 0]               # no shape: all
    for st in RMS.pipelining_options(L40S, "bf16", "1024", {"m": 64, "n": 4096}):
        assert violations_of(RMS, task(RMS, block_size="1024", memory_pipelining=st), L40S) == []
    # the runner's fix says so instead of listing depths that do not fit
    from engine.errors import InputError

    with pytest.raises(InputError) as err:
        prepare(TaskSpec(kernel="add_rmsnorm", shape=long_row, block_size="1024", memory_pipelining=2,
                         backend="sim"), profile_name="h200")
    assert "no MEMORY_PIPELINING fits BLOCK_SIZE=1024 at this shape" in err.value.fix, err.value.fix


def test_rmsnorm_register_violation():
    # 4 rows in flight at 1024 threads: too many registers on the register path (an older GPU, or
    # fusion off); Hopper's fused bulk ring holds the rows in shared memory and takes it
    for limits, fusion in ((L40S, True), (H200, False)):
        v = violations_of(RMS, task(RMS, block_size="1024", memory_pipelining=4, fusion=fusion), limits)
        assert fields(v) == ["memory_pipelining"] and "registers" in str(v[0])
        assert str(v[0]).startswith("MEMORY_PIPELINING=4")
    assert violations_of(RMS, task(RMS, block_size="1024", memory_pipelining=4), H200) == []


def test_flops_and_bytes():
    s = {"m": 32768, "n": 4096}
    assert RMS.flops(s) == 5 * 32768 * 4096
    assert RMS.bytes_moved(s, "bf16") == 2 * (4 * 32768 * 4096 + 4096)
    assert RMS.bytes_moved(s, "fp32") == 4 * (4 * 32768 * 4096 + 4096)
    g = {"m": 8192, "n": 10240}
    assert GELU.flops(g) == 10 * 8192 * 10240
    assert GELU.bytes_moved(g, "fp16") == 2 * (2 * 8192 * 10240 + 10240)


def test_builds():
    b = render_task(RMS, task(RMS), H200)
    assert b.functions == ("add_rmsnorm",)
    ln = b.launches[0]
    assert ln.args == ("x", "r", "weight", "residual_out", "out", 32768, 4096)
    assert ln.block == (256, 1, 1) and ln.grid == (132 * 4, 1, 1)   # the bulk ring: 4 blocks per SM
    assert "#define AR_STAGES 3" in b.source and "#define AR_VPT 2" in b.source
    r = render_task(RMS, task(RMS), L40S)                                   # the register path
    assert r.launches[0].grid == (142 * 2, 1, 1) and "#define AR_STAGES 2" in r.source
    b0 = render_task(RMS, task(RMS, memory_pipelining=0), H200)
    assert "#define AR_STAGES 1" in b0.source and b0.source != b.source
    u = render_task(RMS, task(RMS, fusion=False), H200)
    assert u.functions == ("residual_add", "rmsnorm")
    assert u.launches[0].args == ("x", "r", "residual_out", 32768, 4096)
    assert render_task(RMS, task(RMS, shape={"m": 1, "n": 4096}), H200).launches[0].grid == (1, 1, 1)
    lr = render_task(RMS, task(RMS, shape={"m": 3, "n": 131072}), H200)
    assert lr.info["vectors_per_thread"] == 0 and "#define AR_VPT 0" in lr.source
    g = render_task(GELU, task(GELU), H200)
    assert g.functions == ("bias_gelu",) and g.launches[0].args == ("x", "bias", "out", 8192, 10240)
    gu = render_task(GELU, task(GELU, fusion=False, memory_pipelining=4), H200)
    assert gu.functions == ("bias_add", "gelu_inplace") and "#define BG_UNROLL 4" in gu.source


def _rng_inputs(names_shapes, seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in names_shapes.items()}


def test_rmsnorm_reference_matches_numpy_formula():
    ins = _rng_inputs({"x": (5, 64), "r": (5, 64), "weight": (64,)})
    ref = RMS.reference_outputs(np, ins)
    s = ins["x"].astype(np.float64) + ins["r"]
    want = np.empty_like(s)
    for i in range(5):
        want[i] = s[i] / math.sqrt(float(np.sum(s[i] ** 2)) / 64 + 1e-6) * ins["weight"]
    np.testing.assert_allclose(ref["residual_out"], s, rtol=1e-15)
    np.testing.assert_allclose(ref["out"], want, rtol=1e-12)
    assert ref["out"].dtype == np.float64


def test_gelu_reference_matches_numpy_formula():
    ins = _rng_inputs({"x": (3, 16), "bias": (16,)})
    ref = GELU.reference_outputs(np, ins)["out"]
    v = ins["x"].astype(np.float64) + ins["bias"]
    want = v * 0.5 * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))
    np.testing.assert_allclose(ref, want, rtol=1e-13)
    # the kernel's form v / (1 + exp(-2u)) is the same function
    u = np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)
    np.testing.assert_allclose(v / (1 + np.exp(-2 * u)), want, rtol=1e-12, atol=1e-15)


def test_peers_declared():
    """PyTorch's eager ops first (the baseline where torch is installed), CuPy's strawman after."""
    for spec, names in ((RMS, ["torch_add_rmsnorm", "cupy_add_rmsnorm"]), (GELU, ["torch_bias_gelu", "cupy_bias_gelu"])):
        peers = spec.peers(task(spec))
        assert [p.name for p in peers] == names and all(p.baseline and p.verify for p in peers)
        assert "strawman" in peers[1].label


def test_peer_on_numpy_matches_reference():
    ins = _rng_inputs({"x": (4, 32), "r": (4, 32), "weight": (32,)})
    outs = {"out": np.empty((4, 32), np.float32), "residual_out": np.empty((4, 32), np.float32)}
    RMS.peers(None)[1].run(np, None, ins, outs)
    ref = RMS.reference_outputs(np, ins)
    np.testing.assert_allclose(outs["out"], ref["out"], rtol=1e-5, atol=1e-5)
    gi = _rng_inputs({"x": (4, 32), "bias": (32,)})
    go = {"out": np.empty((4, 32), np.float32)}
    GELU.peers(None)[1].run(np, None, gi, go)
    np.testing.assert_allclose(go["out"], GELU.reference(np, gi), rtol=1e-5, atol=1e-6)


def _sim(kernel, **kw):
    prep = prepare(TaskSpec(kernel=kernel, backend="sim", warmup=1, iterations=5, **kw))
    res = run_prepared(prep)
    assert res.status.value == "ok", res.error
    assert res.simulated and res.correctness.correct
    return res


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_sim_runs_and_knobs_matter(dtype):
    rms = {"shape": {"m": 32768, "n": 4096}, "dtype": dtype}
    fused = _sim("add_rmsnorm", **rms)
    unfused = _sim("add_rmsnorm", fusion=False, **rms)
    assert unfused.timing.median_ms > fused.timing.median_ms * 1.1
    off = _sim("add_rmsnorm", block_size="1024", memory_pipelining=0, **rms)
    on = _sim("add_rmsnorm", block_size="1024", memory_pipelining=2, **rms)
    # one block of 1024 threads a SM (bf16, fp16) or two (fp32): off keeps 1-2 rows in flight per SM
    assert off.timing.median_ms > on.timing.median_ms * 1.03
    assert _sim("add_rmsnorm", memory_pipelining=0, **rms).timing.median_ms != fused.timing.median_ms
    g = {"shape": {"m": 8192, "n": 10240}, "dtype": dtype}
    gf = _sim("bias_gelu", **g)
    assert _sim("bias_gelu", fusion=False, **g).timing.median_ms > gf.timing.median_ms * 1.5
    assert _sim("bias_gelu", memory_pipelining=4, **g).timing.median_ms > gf.timing.median_ms
    assert {p.name for p in fused.peers} == {"torch_add_rmsnorm", "cupy_add_rmsnorm"}


def test_sim_odd_shapes():
    _sim("add_rmsnorm", shape={"m": 1, "n": 8})
    _sim("add_rmsnorm", shape={"m": 777, "n": 131072}, dtype="fp32")
    _sim("bias_gelu", shape={"m": 3, "n": 24})


def _ptx(source: str) -> str:
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    prog = nvrtc.createProgram(source, "k.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=compute_90", "-std=c++17"])
        ptx = nvrtc.getPTX(prog)
        return ptx.decode() if isinstance(ptx, bytes) else ptx
    finally:
        nvrtc.destroyProgram(prog)


def test_default_builds_store_plainly_and_the_hint_builds_do_not():
    """The engine's builds use plain stores (streaming stores measured no faster through the
    engine, ADR-0006); bench/membound_hints.py's STREAM_STORES / VEC_*_HINT builds
    really change the instructions (st.global.cs, L2 cache hints), while residual_out, which the
    unfused rmsnorm reads back, keeps plain stores."""
    import importlib.util

    pytest.importorskip("cupy")
    spec_ = importlib.util.spec_from_file_location("membound_hints", BENCH / "membound_hints.py")
    hints = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(hints)
    fused = render_task(RMS, task(RMS, memory_pipelining=2), L40S).source   # the register path
    assert "STREAM_STORES" not in fused.split("#define VEC_DTYPE")[0]
    plain = _ptx(fused)
    assert "st.global.cs" not in plain and "cache_hint" not in plain
    cs = _ptx(hints.variant_source(fused, (0, 1)))
    # res and out, two vectors per thread, for each of the two rows in flight (unrolled)
    assert cs.count("st.global.cs.v4.u32") == 2 * 2 * 2 and "st.global.v4.u32" not in cs
    ef = _ptx(hints.variant_source(fused, (1, 2)))
    assert ef.count("st.global.L2::cache_hint") == 8 and "ld.global.nc.L1::no_allocate.L2::cache_hint" in ef
    unfused = _ptx(hints.variant_source(render_task(RMS, task(RMS, fusion=False), H200).source, (0, 1)))
    add_body, rms_body = unfused.split(".entry rmsnorm")
    assert "st.global.cs" not in add_body and "st.global.cs" in rms_body
