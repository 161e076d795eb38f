"""Each header of the decode kernel (kernels/skinny/*.cuh) compiles alone: a translation unit of a real
plan's #defines, the one header (found through an include path) and a probe kernel that calls its
functions with arguments of its own. The kernel file itself, compiled the same way from its files,
gives the cubin of the source the codegen renders (each part inlined once).

No GPU needed: NVRTC compiles on a CPU-only machine (skipped without CuPy's NVRTC)."""

from __future__ import annotations

import pytest

from kernels import gemm_residual_skinny as sk
from kernels.nvrtc_check import compile_cubin
from kernels.spec import KERNEL_DIR, DeviceLimits

pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

H200 = DeviceLimits(compute_capability=(9, 0), sm_count=132, shared_memory_per_block_bytes=232448,
                    shared_memory_per_sm_bytes=233472, profile="h200")
INCLUDE = f"--include-path={KERNEL_DIR}"

PLANS = {
    "ring-16B": ((8, 4096, 4096), {"w_bulk": 0, "a_smem": 0, "block_size": "8x32", "split_k": 1}),
    "ring-4B-split": ((8, 4098, 4098), {"w_bulk": 0, "a_smem": 0, "block_size": "8x32", "split_k": 2}),
    "ring-2B-unfused": ((8, 4097, 4097), {"w_bulk": 0, "a_smem": 0, "block_size": "8x16", "split_k": 3,
                                         "fuse": False}),
    "a-smem": ((32, 5120, 5120), {"w_bulk": 0, "a_smem": 1, "block_size": "32x64", "split_k": 2}),
    "bulk-rows": ((16, 8192, 8192), {"w_bulk": 1}),
    "tma-boxes": ((64, 4096, 14336), {"dtype": "fp16"}),
}
"""Plans whose #defines take every variant of the headers between them."""


def _build(plan: str):
    (m, n, k), knobs = PLANS[plan]
    knobs = dict(knobs)
    dtype = knobs.pop("dtype", "bf16")
    return sk.render(sk.plan(m, n, k, dtype, H200, **knobs), m, n, k, dtype)


def _defines(source: str) -> str:
    """A rendered source's leading #define lines: the plan's knobs (and VEC_DTYPE)."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("#define "):
            break
        lines.append(line + "\n")
    return "".join(lines)


PROBE_HEAD = ('extern "C" __global__ void probe(const unsigned short* a, const unsigned short* w, unsigned short* out, '
              "float* ws, int x, int y) {\n"
              "    __shared__ __align__(128) unsigned char smem[4096];\n"
              "    __shared__ __align__(8) unsigned long long bars[2 * STAGES];\n"
              "    __shared__ unsigned int flag;\n"
              "    float acc[RPW][NF][4] = {};\n"
              "    const unsigned short* wp[RPW][2] = {};\n"
              "    const unsigned short* ap[NF] = {};\n"
              "    float4 v4[SPLIT_RU4][SPLIT_K];\n"
              "    float v1[SPLIT_RU1][SPLIT_K];\n")
PROBES = {
    "config.cuh": "out[0] = NF + RG + WG + RPW + KW + BNP + THREADS + RED_FLOATS + KT + A_PIECES + SMEM_BYTES + STEPS;",
    "loads.cuh": """
        uint4 wv[RPW][2], av[NF];
        load_chunk(wv, av, wp, ap, x, y, x);
        load_w(wv, wp, x, y, x);
        ring_rows(wp, ap, a, w, x, y, x, y, x, y, x, y);
        out[0] = f2h(h2f(a[0]) + (float)(wv[0][0].x + av[0].y) + (float)load8<false>(a, x, y).z);""",
    "mma.cuh": """
        uint4 wv[RPW][2] = {}, av[NF] = {};
        mma_chunk(acc, wv, av);
        mma_chunk_smem(acc, wv, (const unsigned short*)smem, x, y, x);
        out[0] = (unsigned short)acc[0][0][0];""",
    "a_tile.cuh": """
        copy_a_tile((unsigned short*)smem, a, x, y, x, y, x);
        cp_async_commit();
        cp_async_wait_all();""",
    "bulk.cuh": """
        grid_dependency_wait();
        const unsigned ring = shared_addr(smem), full0 = shared_addr(bars);
        bulk_produce_boxes(ring, full0, full0 + 8 * STAGES, (const TmaDesc*)w, (const TmaDesc*)a, x, y, x, y, x, y);
        bulk_produce_rows(ring, full0, full0 + 8 * STAGES, w, a, x, y, x, y, x, y, x, y);
        bulk_consume(acc, ring, full0, full0 + 8 * STAGES, x, y, x, y, x, y);
        out[0] = (unsigned short)acc[0][0][0];""",
    "mainloop.cuh": """
        mainloop_a_smem(acc, (unsigned short*)smem, a, wp, x, y, x, y, x, y, x, y);
        mainloop_bulk(acc, smem, bars, w, a, (const TmaDesc*)w, (const TmaDesc*)a, x, y, x, y, x, y, x, y, x);
        out[0] = (unsigned short)acc[0][0][0];""",
    "epilogue.cuh": """
        stash_partials((float*)smem, acc, x, y, x, y, x);
        sum_partials(out, a, ws, (const float*)smem, x, y, x, y, x, y);
        split_sum_vec4(v4, out, a, ws, x, y, x, y, x, y);
        split_sum_scalar(v1, out, a, ws, x, y, x, y, x, y);
        out[0] += skinny_counters[x] + (unsigned short)flag;""",
}
"""A probe kernel's body per header: a call of each of its functions."""

HEADERS = sorted(p.name for p in (KERNEL_DIR / "skinny").glob("*.cuh"))


def test_every_header_has_a_probe() -> None:
    assert set(HEADERS) <= set(PROBES), "a new header needs a probe"


@pytest.mark.parametrize("plan", list(PLANS))
@pytest.mark.parametrize("header", HEADERS)
def test_a_header_compiles_alone(header: str, plan: str) -> None:
    build = _build(plan)
    source = _defines(build.source) + f'#include "skinny/{header}"\n' + PROBE_HEAD + PROBES[header] + "\n}\n"
    report = compile_cubin(source, "sm_90a", (*build.options, INCLUDE), name=f"{header}.cu", verbose=False)
    assert report.ok, report.log


@pytest.mark.parametrize("plan", list(PLANS))
def test_the_kernel_compiled_from_its_files_is_the_rendered_cubin(plan: str) -> None:
    build = _build(plan)
    files = _defines(build.source) + '#include "vec16.cuh"\n' + f'#include "{sk.SOURCE_FILE}"\n'
    rendered = compile_cubin(build.source, "sm_90a", build.options, verbose=False)
    alone = compile_cubin(files, "sm_90a", (*build.options, INCLUDE), verbose=False)
    assert rendered.ok and alone.ok, rendered.log + alone.log
    assert rendered.cubin == alone.cubin
