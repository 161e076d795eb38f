"""A plan written out: the CUDA source (#defines, the shared conversions, the kernel template),
the launches with their tensor maps, and the scratch buffers (``render``); no decision is taken here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernels.include_once import inline_once
from kernels.sm90 import wgmma_table
from kernels.sm90.constants import DECODE_DEFINES, DECODE_L2_PROMOTION, defines
from kernels.sm90.planner import Sm90Plan, defines_of, plan
from kernels.sm90.smem import smem_bytes
from kernels.sm90.tiles import ITEMSIZE, bk_of, cluster_label, parse_block_size, stage_count
from kernels.spec import (
    KERNEL_DIR,
    Buffer,
    Build,
    DeviceLimits,
    Launch,
    TensorMapArg,
    vec16_source,
)

SOURCE_FILE = "gemm_residual_sm90.cu"
"""The GEMM kernel (under kernels/), between ``HEADERS`` and ``TRAILERS`` in every rendered source."""
CONSUMERS = {False: "sm90/consumer_cooperative.cuh", True: "sm90/consumer_pingpong.cuh"}
"""The consumer warpgroups of each schedule (the plan's ``pingpong``), each header defining
``consumer_warpgroups``: the kernel's ``#include CONSUMER_BODY`` renders as the plan's one."""
HEADERS = ("sm90/config.cuh", "sm90/ptx.cuh", "sm90/wgmma.cuh", "sm90/epilogue.cuh", "sm90/scheduler.cuh")
"""The kernel's first parts, in order (it includes them too): the checked configuration, the
pipeline's PTX, the wgmma wrappers, the epilogue buffer, the tile scheduler."""
TRAILERS = ("sm90/side_kernels.cuh",)
"""After it: the residual add (fusion off) and the 3xTF32 operand split."""
KERNEL = "gemm_residual_sm90"
ADD_KERNEL = "residual_add_inplace"
ADD_KERNEL_F32 = "residual_add_inplace_f32"
SPLIT_KERNEL = "tf32_split"
PAD_KERNEL = "pad_rows16"
PAD_SOURCE = "pad_rows16.cuh"
SOURCE_FILES = (SOURCE_FILE, PAD_SOURCE, "mbarrier.cuh", "vec16.cuh", "include_once.py",
                *sorted(p.relative_to(KERNEL_DIR).as_posix() for p in (KERNEL_DIR / "sm90").iterdir()
                        if p.suffix in (".py", ".cuh")))
"""The files under kernels/ whose text decides what this path builds: its planner and templates (for a
spec's ``source_files``, which key its tuned entries)."""


def render_source(block_size: str, stages: int, dtype: str, fuse: bool = True,
           streamk: bool = True,
           pingpong: bool = False, cluster: Any = 1,
           split_hi: bool = False, promote: int | None = None) -> str:
    """The CUDA source for one configuration: #defines of integers, then the template."""
    return _source(defines(block_size, stages, dtype, fuse, streamk=streamk, pingpong=pingpong,
                           cluster=cluster, split_hi=split_hi, promote=promote))


def _source(consts: dict[str, int]) -> str:
    """``defines``' constants as #defines of integers, the shared 16-bit conversions
    (``vec16.cuh``, VEC_DTYPE 0 bf16, 1 fp16, 2 fp32 data), then the kernel template: ``HEADERS``,
    ``SOURCE_FILE`` and ``TRAILERS`` concatenated, each file they include inlined once
    (``inline_once``: ``#include CONSUMER_BODY`` as the plan's schedule's consumers, ``CONSUMERS``;
    the ``GENERATED`` parts by their generators)."""
    head = "".join(f"#define {k} {int(v)}\n" for k, v in consts.items())
    body = CONSUMERS[bool(consts["PINGPONG"])]
    return (head + vec16_source(min(int(consts["DT"]), 2))
            + inline_once((*HEADERS, SOURCE_FILE, *TRAILERS), {"CONSUMER_BODY": body}, GENERATED, seen=("vec16.cuh",)))


GENERATED = {"sm90/wgmma_table.cuh": wgmma_table.table}
"""Parts the kernel includes that Python writes (no such file under kernels/)."""


HALF_TAIL_OPTIONS = ("--device-as-default-execution-space",)
"""NVRTC options a ``HALF_TAIL`` build adds: its k-block loop is a generic lambda (instantiated for
one m64 slice and for all), which NVRTC 13.0 takes for host code without this (CuPy's RawModule
passes it to every compile; NVRTC 13.5 accepts the lambda either way)."""


def options(limits: DeviceLimits | None = None) -> tuple[str, ...]:
    """NVRTC options: sm_90a (wgmma and setmaxnreg need the arch-specific target)."""
    return ("--gpu-architecture=sm_90a", "--std=c++17")


def build(task: Any, limits: DeviceLimits, block_size: str, stages: int, **choices: Any) -> Build:
    """``render(plan(...))``: for callers that hold knobs rather than a plan (benchmarks, tests)."""
    return render(plan(task, limits, block_size, stages, **choices), limits)


def render(p: Sm90Plan, limits: DeviceLimits) -> Build:
    """The source, launches and scratch buffers of a plan: no decision is taken here."""
    if p.swapped_rows:
        return _render_swapped(p, limits)
    m, n, k, dtype = p.m, p.n, p.k, p.dtype
    bm, bn, consumers = parse_block_size(p.block_size, dtype)
    bk = bk_of(dtype)
    cm, cn = p.cluster
    cluster = cm * cn
    grid, dp_tiles = p.grid, p.dp_tiles
    x3 = dtype == "fp32"
    consts = defines_of(p)
    source = _source(consts)
    smem = smem_bytes(p.block_size, p.stages, dtype, p.pingpong, p.epi_ring, p.epi_shared)
    a_hi, w_hi = ("a_hi", "w_hi") if x3 and p.split_hi else ("a", "w")
    if p.k_pad:  # the GEMM reads the padded copies (``k_padded``)
        a_hi, w_hi, k = "a_pad", "w_pad", p.k_pad
    maps = (
        # a CTA of a 1x2 cluster loads half the A tile and multicasts it
        TensorMapArg(a_hi, rows=m, cols=k, box_rows=bm // cn, box_cols=bk, swizzle_bytes=128),
        # a TMA box has at most 256 rows: an unclustered 320-row W tile loads as two of 160
        TensorMapArg(w_hi, rows=n, cols=k, box_rows=bn // cm if bn // cm <= 256 else bn // cm // 2,
                     box_cols=bk, swizzle_bytes=128),
        TensorMapArg("r", rows=m, cols=n, box_rows=bm, box_cols=bk, swizzle_bytes=128),
        TensorMapArg("out", rows=m, cols=n, box_rows=bm, box_cols=bk, swizzle_bytes=128),
    )
    # the epilogue's tail chunk, swizzled at its own width (16-bit data: BN = 160 32 columns, 64B
    # swizzle; BN = 80 16 columns, 32B); otherwise the same maps again (unused)
    tail = bn % bk
    if tail:
        tail_sw = tail * ITEMSIZE[dtype]
        maps += (TensorMapArg("r", rows=m, cols=n, box_rows=bm, box_cols=tail, swizzle_bytes=tail_sw),
                 TensorMapArg("out", rows=m, cols=n, box_rows=bm, box_cols=tail, swizzle_bytes=tail_sw))
    else:
        maps += (maps[2], maps[3])
    if p.half_tail:  # a half tile's 64 A rows, and its 64-row stores (the tail chunk's too)
        maps += (replace(maps[0], box_rows=64), replace(maps[3], box_rows=64),
                 replace(maps[5], box_rows=64))
    launches: list[Launch] = []
    functions: list[str] = []
    scratch: tuple[Buffer, ...] = ()
    if x3:
        maps += (replace(maps[0], buffer="a_lo"), replace(maps[1], buffer="w_lo"))
        scratch = (Buffer("a_lo", (m, k), "fp32", "scratch"),
                   Buffer("w_lo", (n, k), "fp32", "scratch"))
        if p.split_hi:
            scratch += (Buffer("a_hi", (m, k), "fp32", "scratch"),
                        Buffer("w_hi", (n, k), "fp32", "scratch"))
        total4 = (m * k + n * k) // 4
        split_grid = max(1, min(-(-total4 // 256), limits.sm_count * 8))
        launches.append(Launch(SPLIT_KERNEL, (split_grid, 1, 1), (256, 1, 1), 0,
                               ("a", a_hi, "a_lo", m * k // 4, "w", w_hi, "w_lo", n * k // 4)))
        functions.append(SPLIT_KERNEL)
    if p.k_pad:
        scratch = (Buffer("a_pad", (m, k), dtype, "scratch"), Buffer("w_pad", (n, k), dtype, "scratch"))
        for src, dst, rows in (("a", "a_pad", m), ("w", "w_pad", n)):
            total8 = rows * k // 8
            pad_grid = max(1, min(-(-total8 // 256), limits.sm_count * 8))
            launches.append(Launch(PAD_KERNEL, (pad_grid, 1, 1), (256, 1, 1), 0, (src, dst, rows, p.k, k)))
        functions.append(PAD_KERNEL)
        source += (KERNEL_DIR / PAD_SOURCE).read_text(encoding="utf-8")
    launches.append(Launch(KERNEL, (grid, 1, 1), (128 * (consumers + 1), 1, 1), smem,
                           (*maps, m, n, k, dp_tiles), cluster=2 if p.pairs else cluster))
    functions.append(KERNEL)
    if not p.fuse:
        total8 = m * n // 8
        add_grid = max(1, min(-(-total8 // 256), limits.sm_count * 8))
        add = ADD_KERNEL_F32 if ITEMSIZE[dtype] == 4 else ADD_KERNEL
        launches.append(Launch(add, (add_grid, 1, 1), (256, 1, 1), 0, ("out", "r", m, n)))
        functions.append(add)
    info = describe(p, limits)
    return Build(source=source, functions=tuple(functions), launches=tuple(launches),
                 options=options(limits) + (HALF_TAIL_OPTIONS if p.half_tail else ()), info=info,
                 scratch=scratch)


def describe(p: Sm90Plan, limits: DeviceLimits) -> dict[str, Any]:
    """What to display of a plan (``KernelPlan.info``): the same ``render`` puts in its build, without
    rendering the source."""
    if p.swapped_rows:
        return _describe_swapped(p, limits)
    m, n, dtype = p.m, p.n, p.dtype
    bm, bn, consumers = parse_block_size(p.block_size, dtype)
    bk = bk_of(dtype)
    cm, cn = p.cluster
    grid, dp_tiles, tiles = p.grid, p.dp_tiles, p.tiles
    x3 = dtype == "fp32"
    consts = defines_of(p)
    smem = smem_bytes(p.block_size, p.stages, dtype, p.pingpong, p.epi_ring, p.epi_shared)
    info = {
        "path": "wgmma+TMA (sm_90a, warp-specialised, persistent)",
        "tile": f"{bm}x{bn}x{bk}",
        "stages": stage_count(p.stages),
        "pipelining": "off" if p.stages == 0 else p.stages,
        "consumer_warpgroups": consumers,
        "consumers": "ping-pong (whole tiles, alternating)" if p.pingpong else "cooperative",
        "cluster": cluster_label(cm, cn, p.pairs),
        "threads": 128 * (consumers + 1),
        "grid": grid,
        "tiles": tiles,
        "schedule": ("data-parallel" if dp_tiles >= tiles else
                     f"data-parallel, the last {tiles - dp_tiles} tiles in 64-row halves" if p.half_tail else
                     f"stream-K over {tiles - dp_tiles} tiles after {dp_tiles} data-parallel"),
        "smem_bytes": smem,
        "fused": bool(p.fuse),
        "epilogue_tile": ("in the ring's freed slots" + (", returned after each store" if p.epi_ring_reuse else "")
                          if p.epi_ring
                          else "one buffer shared by both consumers" if p.epi_shared else "own buffer"),
        "tile_order": (f"groups of {p.raster_group} M blocks" if p.raster_group
                       else "M-fastest" if p.raster_m else "N-fastest"),
        "tail": ("last tiles moved back to end at M, N" if p.tail_shift
                 else "tiles past M, N clipped by TMA"),
    }
    if p.k_pad:
        info["k_padding"] = (f"K = {p.k} padded to {p.k_pad} (16-byte rows for TMA): A and W copied each launch, "
                             f"{2 * (m + n) * p.k * ITEMSIZE[dtype] / 1e6:.1f} MB more traffic")
    if x3:
        info["math"] = ("3xTF32 (a_lo*w_hi + a_hi*w_lo + a_hi*w_hi; hi "
                        + ("tf32-rounded" if p.split_hi else "as the tensor cores read x") + "; "
                        + (f"tensor cores sum {consts['PROMOTE']} k-blocks, then FADD"
                           if consts["PROMOTE"] else "tensor-core accumulation over all of K")
                        + ")")
    return info


def _describe_swapped(p: Sm90Plan, limits: DeviceLimits) -> dict[str, Any]:
    """A swapped plan's display: the inner (kernel-frame) plan's, its tile, order and cluster
    named in the problem's frame."""
    rows, dtype = p.swapped_rows, p.dtype
    inner = describe(replace(p, swapped_rows=0), limits)
    # the inner build names its tile order in the kernel's frame, where M and N trade places
    order = str(inner.get("tile_order", ""))
    order = {"N-fastest": "M-fastest", "M-fastest": "N-fastest"}.get(order, order.replace(" M blocks", " N blocks"))
    cols = parse_block_size(p.block_size, dtype)[0]
    cm, cn = p.cluster  # the kernel's frame: its M-neighbours are the problem's N-neighbours
    info = dict(inner, tile=f"{rows}x{cols}x{bk_of(dtype)} swapped (out^T = W A^T)", tile_order=order,
                tail="tiles past M, N clipped by TMA", cluster=cluster_label(cn, cm, p.pairs))
    if p.decode:
        info["l2_policy"] = f"W loaded evict-first (read once), {DECODE_L2_PROMOTION}-byte L2 promotion"
    return info


def _render_swapped(p: Sm90Plan, limits: DeviceLimits) -> Build:
    """The inner (kernel-frame) build of a swapped plan, its tensor maps turned to the problem's
    [M, N] layout for R and out."""
    rows = p.swapped_rows
    m, n, dtype = p.n, p.m, p.dtype  # the problem's M and N
    b = render(replace(p, swapped_rows=0), limits)
    at = next(i for i, launch in enumerate(b.launches) if launch.function == KERNEL)
    gemm = b.launches[at]
    maps = list(gemm.args[:6])
    pad = "_pad" if p.k_pad else ""
    # n rows of K: the wgmma's A operand, 128-row boxes; a decode tile's rows of W are each read once,
    # promoted to the L2 in 128-byte pieces, one k-block's (ADR-0011)
    maps[0] = replace(maps[0], buffer="w" + pad, **({"l2_promotion": DECODE_L2_PROMOTION} if p.decode else {}))
    maps[1] = replace(maps[1], buffer="a" + pad)  # m rows of K: its B operand, R-row boxes
    nat = {"rows": m, "cols": n, "box_rows": rows, "box_cols": bk_of(dtype), "swizzle_bytes": 128}
    maps[2] = replace(maps[2], **nat)
    maps[3] = replace(maps[3], **nat)
    maps[4], maps[5] = maps[2], maps[3]  # no tail chunk: 128 or 256 columns of N are whole chunks
    launches = list(b.launches)
    # a decode tile waits for the kernel before it (PDL_WAIT): launched dependent (ADR-0010)
    launches[at] = replace(gemm, args=(*maps, *gemm.args[6:]), pdl=p.decode)
    if p.k_pad:  # the inner build padded its own A (the problem's W) and W (the problem's A)
        swap = {"a": "w", "w": "a", "a_pad": "w_pad", "w_pad": "a_pad"}
        launches = [replace(ln, args=tuple(swap.get(x, x) if isinstance(x, str) else x for x in ln.args))
                    if ln.function == PAD_KERNEL else ln for ln in launches]
        scratch = tuple(replace(sb, name=swap[sb.name], shape=(m if sb.name == "w_pad" else n, p.k_pad))
                        for sb in b.scratch)
        b = replace(b, scratch=scratch)
    info = describe(p, limits)
    head = {"SWAP_AB": 1, **(DECODE_DEFINES if p.decode else {})}  # as ``defines`` writes a swapped tile's
    return replace(b, source="".join(f"#define {k} {v}\n" for k, v in head.items()) + b.source,
                   launches=tuple(launches), info=info)
