"""Each header of the Hopper kernel (kernels/sm90/*.cuh) compiles alone: a translation unit of a real
plan's #defines, the one header (found through an include path, as a toolkit build would find it)
and a probe kernel that calls its functions with arguments of its own, no other code. The kernel
file itself, compiled the same way from its files, gives the cubin of the source the codegen renders
(each part inlined once), for every schedule's body.

No GPU needed: NVRTC compiles on a CPU-only machine (skipped without CuPy's NVRTC)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernels.nvrtc_check import compile_cubin
from kernels.sm90 import codegen, wgmma_table
from kernels.spec import KERNEL_DIR, DeviceLimits

pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

H200 = DeviceLimits(compute_capability=(9, 0), sm_count=132, shared_memory_per_block_bytes=232448,
                    shared_memory_per_sm_bytes=233472, profile="h200")
INCLUDE = f"--include-path={KERNEL_DIR}"
GENERATED = {"wgmma_table.cuh": wgmma_table.table()}
"""The generated part as NVRTC's in-memory header (sm90/wgmma.cuh includes it by this name)."""


def _task(m: int, n: int, k: int, dtype: str = "bf16") -> SimpleNamespace:
    return SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=dtype)


PLANS = {
    "cooperative-streamk": (_task(8192, 2560, 2560), "128x128", 4, {"pingpong": False, "cluster": 1, "streamk": True}),
    "cooperative-unfused": (_task(8192, 2560, 2560), "128x160", 4,
                            {"pingpong": False, "cluster": 1, "streamk": False, "fuse": False, "raster_group": 4}),
    "pingpong-half-tail": (_task(1337, 2560, 2560), "128x128", 4, {"pingpong": True, "half_tail": True}),
    "pingpong-shared-buffer": (_task(8192, 2560, 2560), "128x128", 5, {"pingpong": True, "cluster": 1}),
    "fp32-promote": (_task(4096, 2560, 2560, "fp32"), "128x128", 3, {"promote": 4}),
    "decode": (_task(16, 8192, 8192), "8x64", 8, {}),
    "cluster-ring": (_task(4096, 4096, 4096), "128x256", 4, {"cluster": 2, "epi_ring": True}),
    "cluster-n": (_task(4096, 4096, 4096), "128x256", 4, {"cluster": (1, 2)}),
    "split-n": (_task(8192, 2560, 2560), "128x320", 3, {}),
}
"""Plans whose #defines take every variant of the headers between them."""


def _build(plan: str):
    task, tile, stages, choices = PLANS[plan]
    return codegen.build(task, H200, tile, stages, **choices)


def _options(build) -> tuple[str, ...]:
    """The build's NVRTC options but the architecture (``compile_cubin`` names it)."""
    return tuple(o for o in build.options if not o.startswith("--gpu-architecture"))


