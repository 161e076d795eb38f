"""gemm_residual's spec without a GPU: knob spaces, every Violation path, FLOPs/bytes, shapes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kernels.gemm_residual import SPEC, GemmResidualSpec
from kernels.spec import Build, DeviceLimits, KernelSpec, plan_or_raise, render_task, violations_of

H200 = DeviceLimits((9, 0), 132, 232448, 233472, profile="h200")
A100 = DeviceLimits((8, 0), 108, 166912, 167936, profile="a100")
L40S = DeviceLimits((8, 9), 142, 101376, 102400, profile="l40s")
SEED = {"m": 8192, "n": 2560, "k": 2560}


def task(**kw):
    base = dict(shape=dict(SEED), dtype="bf16", block_size=None, memory_pipelining=None, fusion=True)
    base.update(kw)
    return SimpleNamespace(**base)


def fields(violations):
    return [v.field for v in violations]


def test_identity():
    assert isinstance(SPEC, GemmResidualSpec) and isinstance(SPEC, KernelSpec)
    assert SPEC.name == "gemm_residual"
    assert SPEC.dims == ("m", "n", "k")


def test_flops_and_bytes_for_the_seed_shape():
    assert SPEC.flops(SEED) == 107374182400
    assert SPEC.bytes_moved(SEED, "bf16") == 2 * (8192 * 2560 + 2560 * 2560 + 2 * 8192 * 2560)
    assert SPEC.bytes_moved(SEED, "fp32") == 2 * SPEC.bytes_moved(SEED, "bf16")


def test_normalize_shape_forms():
    assert SPEC.normalize_shape({"batch": 16, "seq": 512, "hidden": 2560}) == SEED
    assert SPEC.normalize_shape({"_0": 8192, "_1": 2560, "_2": 2560}) == SEED
    assert SPEC.normalize_shape(dict(SEED)) == SEED
    with pytest.raises(ValueError, match="hidden"):
        SPEC.normalize_shape({"batch": 16, "seq": 512})
    with pytest.raises(ValueError, match="missing k"):
        SPEC.normalize_shape({"m": 1, "n": 8})


def test_knob_spaces_fit_the_limits():
    for lim in (H200, A100, L40S):
        for dt in ("bf16", "fp16", "fp32", "tf32"):
            tiles = SPEC.block_size_options(lim, dt)
            assert tiles, (lim.profile, dt)
            for bs in tiles:
                stages = SPEC.pipelining_options(lim, dt, bs)
                assert 2 in stages and 0 in stages
                for st in stages:
                    tile = SPEC.parse_block_size(bs, dt)
                    assert SPEC.smem_bytes(dt, tile, st) <= lim.shared_memory_per_block_bytes
    assert SPEC.block_size_options(H200, "bf16")[0] == "128x256"
    assert SPEC.block_size_options(H200, "fp32")[0] == "128x128"
    assert SPEC.parse_block_size("128x128", "fp32") == (128, 128, 16)
    assert SPEC.block_size_options(H200, "tf32") == SPEC.block_size_options(H200, "bf16")
    assert SPEC.parse_block_size("128x256", "tf32") == (128, 256, 16)
    assert SPEC.default_knobs(H200, "bf16") == ("128x256", 4)
    assert SPEC.default_knobs(H200, "tf32") == ("128x256", 4)
    # fp32: the deepest pipeline that still lets two 256-thread blocks share an SM
    assert SPEC.default_knobs(H200, "fp32") == ("128x128", 4)
    assert SPEC.default_knobs(A100, "fp32") == ("128x128", 4)
    assert SPEC.default_knobs(L40S, "fp32") == ("128x128", 2)
    assert SPEC.smem_bytes("fp32", (128, 128, 16), 4) == 4 * 256 * 20 * 4
    assert SPEC.smem_bytes("tf32", (128, 256, 16), 3) == 3 * 384 * 20 * 4
    # L40S (99 KB): the big tiles lose their 4th stage but keep 3
    assert SPEC.pipelining_options(L40S, "bf16", "128x256") == [3, 2, 0]
    assert SPEC.pipelining_options(H200, "bf16", "not-a-tile") == []
    assert SPEC.block_size_options(H200, "int8") == []


def test_valid_task_has_no_violations_and_builds():
    for dt in ("bf16", "fp16", "fp32", "tf32"):
        for fusion in (True, False):
            t = task(dtype=dt, fusion=fusion)
            assert violations_of(SPEC, t, H200) == []
            b = render_task(SPEC, t, H200)
            assert isinstance(b, Build)
            assert len(b.launches) == (1 if fusion else 2)
            assert b.launches[0].args == ("a", "w", "r", "out", 8192, 2560, 2560)
            assert set(b.functions) == {ln.function for ln in b.launches}
            assert b.info["path"].endswith("+cp.async")
            assert f"#define GR_FUSE {int(fusion)}" in b.source


def test_build_geometry_and_defines():
    b = render_task(SPEC, task(block_size="128x256", memory_pipelining=3, shape={"m": 586, "n": 2560, "k": 2560}),
                   H200)
    ln = b.launches[0]
    assert ln.grid == (10, 5, 1) and ln.block == (256, 1, 1)
    assert ln.shared_mem_bytes == 3 * (128 + 256) * 40 * 2
    assert "#define GR_STAGES 3" in b.source and "#define GR_BN 256" in b.source
    assert b.info["tile"] == "128x256x32" and b.info["stages"] == 3
    off = render_task(SPEC, task(memory_pipelining=0), H200)
    assert off.info["path"] == "mma.sync+sync-loads"
    f32 = render_task(SPEC, task(dtype="fp32", block_size="128x128", memory_pipelining=2), H200)
    assert f32.functions == ("gemm_residual_fp32",) and f32.launches[0].block == (256, 1, 1)
    assert f32.info["tile"] == "128x128x16" and "#define GR_DTYPE 2" in f32.source
    assert f32.launches[0].shared_mem_bytes == 2 * 256 * 20 * 4
    tf = render_task(SPEC, task(dtype="tf32", block_size="128x256", memory_pipelining=3, shape={"m": 1, "n": 8, "k": 8}),
                    H200)
    assert tf.functions == ("gemm_residual_mma",) and tf.launches[0].block == (256, 1, 1)
    assert tf.launches[0].grid == (1, 1, 1) and tf.launches[0].shared_mem_bytes == 3 * 384 * 20 * 4
    assert tf.info["path"] == "mma.sync.tf32+cp.async" and tf.info["tile"] == "128x256x16"
    assert "#define GR_DTYPE 3" in tf.source and "gemm_residual_fp32(" not in tf.source


def test_bad_dtype():
    v = violations_of(SPEC, task(dtype="int8"), H200)
    assert fields(v) == ["dtype"] and "int8" in str(v[0])


def test_bad_block_size_syntax_and_unknown_tile():
    v = violations_of(SPEC, task(block_size="12345"), H200)
    assert fields(v) == ["block_size"]
    assert "BLOCK_SIZE=12345" in str(v[0]) and "BMxBN" in str(v[0])
    v = violations_of(SPEC, task(block_size="96x96"), H200)
    assert fields(v) == ["block_size"] and "not offered" in v[0].message and "128x256" in v[0].limit
    # an fp32 tile is not a tensor-core tile, nor is BK 32 offered for tf32
    assert fields(violations_of(SPEC, task(block_size="128x128x16"), H200)) == ["block_size"]
    assert fields(violations_of(SPEC, task(dtype="tf32", block_size="128x128x32"), H200)) == ["block_size"]
    assert fields(violations_of(SPEC, task(dtype="fp32", block_size="128x256"), H200)) == ["block_size"]
    with pytest.raises(ValueError, match="BLOCK_SIZE"):
        render_task(SPEC, task(block_size="12345"), H200)


def test_shared_memory_over_the_limit_names_the_bytes():
    v = violations_of(SPEC, task(block_size="128x256", memory_pipelining=4), L40S)
    assert fields(v) == ["memory_pipelining"]
    assert "122880 bytes" in v[0].message and "101376" in v[0].limit
    tiny = DeviceLimits((8, 0), 10, 16384, 16384)
    v = violations_of(SPEC, task(block_size="256x128"), tiny)
    assert fields(v) == ["block_size"] and "bytes of shared memory" in v[0].message
    v = violations_of(SPEC, task(), tiny)  # default tile: none fits at all
    assert "block_size" in fields(v) or "memory_pipelining" in fields(v)


def test_pipelining_not_offered():
    v = violations_of(SPEC, task(memory_pipelining=7), H200)
    assert fields(v) == ["memory_pipelining"] and "MEMORY_PIPELINING=7" in str(v[0])


def test_threads_over_the_limit():
    few = DeviceLimits((9, 0), 132, 232448, 233472, max_threads_per_block=128)
    v = violations_of(SPEC, task(block_size="128x128", memory_pipelining=2), few)
    assert fields(v) == ["block_size"] and "256 threads" in v[0].message


def test_shape_rules():
    v = violations_of(SPEC, task(shape={"m": 7976, "n": 2561, "k": 2564}), H200)
    assert fields(v) == ["shape.n", "shape.k"]
    assert "multiple of 8" in v[0].message and "shape.n=2561" in str(v[0])
    v = violations_of(SPEC, task(shape={"m": 8192, "n": 2560}), H200)
    assert fields(v) == ["shape"] and "missing k" in v[0].message
    for m in (1, 586, 1571, 7976):
        assert violations_of(SPEC, task(shape={"m": m, "n": 1000, "k": 1000}), H200) == []


def test_buffers():
    bufs = {b.name: b for b in SPEC.buffers(task(shape={"batch": 2, "seq": 3, "hidden": 16}))}
    assert bufs["a"].shape == (6, 16) and bufs["w"].shape == (16, 16) and bufs["r"].shape == (6, 16)
    assert bufs["out"].role == "output" and {bufs[n].role for n in "awr"} == {"input"}
    assert SPEC.output == "out"


def test_reference_and_rtol():
    rng = np.random.default_rng(0)
    a, w, r = rng.standard_normal((5, 8)), rng.standard_normal((16, 8)), rng.standard_normal((5, 16))
    ref = SPEC.reference(np, {"a": a.astype(np.float32), "w": w.astype(np.float32), "r": r})
    assert ref.dtype == np.float64
    a64, w64 = a.astype(np.float32).astype(np.float64), w.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(ref, a64 @ w64.T + r, rtol=1e-12)
    assert (SPEC.rtol("bf16"), SPEC.rtol("fp16"), SPEC.rtol("fp32"), SPEC.rtol("tf32")) == (1.6e-2, 2e-3, 1e-4, 5e-3)


def _tf32(x, mode):
    """fp32 -> tf32 (10-bit mantissa) as bits: 'rna' = cvt.rna (nearest, ties away), 'rz' = truncation."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    if mode == "rna":
        bits = bits + 0x1000
    return (bits & 0xFFFFE000).astype(np.uint32).view(np.float32)


