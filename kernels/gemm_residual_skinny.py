"""Decode-shaped ("skinny") GEMM + residual for M <= 64 tokens (``gemm_residual_skinny.cu``).

``out[M, N] = A[M, K] @ W[N, K]^T + R[M, N]``, bf16 or fp16, fp32 accumulation, the residual added
in fp32 and the result rounded once. At decode sizes the GEMM is memory-bound: its speed of light
is W (N x K x 2 bytes) streamed once from HBM, which the wgmma/TMA tiles (64+ rows of A) cannot
reach at M = 1..16. This path streams W from global memory straight into registers (16-byte
loads, ``stages`` chunks of 32 K elements in flight per warp) and multiplies with mma.sync
m16n8k16 with swapped roles (16 rows of W the MMA's M side, 8 tokens its N side), the K
order permuted so that every lane's fragment is one 16-byte load (no shared memory, no ldmatrix;
the kernel's header derives the permutation).

Knobs (validated integers only reach the source, as ``#define`` lines):

- BLOCK_SIZE "BMxBN": BM tokens (8, 16, 32, 64: BM / 8 n8 fragments) by BN rows of W (16, 32,
  64, 128: BN / 16 row groups) per CTA (``TILES``).
- MEMORY_PIPELINING: chunks of 32 K elements in flight per warp (``STAGE_OPTIONS``), held in
  registers; combinations whose registers would spill are refused (``register_estimate``).
- schedule.warps (4, 8): warps per CTA; they split the CTA's rows into row groups and its K range
  among the rest, partial sums reduced in shared memory in a fixed order.
- schedule.split_k: CTAs per output tile along K. Above 1 each CTA writes an fp32 partial to the
  ``ws`` scratch buffer (split_k, M, N); the last CTA of a tile (a static counter per tile, reset
  by that CTA) sums the partials in a fixed order, so results are deterministic.

Any N, K >= 1: K % 8 != 0 builds the vectors from 4-byte (K even) or 2-byte loads (``ALIGNED8``,
``ALIGNED2``; base pointers 16-byte aligned, as CuPy allocates). Fusion off runs the GEMM without R
and then ``skinny_residual_add``.

Defaults (``plan``): BM the fewest tokens >= M; 4 warps; BN (widest of 64, 32, 16 with BN >= BM / 2)
and split-K (least) so that the grid has about 2 CTAs per SM (``CTAS_PER_SM`` x limits.sm_count)
while each warp keeps >= ``MIN_WARP_CHUNKS`` chunks of K and the split-K partials' traffic stays
under ``SPLIT_TRAFFIC`` of W; 4 stages, fewer where the register budget demands.

Where this deviates from the design it was written to:

- Tails: rows past N and tokens past M are clamped to the last row / token instead of loaded as
  zeros. They feed only outputs that are never stored (out^T's rows past N, columns past M), and
  a clamped lane's load falls on the same address as a real one in the same instruction, so it
  costs no memory traffic and no predicate registers. k past K is zero in both operands.
- Each warp of a row-group slot takes one contiguous range of the CTA's chunks (rather than every
  KW-th chunk), so that a warp's loads in flight cover stages x 64 contiguous bytes of each row.
- The register rule depends on K's alignment (``REGISTER_BUDGET``): 4- and 2-byte loads each hold
  a register until the vector is assembled, so fewer stages fit than with 16-byte loads.
- The split-K workspace is (split_k, M, N) fp32: only real tokens and rows are written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernels.spec import KERNEL_DIR, Buffer, Build, DeviceLimits, Launch, Violation, vec16_source

SOURCE_FILE = "gemm_residual_skinny.cu"
KERNEL = "gemm_residual_skinny"
ADD_KERNEL = "skinny_residual_add"
CHUNK = 32
"""K elements per chunk: 4 lanes x 8 elements (one 16-byte load per lane and row)."""
MAX_M = 64
BM_OPTIONS = (8, 16, 32, 64)
BN_OPTIONS = (16, 32, 64, 128)
TILES = tuple(f"{bm}x{bn}" for bm in BM_OPTIONS for bn in BN_OPTIONS)
"""BLOCK_SIZE values: BM tokens x BN rows of W per CTA."""
STAGE_OPTIONS = (2, 4, 6, 8)
WARPS_OPTIONS = (4, 8)
SPLIT_K_OPTIONS = (1, 2, 3, 4, 6, 8, 12, 16)
DTYPES = ("bf16", "fp16")
DT_CODE = {"bf16": 0, "fp16": 1}
COUNTERS = 65536
"""Split-K arrival counters in the module (one per output tile, ``skinny_counters``)."""
REGISTER_BUDGET = {16: 248, 4: 200, 2: 172}
"""Most registers ``register_estimate`` may predict, per load width in bytes (``load_width``), for
a variant to be accepted. ptxas' ceiling is 255 per thread. Measured on sm_90a (bf16 and fp16
within a few registers of each other): the 16-byte variants estimated <= 244 used <= 242
registers, the first that spilled was estimated 304. Narrower loads hold more registers in
flight (each 4- or 2-byte load its own register until the vector is assembled) and ptxas
schedules them differently: 4-byte variants estimated <= 200 used <= 224 (the first spill at
244), 2-byte ones estimated <= 168 used <= 229 (the first spill at 236). Each budget keeps a
margin of >= 13 registers below 255; tests/unit/test_skinny_compile.py compiles every accepted
variant and checks that none spills."""
DEFAULT_WARPS = 4
DEFAULT_STAGES = 6
DEFAULT_BN = (64, 32, 16)
"""BN tried for the default, widest first: a wider tile re-reads A from L2 fewer times and needs
less split-K; narrower ones make more CTAs where N is small. Only BN >= BM / 2 is tried, so that
the CTAs' reads of A (BM / BN of their W bytes, from L2) stay within twice W's."""
CTAS_PER_SM = 1.9
"""The default grid's target: about 2 CTAs per SM (256 CTAs on 132 SMs count), within the split-K
limits below; the CTAs are small (4 warps, <= 20 KB of shared memory), so more fit at once."""
MIN_WARP_CHUNKS = 8
"""The default's split-K leaves each warp at least this many chunks (8 x 1 KB of W at one row group)."""
SPLIT_TRAFFIC = 0.25
"""The default's split-K keeps its partials' traffic (fp32, written and read back, mostly in L2)
under this fraction of W's bytes."""
ADD_THREADS = 256


