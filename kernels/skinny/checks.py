"""Every constraint of the decode path, before compiling (``check``): each refusal names its knob,
the value and the limit."""

from __future__ import annotations

from kernels.skinny.planner import (
    DEFAULT_BULK_K,
    _smem_limit,
    default_a_smem,
    default_w_bulk,
    stages_that_fit,
)
from kernels.skinny.tiles import (
    A_SMEM_OPTIONS,
    BULK_K_OPTIONS,
    BULK_MIN_CC,
    BULK_STATIC_SMEM,
    COUNTERS,
    DTYPES,
    MAX_M,
    REGISTER_BUDGET,
    SPLIT_K_OPTIONS,
    STAGE_OPTIONS,
    TILES,
    W_BULK_OPTIONS,
    WARPS_OPTIONS,
    _cdiv,
    _smem,
    bulk_applies,
    bulk_smem,
    bulk_stages_that_fit,
    load_width,
    parse_block_size,
    register_estimate,
)
from kernels.spec import DeviceLimits, Violation


def check(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, block_size: str,
          stages: int, warps: int, split_k: int, a_smem: int | None = None, w_bulk: int | None = None,
          bulk_k: int = 0, a_smem_rule: bool = False) -> list[Violation]:
    """Every constraint of this path, before compiling. a_smem None checks the variant ``plan``
    takes by default for these knobs (``default_a_smem``, by its rule where ``a_smem_rule``), so
    that ``check`` and ``plan`` called with the same knobs agree."""
    out: list[Violation] = []
    if dtype not in DTYPES:
        out.append(Violation("dtype", dtype, "the skinny path takes 16-bit data", ", ".join(DTYPES)))
    if m > MAX_M:
        out.append(Violation("shape.m", m, f"the skinny (decode) path is for M <= {MAX_M} tokens",
                             f"M <= {MAX_M}"))
    for name, val in (("m", m), ("n", n), ("k", k)):
        if not 1 <= val < 2**31:
            out.append(Violation(f"shape.{name}", val, "must be in 1..2**31-1", "int32 kernel arguments"))
    if tuple(limits.compute_capability) < (8, 0):
        out.append(Violation("device", limits.profile or str(limits.compute_capability),
                             "mma.sync m16n8k16 with bf16 needs compute capability 8.0", "cc >= 8.0"))
    if warps not in WARPS_OPTIONS:
        out.append(Violation("schedule.warps", warps, "warps per CTA",
                             ", ".join(map(str, WARPS_OPTIONS))))
    if split_k not in SPLIT_K_OPTIONS:
        out.append(Violation("schedule.split_k", split_k, "CTAs per output tile along K",
                             ", ".join(map(str, SPLIT_K_OPTIONS))))
    if stages not in STAGE_OPTIONS:
        out.append(Violation("memory_pipelining", stages, "chunks of 32 K elements in flight per warp",
                             ", ".join(map(str, STAGE_OPTIONS))))
    if a_smem is not None and a_smem not in A_SMEM_OPTIONS:
        out.append(Violation("schedule.a_smem", a_smem, "A's fragments from global memory (0) or shared memory (1)",
                             ", ".join(map(str, A_SMEM_OPTIONS))))
    elif a_smem == 1 and k % 8:
        out.append(Violation("schedule.a_smem", a_smem,
                             f"A staged in shared memory needs K % 8 == 0 (16-byte cp.async of A's rows; K = {k})",
                             "K % 8 == 0, or schedule.a_smem = 0"))
    try:
        bm, bn = parse_block_size(block_size)
    except ValueError as exc:
        return [*out, Violation("block_size", block_size, str(exc), ", ".join(TILES))]
    if out:
        return out
    if w_bulk is None:  # as ``plan`` resolves it
        w_bulk = 1 if bulk_k else 0 if a_smem == 1 else default_w_bulk(k, limits)
    if w_bulk:
        return _bulk_violations(m, n, k, bm, bn, stages, warps, split_k, bulk_k or DEFAULT_BULK_K, limits, a_smem,
                                w_bulk)
    if a_smem is None:
        a_smem = default_a_smem(bm, bn, stages, warps, k, limits, a_smem_rule)
    return _geometry_violations(m, n, k, bm, bn, stages, warps, split_k, limits, a_smem)


