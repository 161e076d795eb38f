"""A decode plan written out (``render``): the CUDA source (#defines of validated integers, the
shared conversions, the kernel and its headers, each inlined once) and the launches; no decision
is taken here."""

from __future__ import annotations

from kernels.include_once import inline_once
from kernels.skinny.tiles import COUNTERS, DT_CODE, DTYPES, SkinnyPlan, _cdiv, a_tile_chunks, bulk_smem
from kernels.spec import KERNEL_DIR, Buffer, Build, Launch, TensorMapArg, vec16_source

SOURCE_FILE = "gemm_residual_skinny.cu"
"""The decode kernels (under kernels/): it includes its parts under kernels/skinny/."""
KERNEL = "gemm_residual_skinny"
ADD_KERNEL = "skinny_residual_add"
ADD_THREADS = 256
SOURCE_FILES = ("gemm_residual_skinny.py", SOURCE_FILE, "mbarrier.cuh", "vec16.cuh", "include_once.py",
                *sorted(p.relative_to(KERNEL_DIR).as_posix() for p in (KERNEL_DIR / "skinny").iterdir()
                        if p.suffix in (".py", ".cuh")))
"""The files under kernels/ whose text decides what this path builds: its planner and templates (for a
spec's ``source_files``, which key its tuned entries)."""


def defines(plan: SkinnyPlan, dtype: str) -> dict[str, int]:
    """The template's #define values, all integers."""
    return {"BM": plan.bm, "BN": plan.bn, "STAGES": plan.stages, "WARPS": plan.warps,
            "SPLIT_K": plan.split_k, "DT": DT_CODE[dtype], "FUSE": int(plan.fuse),
            "ALIGNED8": int(plan.aligned8), "ALIGNED2": int(plan.aligned2), "COUNTERS": COUNTERS,
            "A_SMEM": int(plan.a_smem), "A_TILE": a_tile_chunks(plan.bm, plan.bn, plan.warps),
            "W_BULK": int(plan.w_bulk), "BULK_K": int(plan.bulk_k)}


def source(plan: SkinnyPlan, dtype: str) -> str:
    """Defines, then vec16.cuh for the data type, then the kernel with each file it includes
    inlined once (``inline_once``)."""
    consts = defines(plan, dtype)
    head = "".join(f"#define {name} {int(value)}\n" for name, value in consts.items())
    return head + vec16_source(consts["DT"]) + inline_once((SOURCE_FILE,), seen=("vec16.cuh",))


def render(plan: SkinnyPlan, m: int, n: int, k: int, dtype: str) -> Build:
    """The build for one plan: the GEMM launch (``a``, ``w``, ``r``, ``out``, ``ws``, M, N, K), with
    fusion off the in-place add on ``out``; ``ws`` is scratch of (split_k, M, N) fp32 (one element
    when split_k is 1, never read then)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    dynamic = bulk_smem(plan.bm, plan.bn, plan.warps, plan.stages, plan.bulk_k, plan.w_bulk) if plan.w_bulk else 0
    args: tuple[str | int | TensorMapArg, ...] = ("a", "w", "r", "out", "ws", m, n, k)
    if plan.w_bulk == 2:
        args += (TensorMapArg("w", rows=n, cols=k, box_rows=plan.bn, box_cols=64, swizzle_bytes=128),
                 TensorMapArg("a", rows=m, cols=k, box_rows=min(plan.bm, m), box_cols=64, swizzle_bytes=128))
    launches = [Launch(KERNEL, plan.grid, plan.block, dynamic, args, pdl=bool(plan.w_bulk))]
    functions = [KERNEL]
    if not plan.fuse:
        add_grid = max(1, min(_cdiv(_cdiv(m * n, 8), ADD_THREADS), 1024))
        launches.append(Launch(ADD_KERNEL, (add_grid, 1, 1), (ADD_THREADS, 1, 1), 0, ("out", "r", m, n)))
        functions.append(ADD_KERNEL)
    ws_shape = (plan.split_k, m, n) if plan.split_k > 1 else (1,)
    return Build(source=source(plan, dtype), functions=tuple(functions), launches=tuple(launches),
                 options=("--std=c++17",), info=plan.info(),
                 scratch=(Buffer("ws", ws_shape, "fp32", "scratch"),))