@dataclass(frozen=True)
class SkinnyPlan:
    """One resolved configuration: knobs, alignment variant and launch geometry."""

    bm: int
    bn: int
    stages: int
    warps: int
    split_k: int
    fuse: bool
    aligned8: bool
    aligned2: bool
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int

    @property
    def block_size(self) -> str:
        return f"{self.bm}x{self.bn}"

    def info(self) -> dict[str, Any]:
        """Resolved knobs and geometry for display."""
        return {
            "path": "mma.sync split-K (decode)",
            "tile": self.block_size,
            "stages": self.stages,
            "warps": self.warps,
            "split_k": self.split_k,
            "grid": self.grid,
            "threads": self.block[0],
            "smem_bytes": self.smem_bytes,
            "fused": self.fuse,
            "loads": "16-byte" if self.aligned8 else "4-byte" if self.aligned2 else "2-byte",
        }


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def parse_block_size(block_size: str) -> tuple[int, int]:
    """(BM, BN) of a ``TILES`` name; ValueError naming the offered tiles otherwise."""
    if block_size not in TILES:
        raise ValueError(f"block_size {block_size!r}: one of {', '.join(TILES)}")
    bm, bn = block_size.split("x")
    return int(bm), int(bn)


def warp_layout(bn: int, warps: int) -> tuple[int, int, int]:
    """(row-group slots, row groups per warp, warps per slot splitting K): the kernel's WG, RPW, KW."""
    groups = bn // 16
    slots = min(groups, warps)
    return slots, groups // slots, warps // slots