def _bulk_violations(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int, split_k: int,
                     bulk_k: int, limits: DeviceLimits, a_smem: int | None, mode: int = 1) -> list[Violation]:
    """w_bulk 1 or 2: the device and K, the ring against shared memory, threads, split-K counters."""
    out: list[Violation] = []
    if mode not in W_BULK_OPTIONS:
        return [Violation("schedule.w_bulk", mode, "how W reaches the MMAs", ", ".join(map(str, W_BULK_OPTIONS)))]
    if not bulk_applies(k, limits):
        out.append(Violation("schedule.w_bulk", mode,
                             f"bulk copies need compute capability >= {BULK_MIN_CC[0]}.{BULK_MIN_CC[1]} and "
                             f"16-byte aligned rows (K = {k}, cc {limits.compute_capability[0]}."
                             f"{limits.compute_capability[1]})", "schedule.w_bulk = 0"))
    if a_smem == 1:
        out.append(Violation("schedule.a_smem", a_smem, "with schedule.w_bulk = 1 A comes through the ring",
                             "schedule.a_smem = 0"))
    if bulk_k not in BULK_K_OPTIONS:
        out.append(Violation("schedule.bulk_k", bulk_k, "K elements per ring slot",
                             ", ".join(map(str, BULK_K_OPTIONS))))
        return out
    smem = bulk_smem(bm, bn, warps, stages, bulk_k, mode) + BULK_STATIC_SMEM
    if smem > limits.shared_memory_per_block_bytes:
        fits = bulk_stages_that_fit(bm, bn, warps, bulk_k, limits, mode)
        out.append(Violation("memory_pipelining", stages,
                             f"a ring of {stages} slots of {bm}x{bn} with bulk_k {bulk_k} needs {smem} bytes of "
                             f"shared memory; fits: {', '.join(map(str, fits)) or 'none'}",
                             f"{limits.shared_memory_per_block_bytes} bytes per block"))
    return out + _launch_violations(m, n, bm, bn, warps, split_k, limits, producer=True)


def _geometry_violations(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int,
                         split_k: int, limits: DeviceLimits, a_smem: int = 0) -> list[Violation]:
    """Registers, shared memory, threads and the split-K counters for valid knob values."""
    out: list[Violation] = []
    fits = stages_that_fit(bm, bn, warps, k, a_smem)
    if stages not in fits:
        width = load_width(k)
        out.append(Violation("memory_pipelining", stages,
                             f"{bm}x{bn} with {warps} warps, {width}-byte loads and a_smem {a_smem} would "
                             f"spill registers at this depth (estimate "
                             f"{register_estimate(bm, bn, stages, warps, a_smem)}); "
                             f"fits: {', '.join(map(str, fits)) or 'none'}",
                             f"register estimate <= {REGISTER_BUDGET[width]} (no spills)"))
    smem = _smem(bm, bn, warps, a_smem)
    if smem > _smem_limit(limits):
        out.append(Violation("schedule.a_smem" if a_smem and _smem(bm, bn, warps) <= _smem_limit(limits)
                             else "block_size", a_smem if a_smem else f"{bm}x{bn}",
                             f"{smem} bytes of static shared memory for {bm}x{bn}",
                             f"{_smem_limit(limits)} bytes per block"))
    return out + _launch_violations(m, n, bm, bn, warps, split_k, limits)


def _launch_violations(m: int, n: int, bm: int, bn: int, warps: int, split_k: int,
                       limits: DeviceLimits, producer: bool = False) -> list[Violation]:
    """Threads per block (``warps`` consumer warps, and a producer warp with a w_bulk ring) and the
    split-K arrival counters, for either way W travels."""
    out: list[Violation] = []
    if 32 * (warps + producer) > limits.max_threads_per_block:
        out.append(Violation("schedule.warps", warps,
                             "too many threads per block" + (" (one more warp copies)" if producer else ""),
                             f"{limits.max_threads_per_block} threads"))
    tiles = _cdiv(n, bn) * _cdiv(m, bm)
    if split_k > 1 and tiles > COUNTERS:
        out.append(Violation("block_size", f"{bm}x{bn}", f"{tiles} output tiles need split-K counters",
                             f"{COUNTERS} counters"))
    return out