def _fp32_problem(seed, m, n, k):
    """N(0,1) fp32 a[m, k], w[n, k], r[m, n] and the float64 reference."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    return a, w, r, SPEC.reference(np, {"a": a, "w": w, "r": r})


def test_tf32_rtol_covers_tf32_rounding():
    """Emulate TF32 operands (K = 2560, N(0,1)) in numpy and apply the verifier's metric
    |out - ref| / (|ref| + rms(ref)): cvt.rna rounding must sit well under rtol, and even hardware
    truncation (what the tensor cores do to unrounded fp32) must pass."""
    from engine.verify import compare

    a, w, r, ref = _fp32_problem(5, 256, 256, 2560)
    errs = {}
    for mode in ("rna", "rz"):
        out = _tf32(a, mode).astype(np.float64) @ _tf32(w, mode).astype(np.float64).T + r
        c = compare(np, out, ref, SPEC.rtol("tf32"))
        assert c.correct, (mode, c.max_rel_err)
        errs[mode] = c.max_rel_err
    assert errs["rna"] < SPEC.rtol("tf32") / 3
    # TF32 really is coarser than fp32's tolerance: the fp32 rtol would reject it
    assert errs["rna"] > SPEC.rtol("fp32")


def test_3xtf32_split_meets_the_fp32_tolerance():
    """The Hopper fp32 path's 3xTF32, emulated in numpy (K = 2560, N(0,1)): hi as the tensor cores
    read x (low 13 bits dropped), lo = tf32_rna(x - hi); three tf32 products, a_lo * w_lo dropped.
    The representation error sits far under the fp32 rtol, and each piece is exactly tf32 (so the
    tensor cores read it unchanged); one tf32 product alone fails the fp32 rtol."""
    from engine.verify import compare

    a, w, r, ref = _fp32_problem(7, 128, 128, 2560)

    def split(x, hi_mode):
        hi = _tf32(x, hi_mode)
        lo = _tf32((x - hi).astype(np.float32), "rna")
        assert np.array_equal(x - hi, (x.astype(np.float64) - hi.astype(np.float64)).astype(np.float32))
        return hi.astype(np.float64), lo.astype(np.float64)

    errs = {}
    for hi_mode in ("rz", "rna"):  # SPLIT_HI off (hardware truncation) and on (written, rounded)
        (ah, al), (wh, wl) = split(a, hi_mode), split(w, hi_mode)
        assert np.array_equal(_tf32(al.astype(np.float32), "rz"), al.astype(np.float32))
        out = al @ wh.T + ah @ wl.T + ah @ wh.T + r
        c = compare(np, out, ref, SPEC.rtol("fp32"))
        assert c.correct, (hi_mode, c.max_rel_err)
        errs[hi_mode] = c.max_rel_err
    assert max(errs.values()) < SPEC.rtol("fp32") / 20
    one = _tf32(a, "rz").astype(np.float64) @ _tf32(w, "rz").astype(np.float64).T + r
    assert not compare(np, one, ref, SPEC.rtol("fp32")).correct


def test_peers():
    peers = {p.name: p for p in SPEC.peers(task())}
    assert set(peers) == {"torch_matmul_add", "torch_addmm", "cupy_matmul_add", "cublas_gemm_add",
                          "cublas_gemm_beta1", "cublas_gemm"}
    for dt in ("bf16", "fp16", "fp32"):
        # SOL-ExecBench's baseline (PyTorch eager) first; CuPy's where torch is not installed
        assert [p.name for p in peers.values() if p.baseline and dt in p.dtypes] == ["torch_matmul_add",
                                                                                    "cupy_matmul_add"]
    # tf32: CuPy's fp32 matmul is not a TF32 peer; the baseline is cuBLAS (FAST_TF32) GEMM + add
    assert [p.name for p in peers.values() if p.baseline and "tf32" in p.dtypes] == ["cublas_gemm_add"]
    assert {p.name for p in peers.values() if "tf32" in p.dtypes} == {"cublas_gemm_add", "cublas_gemm_beta1",
                                                                      "cublas_gemm"}
    rng = np.random.default_rng(1)
    ins = {"a": rng.standard_normal((4, 8)), "w": rng.standard_normal((16, 8)), "r": rng.standard_normal((4, 16))}
    out = np.empty((4, 16))
    peers["cupy_matmul_add"].run(np, None, ins, {"out": out})
    np.testing.assert_allclose(out, SPEC.reference(np, ins))
    torch = pytest.importorskip("torch")
    ins32 = {k: v.astype(np.float32) for k, v in ins.items()}
    for name in ("torch_matmul_add", "torch_addmm"):  # DLPack views over the (here host) arrays
        out32 = np.zeros((4, 16), np.float32)
        peers[name].run(np, None, ins32, {"out": out32})
        np.testing.assert_allclose(out32, SPEC.reference(np, ins32), rtol=1e-5, atol=1e-5)
    assert torch.__version__

    class Blas:
        def gemm_nt(self, a, w, c, alpha=1.0, beta=0.0):
            c[...] = alpha * (a @ w.T) + (beta * c if beta else 0.0)  # beta = 0: C is not read (cuBLAS)

    out[...] = np.nan
    peers["cublas_gemm_add"].run(np, Blas(), ins, {"out": out})
    np.testing.assert_allclose(out, SPEC.reference(np, ins))
    # beta=1 in place: prepare (untimed) puts R in the output; runs alternate alpha +1 / -1, so the
    # output is R + A @ W^T after an odd number of runs and R after an even one, never growing
    b1 = peers["cublas_gemm_beta1"]
    out[...] = np.nan
    b1.prepare(np, Blas(), ins, {"out": out})
    np.testing.assert_array_equal(out, ins["r"])
    for i in range(1, 6):
        b1.run(np, Blas(), ins, {"out": out})
        np.testing.assert_allclose(out, SPEC.reference(np, ins) if i % 2 else ins["r"], atol=1e-12)
    # rotating input sets (the backend's, for inputs smaller than the L2): the sign alternates per
    # set, so after two visits to each of two sets the output is R again
    ins2 = {k: v + 1.0 for k, v in ins.items()}
    b1.prepare(np, Blas(), ins, {"out": out})
    for st in (ins, ins2, ins, ins2):
        b1.run(np, Blas(), st, {"out": out})
    np.testing.assert_allclose(out, ins["r"], atol=1e-12)
    b1.prepare(np, Blas(), ins, {"out": out})  # the verification: prepare, then one run
    b1.run(np, Blas(), ins, {"out": out})
    np.testing.assert_allclose(out, SPEC.reference(np, ins))
    assert all(p.prepare is None for n, p in peers.items() if n != "cublas_gemm_beta1")
    peers["cublas_gemm"].run(np, Blas(), ins, {"out": out})
    np.testing.assert_allclose(out, ins["a"] @ ins["w"].T)


def test_sim_efficiency_is_plausible():
    def eff(**kw):
        return SPEC.sim_efficiency(task(**kw), H200)

    best = eff()
    assert 0 < best < 1
    assert eff(memory_pipelining=0) < eff(memory_pipelining=2) < best
    assert eff(block_size="64x64", memory_pipelining=4) < eff(block_size="128x256", memory_pipelining=4)
    assert eff(fusion=False) < best
    assert eff(dtype="fp32") > 0 and eff(dtype="tf32") > 0
    assert eff(block_size="12345") == 0.05


def test_hopper_sim_efficiency_counts_wave_quantisation():
    """The simulated Hopper path loses what a part-filled last round of tiles loses on the GPU:
    M = 1201 (one round of 128x256, 71 % full) and 2500 (128x160, a last round of halves) below the
    seed; the seed itself keeps the efficiency it was calibrated at."""
    from engine.task import TaskSpec
    from kernels.gemm_residual_auto import SPEC as AUTO
    from kernels.sm90.defaults import default_knobs

    def eff(m, knobs=None):
        shape = {"m": m, "n": 2560, "k": 2560}
        bs, st = knobs or default_knobs(H200, "bf16", shape)
        return AUTO.sim_efficiency(TaskSpec(shape=shape, dtype="bf16", block_size=bs, memory_pipelining=st), H200)

    seed = eff(8192)
    assert seed == pytest.approx(0.72)
    # 128x256 s4 (0.70 filled) in one round of 132 slots for 100 tiles (the default there is a swapped
    # 96x256 tile, 130 tiles in the round)
    wide = eff(1201, ("128x256", 4))
    assert wide == pytest.approx(0.70 * 1201 * 2560 / (32768 * 132) / AUTO.SIM_SEED_FILL, rel=1e-6)
    assert wide < eff(1201) and wide < eff(2500) < seed


def test_simulated_timings_carry_a_fixed_launch_cost():
    """The SIMULATED device adds a fixed cost per launch to the roofline time over the efficiency:
    a small GEMM (M = 256) lands far below the seed's % of SOL, as on the H200 (33 % against 74 %),
    and the unfused run (GEMM, then the add) pays the cost twice."""
    from engine.backends.sim import SIM_LAUNCH_MS
    from engine.runner import prepare, run_prepared
    from engine.task import TaskSpec

    def run(m, **kw):
        res = run_prepared(prepare(TaskSpec(backend="sim", shape={"m": m, "n": 2560, "k": 2560}, dtype="bf16",
                                            warmup=1, iterations=5, peers=False, **kw), "h200"))
        assert res.status.value == "ok" and res.simulated, res.error
        return res

    knobs = {"block_size": "64x80", "memory_pipelining": 8}  # the same build fused and not
    seed, small = run(8192), run(256, **knobs)
    assert small.sol.sol_pct < 0.6 * seed.sol.sol_pct
    assert small.timing.median_ms > small.sol.t_sol_ms + SIM_LAUNCH_MS
    unfused = run(256, fusion=False, **knobs)
    assert unfused.timing.median_ms > small.timing.median_ms + 0.5 * SIM_LAUNCH_MS


def test_raster_choice_on_a_swapped_tile_is_in_the_problems_frame():
    """``schedule.raster`` names the order of the problem's blocks on every tile: on a swapped tile
    (whose kernel runs the problem's N as its M) raster=n builds N-fastest, raster=m M-fastest, and
    the plan reads back the choice, so the tuner's schedule variations of a swapped tile run."""
    from engine.task import TaskSpec
    from kernels.gemm_residual_auto import SPEC as AUTO

    for bs, shape in (("104x256", (1337, 2560, 2560)), ("176x128", (3333, 2560, 2560))):
        for raster, order in (("m", "M-fastest"), ("n", "N-fastest"), ("group", "groups of 4 N blocks")):
            task = TaskSpec(shape=dict(zip("mnk", shape, strict=True)), dtype="bf16", block_size=bs,
                            memory_pipelining=4, schedule={"raster": raster})
            assert violations_of(AUTO, task, H200) == [], (bs, raster)
            assert plan_or_raise(AUTO, task, H200).schedule["raster"] == raster
            assert render_task(AUTO, task, H200).info["tile_order"] == order, (bs, raster)


def test_multicast_names_the_problems_operand_and_refuses_what_it_cannot_build():
    """``schedule.multicast`` = w | a names the operand of the problem a cluster's two CTAs share, on
    any tile (a swapped tile's kernel runs W as its A), implies cluster=2 and reads back; a value
    outside w | a, multicast with cluster=1, or W multicast on a decode tile is a violation that
    names the field, and the tuner offers a decode tile only multicast=none (pairs)."""
    from engine.task import TaskSpec
    from kernels.gemm_residual_auto import SPEC as AUTO

    def task(bs, shape, st, **sched):
        return TaskSpec(shape=dict(zip("mnk", shape, strict=True)), dtype="bf16", block_size=bs,
                        memory_pipelining=st, schedule=sched)

    for bs, shape, st in (("128x256", (4096, 4096, 4096), 4), ("112x256", (3072, 3584, 3584), 4)):
        for op in ("w", "a"):
            t = task(bs, shape, st, multicast=op)
            assert violations_of(AUTO, t, H200) == [], (bs, op)
            assert plan_or_raise(AUTO, t, H200).schedule["multicast"] == op
            assert plan_or_raise(AUTO, t, H200).schedule["cluster"] == 2
            assert render_task(AUTO, t, H200).info["cluster"].endswith(f"{op.upper()} multicast"), (bs, op)
    bad = (({"multicast": "x"}, "takes w, a, none"), ({"multicast": "a", "cluster": 1}, "cluster=2"))
    for sched, words in bad:
        (v,) = violations_of(AUTO, task("128x256", (4096, 4096, 4096), 4, **sched), H200)
        assert v.field == "schedule.multicast" and words in v.message, v
    (v,) = violations_of(AUTO, task("16x64", (16, 8192, 8192), 8, multicast="w"), H200)
    assert "decode tile" in v.message and "schedule" in v.field, v
    knobs = {k.name: k.values for k in AUTO.schedule_knobs(H200, "bf16", {"m": 16, "n": 8192, "k": 8192}, "16x64")}
    assert knobs["multicast"] == ("none",) and knobs["cluster"] == (1, 2)
    assert plan_or_raise(AUTO, task("16x64", (16, 8192, 8192), 8, multicast="none"), H200).schedule["multicast"] == "none"