def load_width(k: int) -> int:
    """Bytes per load of a row's 8-element vector: 16 where K % 8 == 0, 4 where K is even, else 2."""
    return 16 if k % 8 == 0 else 4 if k % 2 == 0 else 2


def stages_that_fit(bm: int, bn: int, warps: int, k: int) -> list[int]:
    """The ``STAGE_OPTIONS`` whose register estimate is within the budget for K's load width."""
    budget = REGISTER_BUDGET[load_width(k)]
    return [s for s in STAGE_OPTIONS if register_estimate(bm, bn, s, warps) <= budget]


def register_estimate(bm: int, bn: int, stages: int, warps: int) -> int:
    """Registers per thread: each chunk in flight holds 8 per row group (rows g and g + 8) and 4 per
    n8 fragment, the accumulators 4 per (row group, fragment), plus addresses and indices. Fitted
    to ptxas for sm_90a (the compile test checks that no accepted variant spills)."""
    _, rpw, _ = warp_layout(bn, warps)
    nf = bm // 8
    return stages * (8 * rpw + 4 * nf) + 4 * rpw * nf + 2 * (2 * rpw + nf) + 24


def smem_bytes(plan: SkinnyPlan) -> int:
    """Static shared memory: the warps' fp32 partial tiles (KW x BM x (BN + 4)) and a flag."""
    return _smem(plan.bm, plan.bn, plan.warps)


def _smem(bm: int, bn: int, warps: int) -> int:
    _, _, kw = warp_layout(bn, warps)
    return kw * bm * (bn + 4) * 4 + 16


def default_bm(m: int) -> int:
    """The fewest tokens per CTA that hold M (one CTA row along M up to 64)."""
    return next((bm for bm in BM_OPTIONS if bm >= m), MAX_M)


def default_stages(bm: int, bn: int, warps: int, k: int) -> int:
    """``DEFAULT_STAGES`` chunks in flight, fewer where the registers demand."""
    fits = [s for s in stages_that_fit(bm, bn, warps, k) if s <= DEFAULT_STAGES]
    return max(fits) if fits else STAGE_OPTIONS[0]


def _max_split(m: int, k: int, n_rows: int, warps: int) -> int:
    """The most split-K the default takes: each warp keeps >= MIN_WARP_CHUNKS chunks, and the
    partials' traffic (split_k x M x N x 8 bytes) stays under SPLIT_TRAFFIC of W (N x K x 2)."""
    _, _, kw = warp_layout(n_rows, warps)
    by_chunks = _cdiv(k, CHUNK) // (MIN_WARP_CHUNKS * kw)
    by_traffic = int(SPLIT_TRAFFIC * 2 * k / (8 * m))  # split_k * M * N * 8 <= SPLIT_TRAFFIC * N * K * 2
    return max(1, min(by_chunks, by_traffic))


def default_schedule(m: int, n: int, k: int, bm: int, warps: int, sm_count: int,
                     bn: int | None = None) -> tuple[int, int]:
    """(BN, split_k): the least split-K (its partials cost traffic and a reduction), then the widest
    tile of ``DEFAULT_BN`` (or ``bn``), that give >= CTAS_PER_SM CTAs per SM within ``_max_split``;
    where none does, the most CTAs. On the H200 at M = 1, N = K = 4096, 8x16 without split-K (256
    CTAs) ran 15.0 us against 8x64 split 4 (also 256 CTAs) 16.4 us (ADR-0003)."""
    want = CTAS_PER_SM * sm_count
    best: tuple[int, int, int] | None = None
    widths = (bn,) if bn else tuple(b for b in DEFAULT_BN if 2 * b >= bm)
    caps = {b: _max_split(m, k, b, warps) for b in widths}
    for s in SPLIT_K_OPTIONS:
        for b in widths:
            if s > caps[b]:
                continue
            ctas = _cdiv(n, b) * _cdiv(m, bm) * s
            if ctas >= want:
                return b, s
            if best is None or ctas > best[0]:
                best = (ctas, b, s)
    assert best is not None
    return best[1], best[2]