def _defines(source: str) -> str:
    """A rendered source's leading #define lines: the plan's knobs (and VEC_DTYPE)."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("#define "):
            break
        lines.append(line + "\n")
    return "".join(lines)


PROBE_HEAD = ('extern "C" __global__ void probe(float* out, const unsigned long long* maps, int x, int y, '
              "unsigned a) {\n")
PROBES = {
    "config.cuh": "out[0] = THREADS + STAGE_BYTES + WG_M + WG_N + ACC_N + TILE_THREADS + EPI_BUFS;",
    "ptx.cuh": """
        out[0] = mbar_test(a, x) ? 1.0f : 0.0f;
        tma_load_2d(a, maps[0], x, y, a + 8);
        tma_load_2d_hint(a, maps[0], x, y, a + 8, l2_evict_first());
        tma_load_2d_mc(a, maps[0], x, y, a + 8, 3);
        mbar_arrive_cluster(a, cluster_rank());
        release_slot(a, x);
        release_slot_all(a);
        cluster_sync();""",
    "wgmma.cuh": """
        float acc[ACC_N] = {};
        wgmma_fence();
        WGMMA(acc, desc64(desc_lo(a)), desc64(desc_lo(a + 1024)), x);
        wgmma_commit();
        wgmma_wait<0>();
        fence_reg(acc[0]);
        out[0] = acc[0];""",
    "epilogue.cuh": """
        unsigned r0, r1, r2, r3;
        ldsm_x4_trans(a, r0, r1, r2, r3);
        stsm_x4_trans(a, r0, r1, r2, r3);
        ldsm_x2_trans(a, r0, r1);
        stsm_x2_trans(a, r0, r1);
        stage_residual(a, a + 8, maps[0], maps[1], x, y);
        st_shared_u32(epi_addr(a, a + 16, x, y, x), ld_shared_u32(a));
        st_shared_f2(a, ld_shared_f2(a).x, 1.0f);
        tma_store_2d(maps[2], x, y, a);
        release_epi_slots(a, epi_ring_first(x));""",
    "scheduler.cuh": """
        Sched s;
        const int dp = clamp_dp_tiles(x, y);
        sched_init(s, dp, y, x);
        int tile, kb0, kb1, m0 = 0, n0 = 0;
        while (sched_next(s, dp, x, tile, kb0, kb1)) unit_origin(s, tile, x, y, a, x, y, m0, n0);
        red_add_v4(streamk_workspace() + m0, 1.0f, 2.0f, 3.0f, 4.0f);
        out[0] = ld_cg_v4(streamk_workspace()).x + atom_add_acq_rel(streamk_counters(), n0);""",
    "params.cuh": """
        const Sm90Shared s = shared_layout(a);
        out[0] = s.flag_addr;""",
    "mainloop.cuh": """
        float acc[M_ITERS][ACC_N], sum[M_ITERS][ACC_N];
        RingPos pos = {x, a, y, x != 0};
        pos = consumer_mainloop<M_ITERS>(acc, pos, y, 0, 0, x, a, a + 64, desc_lo(a), 0, 0, a + 128, x, pos.store_pending);
        pos = consumer_tile<M_ITERS>(acc, sum, pos, y, 0, x, a, a + 64, desc_lo(a), 0, 0, a + 128, x, true);
        consumer_kblocks<1>(acc, pos.stage, pos.phase, pos.prev_stage, pos.store_pending, y, 0, 0, x, a, a + 64,
                            desc_lo(a), 0, 0, a + 128, x, false);
        consumer_drain(acc, sum, a + 64, pos.prev_stage, x);
        out[0] = acc[0][0] + sum[0][0];""",
    "streamk_fixup.cuh": """
        float acc[M_ITERS][ACC_N] = {};
        out[0] = streamk_fixup(acc, (float4*)out, (unsigned*)maps, x, 0, 0, y, x, x, 1, a) ? acc[0][0] : 0.0f;""",
    "epilogue_write.cuh": """
        float acc[M_ITERS][ACC_N] = {};
        epilogue_write(acc, a, 0, x, y, x, 1);""",
    "epilogue_store.cuh": "epilogue_store(maps[0], maps[1], x, y, x, y, a);",
    "producer.cuh": """
        Sched s;
        sched_init(s, x, y, x);
        producer_thread(shared_layout(a), Sm90Maps{maps[0], maps[1], maps[2], maps[3], maps[4], maps[5]},
                        Sm90Problem{x, y, x, x, y, x, x, x, x, a}, s);""",
    "consumer_warpgroups": """
        Sched s;
        sched_init(s, x, y, x);
        consumer_warpgroups(shared_layout(a), Sm90Maps{maps[0], maps[1], maps[2], maps[3], maps[4], maps[5]},
                            Sm90Problem{x, y, x, x, y, x, x, x, x, a}, s, 1, x, y);""",
}
"""A probe kernel's body per header: a call of each of its functions."""

HEADERS = sorted(p.name for p in (KERNEL_DIR / "sm90").glob("*.cuh"))
SCHEDULE_OF = {"consumer_cooperative.cuh": False, "consumer_pingpong.cuh": True}
"""The consumer headers compile under their own schedule's plans."""


def _cases() -> list[tuple[str, str]]:
    out = []
    for header in HEADERS:
        for plan in PLANS:
            pingpong = "pingpong" in plan
            if header in SCHEDULE_OF and SCHEDULE_OF[header] != pingpong:
                continue
            out.append((header, plan))
    return out


def test_every_header_has_a_probe() -> None:
    assert set(HEADERS) - set(SCHEDULE_OF) - {"side_kernels.cuh"} <= set(PROBES), "a new header needs a probe"


@pytest.mark.parametrize(("header", "plan"), _cases())
def test_a_header_compiles_alone(header: str, plan: str) -> None:
    probe = PROBES.get("consumer_warpgroups" if header in SCHEDULE_OF else header)
    source = _defines(_build(plan).source) + f'#include "sm90/{header}"\n'
    if probe is not None:
        source += PROBE_HEAD + probe + "\n}\n"
    report = compile_cubin(source, "sm_90a", (*_options(_build(plan)), INCLUDE), name=f"{header}.cu", verbose=False,
                           headers=GENERATED)
    assert report.ok, report.log


@pytest.mark.parametrize("plan", list(PLANS))
def test_the_kernel_compiled_from_its_files_is_the_rendered_cubin(plan: str) -> None:
    """The rendered source (each part inlined once, kernels/include_once.py) and the kernel file with
    an include path: the same cubin."""
    build = _build(plan)
    consumers = codegen.CONSUMERS["#define PINGPONG 1\n" in build.source]
    files = (_defines(build.source) + f'#define CONSUMER_BODY "{consumers}"\n#include "vec16.cuh"\n'
             + "".join(f'#include "{name}"\n' for name in (*codegen.HEADERS, codegen.SOURCE_FILE, *codegen.TRAILERS)))
    rendered = compile_cubin(build.source, "sm_90a", _options(build), verbose=False)
    alone = compile_cubin(files, "sm_90a", (*_options(build), INCLUDE), verbose=False, headers=GENERATED)
    assert rendered.ok and alone.ok, rendered.log + alone.log
    assert rendered.cubin == alone.cubin
