"""The skinny (decode) GEMM + residual path: its variants compile for sm_90a through NVRTC without
spills, its defaults and refusals follow the hardware, and its K permutation is exact.

No GPU needed: NVRTC compiles to a cubin on a CPU-only machine (skipped without CuPy's NVRTC). The
fragment test emulates mma.sync m16n8k16 per the PTX ISA layouts in numpy, reading the register
arguments from the kernel source itself, so a wrong mapping there fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels import gemm_residual_skinny as sk
from kernels.spec import DeviceLimits

ROOT = Path(__file__).resolve().parents[2]
H200 = DeviceLimits(compute_capability=(9, 0), sm_count=132, shared_memory_per_block_bytes=232448,
                    shared_memory_per_sm_bytes=233472, profile="h200")
A100 = DeviceLimits(compute_capability=(8, 0), sm_count=108, shared_memory_per_block_bytes=166912,
                    shared_memory_per_sm_bytes=167936, profile="a100")
K_OF = {"16B": 4096, "4B": 4098, "2B": 4097}
"""K per load width: multiple of 8 (ALIGNED8), even (ALIGNED2), odd."""


# --- compiling ----------------------------------------------------------------------------------
def _compile_case(tile: str, stages: int, warps: int, split_k: int, dtype: str, loads: str,
                  fuse: bool = True, arch: str = "sm_90a"):
    from kernels.nvrtc_check import compile_cubin

    k = K_OF[loads]
    violations = sk.check(8, 4096, k, dtype, H200, tile, stages, warps, split_k)
    if violations:
        return None
    p = sk.plan(8, 4096, k, dtype, H200, block_size=tile, stages=stages, warps=warps, split_k=split_k, fuse=fuse)
    build = sk.render(p, 8, 4096, k, dtype)
    report = compile_cubin(build.source, arch, build.options)
    assert report.ok, report.log
    for name in build.functions:
        f = report.functions[name]
        assert (f.stack_frame_bytes, f.spill_store_bytes, f.spill_load_bytes) == (0, 0, 0), report.log
    return report


def _covering() -> list[tuple[str, int, int, int, str, str, bool]]:
    """Every tile, stage count, warp count, split-K in {1, 4}, dtype, load width and fusion appears;
    the deepest accepted stage count of each tile (the register rule's edge) is included."""
    cases: list[tuple[str, int, int, int, str, str, bool]] = []
    loads = ("16B", "4B", "2B")
    for i, tile in enumerate(sk.TILES):
        bm, bn = sk.parse_block_size(tile)
        warps = sk.WARPS_OPTIONS[i % 2]
        k = K_OF[loads[i % 3]]
        fits = [s for s in sk.STAGE_OPTIONS if not sk.check(8, 4096, k, "bf16", H200, tile, s, warps, 1)]
        stage = max(fits) if i % 2 else sk.STAGE_OPTIONS[i // 2 % len(sk.STAGE_OPTIONS)]
        cases.append((tile, stage if stage in fits else min(fits), warps, (1, 4)[i // 2 % 2],
                      sk.DTYPES[i // 4 % 2], loads[i % 3], i % 5 != 2))
    return cases


COVER = _covering()


@pytest.mark.parametrize("tile,stages,warps,split_k,dtype,loads,fuse", COVER,
                         ids=[f"{t}-s{s}-w{w}-k{sp}-{d}-{ld}-{'fused' if f else 'unfused'}"
                              for t, s, w, sp, d, ld, f in COVER])
def test_covering_set_compiles_without_spills(tile, stages, warps, split_k, dtype, loads, fuse):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    assert _compile_case(tile, stages, warps, split_k, dtype, loads, fuse) is not None


def test_covering_set_covers_every_knob_value():
    assert {c[0] for c in COVER} == set(sk.TILES)
    assert {c[1] for c in COVER} == set(sk.STAGE_OPTIONS)
    assert {c[2] for c in COVER} == set(sk.WARPS_OPTIONS)
    assert {c[3] for c in COVER} == {1, 4}
    assert {c[4] for c in COVER} == set(sk.DTYPES)
    assert {c[5] for c in COVER} == set(K_OF)
    assert {c[6] for c in COVER} == {True, False}


@pytest.mark.parametrize("m", [1, 8, 16, 64])
def test_default_plans_compile_for_sm_80_and_sm_90a(m):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from kernels.nvrtc_check import compile_cubin

    for arch, limits in (("sm_90a", H200), ("sm_80", A100)):
        p = sk.plan(m, 4096, 4096, "bf16", limits)
        report = compile_cubin(sk.render(p, m, 4096, 4096, "bf16").source, arch, ("--std=c++17",))
        assert report.ok and not report.spills, report.log


EXHAUSTIVE = [(t, s, w, sp, d, ld) for t in sk.TILES for s in sk.STAGE_OPTIONS for w in sk.WARPS_OPTIONS
              for sp in (1, 4) for d, ld in (("bf16", "16B"), ("fp16", "16B"), ("bf16", "4B"), ("fp16", "2B"))]
"""Every knob combination for 16-byte loads in both dtypes, 4- and 2-byte loads in one each (the
dtype changes only the MMA's type and the conversions; the covering set has the other pairs)."""


@pytest.mark.slow
@pytest.mark.parametrize("tile,stages,warps,split_k,dtype,loads", EXHAUSTIVE,
                         ids=[f"{t}-s{s}-w{w}-k{sp}-{d}-{ld}" for t, s, w, sp, d, ld in EXHAUSTIVE])
def test_every_accepted_variant_compiles_without_spills(tile, stages, warps, split_k, dtype, loads):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    if _compile_case(tile, stages, warps, split_k, dtype, loads, fuse=split_k == 1) is None:
        pytest.skip("refused by check()")


# --- plan and check -----------------------------------------------------------------------------
def test_default_plan_m1_fills_the_gpu_with_split_k():
    p = sk.plan(1, 4096, 4096, "bf16", H200)
    ctas = p.grid[0] * p.grid[1] * p.grid[2]
    assert p.bm == 8 and p.stages == 4 and p.warps == 4
    assert p.grid == (-(-4096 // p.bn), p.split_k, 1)
    assert sk.CTAS_PER_SM * 132 <= ctas <= 4 * 132
    assert p.split_k > 1 and p.aligned8
    # each warp still streams a few KB of W
    assert 4096 * 4096 * 2 / (ctas * p.warps) >= 4096


def test_default_plan_n2560_and_larger_m():
    p = sk.plan(1, 2560, 2560, "fp16", H200)
    ctas = p.grid[0] * p.grid[1] * p.grid[2]
    assert sk.CTAS_PER_SM * 132 <= ctas <= 4 * 132
    p64 = sk.plan(64, 4096, 4096, "bf16", H200)
    assert p64.bm == 64 and p64.grid[2] == 1
    assert not sk.check(64, 4096, 4096, "bf16", H200, p64.block_size, p64.stages, p64.warps, p64.split_k)
    # split-K partials stay a small fraction of W's traffic at M = 64
    assert p64.split_k * 64 * 4096 * 8 <= sk.SPLIT_TRAFFIC * 4096 * 4096 * 2
    assert sk.plan(16, 4096, 4096, "bf16", H200).bm == 16
    assert sk.plan(33, 4096, 4096, "bf16", H200).bm == 64


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 17, 777), (64, 8192, 8192), (5, 4096, 14336), (1, 100000, 3)])
def test_default_plans_are_accepted(m, n, k):
    for dtype in sk.DTYPES:
        p = sk.plan(m, n, k, dtype, H200)
        assert not sk.check(m, n, k, dtype, H200, p.block_size, p.stages, p.warps, p.split_k)
        assert p.aligned8 == (k % 8 == 0) and p.aligned2 == (k % 2 == 0)


def test_m65_refused_naming_shape_m():
    v = sk.check(65, 4096, 4096, "bf16", H200, "64x64", 2, 4, 1)
    assert [x.field for x in v] == ["shape.m"] and "M <= 64" in v[0].message
    with pytest.raises(ValueError, match="shape.m"):
        sk.plan(65, 4096, 4096, "bf16", H200)


def test_bad_knobs_refused_by_name():
    assert [x.field for x in sk.check(1, 64, 64, "bf16", H200, "8x64", 3, 4, 1)] == ["memory_pipelining"]
    assert [x.field for x in sk.check(1, 64, 64, "bf16", H200, "8x64", 4, 6, 1)] == ["schedule.warps"]
    assert [x.field for x in sk.check(1, 64, 64, "bf16", H200, "8x64", 4, 4, 5)] == ["schedule.split_k"]
    assert [x.field for x in sk.check(1, 64, 64, "bf16", H200, "8x48", 4, 4, 1)] == ["block_size"]
    assert [x.field for x in sk.check(1, 64, 64, "fp32", H200, "8x64", 4, 4, 1)] == ["dtype"]
    deep = sk.check(64, 64, 64, "bf16", H200, "64x128", 8, 4, 1)
    assert [x.field for x in deep] == ["memory_pipelining"] and "fits: 2" in deep[0].message
    for kwargs, knob in (({"stages": 3}, "memory_pipelining"), ({"warps": 2}, "schedule.warps"),
                         ({"split_k": 5}, "schedule.split_k"), ({"block_size": "8x8"}, "block_size")):
        with pytest.raises(ValueError, match=knob):
            sk.plan(1, 64, 64, "bf16", H200, **kwargs)


def test_counter_limit_and_render_buffers():
    tiles_n = (sk.COUNTERS + 1) * 16
    assert "block_size" in [x.field for x in sk.check(1, tiles_n, 64, "bf16", H200, "8x16", 2, 4, 2)]
    assert not sk.check(1, tiles_n, 64, "bf16", H200, "8x16", 2, 4, 1)  # no counters without split-K
    p = sk.plan(3, 100, 64, "fp16", H200, block_size="8x32", stages=2, warps=4, split_k=4, fuse=False)
    b = sk.render(p, 3, 100, 64, "fp16")
    assert b.functions == (sk.KERNEL, sk.ADD_KERNEL)
    assert b.launches[0].grid == (4, 4, 1) and b.launches[0].args == ("a", "w", "r", "out", "ws", 3, 100, 64)
    assert b.launches[1].args == ("out", "r", 3, 100)
    assert b.scratch[0].name == "ws" and b.scratch[0].shape == (4, 3, 100) and b.scratch[0].dtype == "fp32"
    assert "#define SPLIT_K 4\n" in b.source and "#define FUSE 0\n" in b.source and "#define DT 1\n" in b.source
    assert b.info["path"] == "mma.sync split-K (decode)"
    one = sk.render(sk.plan(1, 64, 64, "bf16", H200, split_k=1), 1, 64, 64, "bf16")
    assert one.scratch[0].shape == (1,) and len(one.launches) == 1


def test_cost_prefers_a_filled_grid():
    under = sk.plan(1, 4096, 4096, "bf16", H200, block_size="8x128", split_k=1)
    full = sk.plan(1, 4096, 4096, "bf16", H200)
    assert sk.cost_us(full, 1, 4096, 4096, "bf16", 4.0e12, 132) < sk.cost_us(under, 1, 4096, 4096, "bf16", 4.0e12, 132)
    assert sk.cost_us(full, 1, 4096, 4096, "bf16", 4.0e12, 132) > 4096 * 4096 * 2 / 4.0e12 * 1e6


# --- the K permutation --------------------------------------------------------------------------
_MMA_RE = re.compile(r"mma16816\(acc\[rr\]\[f\], " + ", ".join([r"(w[01])\.([xyzw])"] * 4)
                     + r", av\.([xyzw]), av\.([xyzw])\);")
_PAIR = {"x": 0, "y": 2, "z": 4, "w": 6}
"""A 32-bit register component holds the loaded elements (e[i], e[i + 1]) at this i."""


def _kernel_steps() -> list[tuple[str, ...]]:
    """The register arguments of mma_chunk's two mma16816 calls, from the kernel source."""
    text = (ROOT / "kernels" / sk.SOURCE_FILE).read_text(encoding="utf-8")
    steps = _MMA_RE.findall(text)
    assert len(steps) == 2, steps
    return steps


def _emulate_chunk(w: np.ndarray, a: np.ndarray, steps) -> np.ndarray:
    """out^T (16 x 8) of one chunk as the warp computes it: each lane (g, c) loads e0..e7 at k = 8c
    of W rows g, g + 8 and token g; each step builds the m16n8k16 operands from the named register
    components per the PTX layouts, multiplies, and the accumulators are read back per lane."""
    d = np.zeros((16, 8))
    for step in steps:
        wa = np.zeros((16, 16))
        bb = np.zeros((16, 8))
        for lane in range(32):
            g, c = divmod(lane, 4)
            vec = {"w0": w[g, 8 * c:8 * c + 8], "w1": w[g + 8, 8 * c:8 * c + 8], "av": a[g, 8 * c:8 * c + 8]}

            def reg(name: str, comp: str, vec=vec) -> np.ndarray:
                return vec[name][_PAIR[comp]:_PAIR[comp] + 2]
            # A (row-major 16x16): a0a1 row g k 2c..; a2a3 row g+8; a4a5 row g k 2c+8..; a6a7 row g+8
            wa[g, 2 * c:2 * c + 2] = reg(step[0], step[1])
            wa[g + 8, 2 * c:2 * c + 2] = reg(step[2], step[3])
            wa[g, 2 * c + 8:2 * c + 10] = reg(step[4], step[5])
            wa[g + 8, 2 * c + 8:2 * c + 10] = reg(step[6], step[7])
            # B (col-major 16x8): b0b1 k 2c.. col g; b2b3 k 2c+8.. col g
            bb[2 * c:2 * c + 2, g] = reg("av", step[8])
            bb[2 * c + 8:2 * c + 10, g] = reg("av", step[9])
        d += wa @ bb
    # C/D per lane: c0c1 row g cols 2c, 2c+1; c2c3 row g+8 (the kernel's epilogue reads them so)
    out_t = np.full((16, 8), np.nan)
    for lane in range(32):
        g, c = divmod(lane, 4)
        out_t[g, 2 * c:2 * c + 2] = d[g, 2 * c:2 * c + 2]
        out_t[g + 8, 2 * c:2 * c + 2] = d[g + 8, 2 * c:2 * c + 2]
    return out_t


def test_k_permutation_gives_the_plain_dot_product():
    rng = np.random.default_rng(7)
    w = rng.integers(-8, 9, size=(16, 32)).astype(np.float64)
    a = rng.integers(-8, 9, size=(8, 32)).astype(np.float64)
    steps = _kernel_steps()
    np.testing.assert_array_equal(_emulate_chunk(w, a, steps), w @ a.T)


@pytest.mark.parametrize("broken", ["swap_b", "swap_rows", "same_step"])
def test_k_permutation_check_catches_wrong_mappings(broken):
    rng = np.random.default_rng(11)
    w = rng.integers(-8, 9, size=(16, 32)).astype(np.float64)
    a = rng.integers(-8, 9, size=(8, 32)).astype(np.float64)
    s0, s1 = (list(s) for s in _kernel_steps())
    if broken == "swap_b":  # B's k halves exchanged: W and A no longer share the permutation
        s0[8], s0[9] = s0[9], s0[8]
    elif broken == "swap_rows":  # rows g and g + 8 exchanged in a0a1 / a2a3
        s0[0], s0[2] = s0[2], s0[0]
    else:  # step 1 repeats step 0's elements (e4..e7 never used)
        s1 = list(s0)
    assert not np.array_equal(_emulate_chunk(w, a, [s0, s1]), w @ a.T)


# --- the GPU probe's argument checks ------------------------------------------------------------
@pytest.mark.parametrize("argv,needle", [(["--shapes", "65x4096x4096"], "--shapes"),
                                         (["--shapes", "1x4096"], "--shapes"),
                                         (["--shapes", "1x0x8"], "--shapes"),
                                         (["--dtypes", "fp32"], "--dtypes"),
                                         (["--iters", "0"], "--iters")])
def test_probe_refuses_malformed_arguments(argv, needle):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "skinny_probe.py"), *argv],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