def plan(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, block_size: str | None = None,
         stages: int | None = None, warps: int | None = None, split_k: int | None = None,
         fuse: bool = True) -> SkinnyPlan:
    """Resolve every unset knob from the hardware (``default_bm``, ``default_schedule`` against
    limits.sm_count, ``default_stages``) and the launch geometry; ValueError naming the knob for a
    value this path cannot run (``check`` lists every problem)."""
    if min(m, n, k) < 1:
        raise ValueError(f"shape {m}x{n}x{k}: every dimension must be >= 1")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}: the skinny path takes {', '.join(DTYPES)}")
    if m > MAX_M:
        raise ValueError(f"shape.m={m}: the skinny path is for M <= {MAX_M}")
    if warps is None:
        warps = DEFAULT_WARPS
    if warps not in WARPS_OPTIONS:
        raise ValueError(f"schedule.warps={warps}: one of {WARPS_OPTIONS}")
    if block_size is None:
        bm = default_bm(m)
        bn, auto_split = default_schedule(m, n, k, bm, warps, limits.sm_count)
    else:
        bm, bn = parse_block_size(block_size)
        bn, auto_split = default_schedule(m, n, k, bm, warps, limits.sm_count, bn)
    if split_k is None:
        split_k = auto_split
    if split_k not in SPLIT_K_OPTIONS:
        raise ValueError(f"schedule.split_k={split_k}: one of {SPLIT_K_OPTIONS}")
    if stages is None:
        stages = default_stages(bm, bn, warps, k)
    if stages not in STAGE_OPTIONS:
        raise ValueError(f"memory_pipelining={stages}: one of {STAGE_OPTIONS}")
    grid = (_cdiv(n, bn), split_k, _cdiv(m, bm))
    return SkinnyPlan(bm=bm, bn=bn, stages=stages, warps=warps, split_k=split_k, fuse=bool(fuse),
                      aligned8=k % 8 == 0, aligned2=k % 2 == 0, grid=grid, block=(32 * warps, 1, 1),
                      smem_bytes=_smem(bm, bn, warps))


def check(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, block_size: str,
          stages: int, warps: int, split_k: int) -> list[Violation]:
    """Every constraint of this path, before compiling."""
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
    try:
        bm, bn = parse_block_size(block_size)
    except ValueError as exc:
        return [*out, Violation("block_size", block_size, str(exc), ", ".join(TILES))]
    if out:
        return out
    return _geometry_violations(m, n, k, bm, bn, stages, warps, split_k, limits)


def _geometry_violations(m: int, n: int, k: int, bm: int, bn: int, stages: int, warps: int,
                         split_k: int, limits: DeviceLimits) -> list[Violation]:
    """Registers, shared memory, threads and the split-K counters for valid knob values."""
    out: list[Violation] = []
    fits = stages_that_fit(bm, bn, warps, k)
    if stages not in fits:
        width = load_width(k)
        out.append(Violation("memory_pipelining", stages,
                             f"{bm}x{bn} with {warps} warps and {width}-byte loads would spill registers "
                             f"at this depth (estimate {register_estimate(bm, bn, stages, warps)}); "
                             f"fits: {', '.join(map(str, fits)) or 'none'}",
                             f"register estimate <= {REGISTER_BUDGET[width]} (no spills)"))
    smem = _smem(bm, bn, warps)
    if smem > min(48 * 1024, limits.shared_memory_per_block_bytes):
        out.append(Violation("block_size", f"{bm}x{bn}", f"{smem} bytes of static shared memory",
                             f"{min(48 * 1024, limits.shared_memory_per_block_bytes)} bytes per block"))
    if 32 * warps > limits.max_threads_per_block:
        out.append(Violation("schedule.warps", warps, "too many threads per block",
                             f"{limits.max_threads_per_block} threads"))
    tiles = _cdiv(n, bn) * _cdiv(m, bm)
    if split_k > 1 and tiles > COUNTERS:
        out.append(Violation("block_size", f"{bm}x{bn}", f"{tiles} output tiles need split-K counters",
                             f"{COUNTERS} counters"))
    return out


