"""The fp32 FFMA kernel's experiment knobs (GR_TN, BK 32, GR_KUNROLL, GF_ORDER, GF_COPY) compile without spills.

The spec offers 8x8-per-thread BK-16 tiles only (the fastest measured on the H200, ADR-0008);
the kernel source also takes 8x16 per thread, BK 32 and short unrolled k bodies, which
bench/fp32_variants.py times on a GPU. This keeps those paths compiling (NVRTC, sm_90a, no GPU) and
within the register budget their launch bounds promise, and checks that the spec's default render
is the 8x8 kernel (no GR_TN define: the source's default).
"""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC is not importable")

from kernels.gemm_residual import SPEC  # noqa: E402
from kernels.nvrtc_check import compile_cubin  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _variants_module():
    spec = importlib.util.spec_from_file_location("fp32_variants", ROOT / "bench" / "fp32_variants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_default_render_is_the_8x8_kernel():
    src = SPEC.source("fp32", (128, 128, 16), 4, True)
    head = src[:src.index("// out[M,N]")]
    assert "GR_TN" not in head and "GR_KUNROLL" not in head
    assert "#ifndef GR_TN\n#define GR_TN 8" in src
    # FFMA order 3 (j outer, i snaking): 2.270 ms against 2.403 for order 0 on the H200
    assert "#ifndef GF_ORDER\n#define GF_ORDER 3" in src
    # copy address math: the per-tile rebuild (GF_COPY 1 measured no faster)
    assert "#ifndef GF_COPY\n#define GF_COPY 0" in src
    assert SPEC.threads("fp32", (128, 128, 16)) == 256


@pytest.mark.slow
def test_experiment_variants_compile_without_spills():
    pytest.importorskip("cupy")
    fv = _variants_module()
    names = ["t8_128x128x16_s4_o0", "t8_128x128x16_s4_o1", "t8_128x128x16_s4_o2", "t16_128x128x32_s3_u4", "t16_128x128x16_s4_u8", "t8_128x128x32_s3_u4", "t8_256x128x16_s4",
             "t16_256x128x32_s3_u4", "t8_128x128x16_s4_c1_o3", "t8_128x128x16_s4_c1_o5", "t8_128x128x16_s4_c1_o9"]
    cfgs = [fv.VARIANTS[n] for n in names]

    def one(cfg):
        return compile_cubin(fv.source(*cfg), "sm_90a", ("-std=c++17",))

    with ThreadPoolExecutor(2) as pool:
        reps = list(pool.map(one, cfgs))
    for name, cfg, rep in zip(names, cfgs, reps, strict=True):
        assert rep.ok, f"{name}: {rep.log[-1500:]}"
        f = rep.functions["gemm_residual_fp32"]
        assert f.spill_store_bytes == 0 and f.spill_load_bytes == 0 and f.stack_frame_bytes == 0, name
        threads = fv.threads(cfg[0], cfg[1], cfg[4])
        # 8x8: two 256-thread blocks per SM (<= 128 registers); 8x16: <= 255 (launch bounds)
        assert f.registers <= (128 if cfg[4].get("GR_TN", 8) == 8 else 255), (name, f.registers)
        assert fv.smem(*cfg[:4]) <= SPEC.smem_bytes("fp32", cfg[:3], cfg[3]), name
        assert threads <= 1024