def defines(plan: SkinnyPlan, dtype: str) -> dict[str, int]:
    """The template's #define values, all integers."""
    return {"BM": plan.bm, "BN": plan.bn, "STAGES": plan.stages, "WARPS": plan.warps,
            "SPLIT_K": plan.split_k, "DT": DT_CODE[dtype], "FUSE": int(plan.fuse),
            "ALIGNED8": int(plan.aligned8), "ALIGNED2": int(plan.aligned2), "COUNTERS": COUNTERS}


def source(plan: SkinnyPlan, dtype: str) -> str:
    """Defines, then vec16.cuh for the data type, then the template."""
    consts = defines(plan, dtype)
    head = "".join(f"#define {name} {int(value)}\n" for name, value in consts.items())
    return head + vec16_source(consts["DT"]) + (KERNEL_DIR / SOURCE_FILE).read_text(encoding="utf-8")


def render(plan: SkinnyPlan, m: int, n: int, k: int, dtype: str) -> Build:
    """The build for one plan: the GEMM launch (``a``, ``w``, ``r``, ``out``, ``ws``, M, N, K), with
    fusion off the in-place add on ``out``; ``ws`` is scratch of (split_k, M, N) fp32 (one element
    when split_k is 1, never read then)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    launches = [Launch(KERNEL, plan.grid, plan.block, 0, ("a", "w", "r", "out", "ws", m, n, k))]
    functions = [KERNEL]
    if not plan.fuse:
        add_grid = max(1, min(_cdiv(_cdiv(m * n, 8), ADD_THREADS), 1024))
        launches.append(Launch(ADD_KERNEL, (add_grid, 1, 1), (ADD_THREADS, 1, 1), 0, ("out", "r", m, n)))
        functions.append(ADD_KERNEL)
    ws_shape = (plan.split_k, m, n) if plan.split_k > 1 else (1,)
    return Build(source=source(plan, dtype), functions=tuple(functions), launches=tuple(launches),
                 options=("--std=c++17",), info=plan.info(),
                 scratch=(Buffer("ws", ws_shape, "fp32", "scratch"),))


def cost_us(plan: SkinnyPlan, m: int, n: int, k: int, dtype: str, bandwidth_bytes_per_s: float,
            sm_count: int) -> float:
    """A predicted time in microseconds (a search-order prior for a tuner, not a measurement):
    DRAM bytes (W once, A, R and out, the split-K partials written and read back) over the
    bandwidth, divided by an efficiency that falls where the grid leaves SMs idle or holds too
    few bytes in flight for the memory latency, plus the launch and the reduction's tail."""
    item = 2
    dram = (n * k + m * k + 2 * m * n) * item
    if plan.split_k > 1:
        dram += 2 * plan.split_k * m * n * 4
    # A is re-read from L2 by every CTA column: counted at a third of its DRAM cost
    dram += (plan.grid[0] - 1) * m * k * item / 3
    ctas = plan.grid[0] * plan.grid[1] * plan.grid[2]
    fill = min(1.0, ctas / sm_count)
    _, rpw, _ = warp_layout(plan.bn, plan.warps)
    resident = min(ctas, sm_count * _ctas_per_sm(plan))
    in_flight = resident * plan.warps * plan.stages * rpw * 16 * CHUNK * item
    latency_s = 1.0e-6
    depth = min(1.0, in_flight / (bandwidth_bytes_per_s * latency_s))
    waves = _cdiv(ctas, sm_count * _ctas_per_sm(plan))
    t = dram / bandwidth_bytes_per_s / max(1e-3, fill * depth) * 1e6
    t *= 1.0 + 0.05 * (waves - 1)
    return t + 2.0 + (1.0 if plan.split_k > 1 else 0.0)


def _ctas_per_sm(plan: SkinnyPlan) -> int:
    """Resident CTAs per SM by registers (estimate rounded up to 8) and a 64-warp SM."""
    regs = 8 * math.ceil(register_estimate(plan.bm, plan.bn, plan.stages, plan.warps) / 8)
    return max(1, min(65536 // (regs * 32 * plan.warps), 64 // plan.warps, 32))
