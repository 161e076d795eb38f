"""The decode path's defaults: every knob a request leaves unset, decided from the shape and the
device (``plan``).

Defaults (``plan``): BM the fewest tokens >= M. Where bulk copies apply (compute capability >= 9.0,
K % 8 == 0): w_bulk 2 with ``tma_schedule``'s tile, warps, ring and split-K. Elsewhere the register
ring: 4 warps; a_smem 0 (with ``a_smem_rule``, a_smem 1 where BM >= ``A_SMEM_MIN_BM``, K %
8 == 0 and its registers and shared memory fit: ``default_a_smem``). With a_smem 0: BN
(widest of 64, 32, 16 with BN >= BM / 2) and split-K (least) so that the grid has about 2 CTAs per
SM (``CTAS_PER_SM`` x limits.sm_count) while each warp keeps >= ``MIN_WARP_CHUNKS`` chunks of K and
the split-K partials' traffic stays under ``SPLIT_TRAFFIC`` of W. With a_smem 1: BN (128, 64, 32,
16) and split-K with the least L2 traffic beyond W (A once per CTA column, the partials weighted
by ``SPLIT_WEIGHT``) among grids of one wave that keep every SM busy and enough of W in flight
(``_smem_schedule``). ``DEFAULT_STAGES`` stages, fewer where the register budget demands.

Why A in shared memory at M >= 16. With a_smem 0 the L2 -> SM traffic is W plus A once per
row-group slot of every CTA column: at M = 32, N = K = 5120 with 32x16 tiles, 105 MB of A against
52 MB of W, ~157 MB in the 26.4 us the H200 measured (~6 TB/s: the L2's bandwidth, not the
DRAM's). A copy per CTA, shared by all its warps, cuts A's share to M / BN of W's bytes, so wide
tiles (BN 64, 128) pay; they need split-K to fill the GPU, whose partials cost traffic too (hence
the balance in ``_smem_schedule``). Work per warp: with 4 warps a 128-row tile gives each warp 2
row groups, so each B fragment read from shared memory feeds 2 MMAs; at 1 row group (BN <= 64)
the reads are still well within shared memory's bandwidth (BM = 64: 8 x 512-byte reads a chunk
per 1 KB of W, ~40 % of 128 B/clock at the SM's share of 3.2 TB/s), so no separate knob for it.
"""

from __future__ import annotations

from kernels.skinny.model import _bulk_resident, _resident_ctas
from kernels.skinny.tiles import (
    A_SMEM_OPTIONS,
    BM_OPTIONS,
    BULK_K_OPTIONS,
    BULK_MIN_CC,
    CHUNK,
    DTYPES,
    MAX_M,
    REGISTER_BUDGET,
    SPLIT_K_OPTIONS,
    STAGE_OPTIONS,
    W_BULK_OPTIONS,
    WARPS_OPTIONS,
    SkinnyPlan,
    _cdiv,
    _smem,
    bulk_applies,
    bulk_stages_that_fit,
    load_width,
    parse_block_size,
    register_estimate,
    smem_bytes,
    warp_layout,
)
from kernels.spec import DeviceLimits

W_BULK_TMA = 2
"""The w_bulk the planner takes where bulk copies apply (``default_w_bulk``): TMA boxes, faster than
the register ring at every decode shape probed on the H200 (ADR-0003)."""
DEFAULT_BULK_K = 128
A_SMEM_MIN_BM = 16
"""The default takes a_smem 1 from this BM (BM = 8: one fragment a chunk, A is 1/8 of a row group's
loads, and M = 1, 8 ran faster than cuBLAS as they are)."""
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
SPLIT_WEIGHT = 2.0
"""With a_smem 1 the default weighs the split-K partials' bytes (fp32, written and read back) this
much above A's (bf16, read only, from L2): the partials may reach DRAM and end in the last CTA's
serial reduction."""
SPLIT_FIXED_BYTES = 3.2e6
"""With a_smem 1 the default counts a split-K grid this many bytes more besides its partials: the
fence, the counter and the last CTA's reduction, ~1 us at ~3.2 TB/s (at M = 1 on the H200 a
split-4 grid ran 1.4 us behind one without split-K)."""
IN_FLIGHT_PER_SM = 32 * 1024
"""With a_smem 1 the default keeps at least this many bytes of W in flight per SM (resident CTAs x
warps x stages x row groups x 1 KB): ~3.2 TB/s x ~1.3 us of latency over 132 SMs."""
DEFAULT_BN_SMEM = (128, 64, 32, 16)
"""BN tried for the a_smem 1 default: A's L2 traffic falls as 1 / BN."""
TMA_NARROW_BM = 16
"""Up to this BM the w_bulk 2 default takes ``TMA_NARROW`` (BN, warps), above it ``TMA_WIDE``."""
TMA_NARROW = (16, 4)
TMA_WIDE = (128, 8)
"""The w_bulk 2 default's (BN, warps): narrow tiles make many CTAs, each W box read once, where A is
small (BM <= 16); at BM 32 and 64 wide tiles with 8 warps, A read once per 128 rows (H200 probe,
ADR-0003: 16x16 fastest at M = 1-16, 64x128 with 8 warps and split-K at M = 33)."""
TMA_FILL = 0.9
"""The w_bulk 2 default's split-K counts a grid that busies this share of the SMs as filling them."""
TMA_MIN_RESIDENT = 2
"""The w_bulk 2 default's ring: the deepest of ``STAGE_OPTIONS`` that keeps this many CTAs per SM."""


def _fits(bm: int, bn: int, stages: int, warps: int, k: int, a_smem: int) -> bool:
    """The register rule of one variant (a_smem 1 needs K % 8 == 0 besides)."""
    if a_smem and k % 8:
        return False
    return register_estimate(bm, bn, stages, warps, a_smem) <= REGISTER_BUDGET[load_width(k)]


def stages_that_fit(bm: int, bn: int, warps: int, k: int, a_smem: int | None = None) -> list[int]:
    """The ``STAGE_OPTIONS`` whose register estimate is within the budget for K's load width, for
    the given a_smem, or (None) for the variant ``plan`` takes by default at each stage count
    (``default_a_smem``; shared memory not counted: it fits every device of cc >= 8.0)."""
    if a_smem is None:
        return [s for s in STAGE_OPTIONS
                if _fits(bm, bn, s, warps, k, default_a_smem(bm, bn, s, warps, k))]
    return [s for s in STAGE_OPTIONS if _fits(bm, bn, s, warps, k, a_smem)]


def default_bm(m: int) -> int:
    """The fewest tokens per CTA that hold M (one CTA row along M up to 64)."""
    return next((bm for bm in BM_OPTIONS if bm >= m), MAX_M)


def default_stages(bm: int, bn: int, warps: int, k: int, a_smem: int | None = None) -> int:
    """``DEFAULT_STAGES`` chunks in flight, fewer where the registers demand (``stages_that_fit``:
    a_smem None is the variant ``plan`` takes by default)."""
    fits = [s for s in stages_that_fit(bm, bn, warps, k, a_smem) if s <= DEFAULT_STAGES]
    return max(fits) if fits else STAGE_OPTIONS[0]


def default_a_smem(bm: int, bn: int, stages: int, warps: int, k: int,
                   limits: DeviceLimits | None = None, rule: bool = False) -> int:
    """1 where ``rule`` is on (``plan``'s ``a_smem_rule``), BM >= ``A_SMEM_MIN_BM``, K % 8 == 0, the
    a_smem 1 registers fit at ``stages`` and (given ``limits``) its static shared memory fits; else
    0. The rule is off by default: on the H200 (ADR-0003, single-launch probe) the best a_smem 1
    build was slower than the best a_smem 0 one at every shape tried (M = 32, N = K = 5120: 35.4
    against 26.5 us; M = 16: 31.9 / 21.7; M = 64, N = K = 4096: 28.0 / 26.2); a_smem stays a
    schedule choice the tuner tries."""
    if not rule or bm < A_SMEM_MIN_BM or k % 8 or not _fits(bm, bn, stages, warps, k, 1):
        return 0
    if limits is not None and _smem(bm, bn, warps, 1) > _smem_limit(limits):
        return 0
    return 1


def _smem_limit(limits: DeviceLimits) -> int:
    """Static shared memory a CTA may use: 48 KB, or the device's per-block limit if lower."""
    return min(48 * 1024, limits.shared_memory_per_block_bytes)


def _max_split(m: int, k: int, n_rows: int, warps: int) -> int:
    """The most split-K the default takes: each warp keeps >= MIN_WARP_CHUNKS chunks, and the
    partials' traffic (split_k x M x N x 8 bytes) stays under SPLIT_TRAFFIC of W (N x K x 2)."""
    _, _, kw = warp_layout(n_rows, warps)
    by_chunks = _cdiv(k, CHUNK) // (MIN_WARP_CHUNKS * kw)
    by_traffic = int(SPLIT_TRAFFIC * 2 * k / (8 * m))  # split_k * M * N * 8 <= SPLIT_TRAFFIC * N * K * 2
    return max(1, min(by_chunks, by_traffic))


def default_schedule(m: int, n: int, k: int, bm: int, warps: int, sm_count: int,
                     bn: int | None = None, a_smem: int = 0) -> tuple[int, int]:
    """(BN, split_k). a_smem 0: the least split-K (its partials cost traffic and a reduction), then
    the widest tile of ``DEFAULT_BN`` (or ``bn``), that give >= CTAS_PER_SM CTAs per SM within
    ``_max_split``; where none does, the most CTAs. On the H200 at M = 1, N = K = 4096, 8x16
    without split-K (256 CTAs) ran 15.0 us against 8x64 split 4 (also 256 CTAs) 16.4 us
    (ADR-0003). a_smem 1: ``_smem_schedule``."""
    if a_smem:
        picked = _smem_schedule(m, n, k, bm, warps, sm_count, bn)
        if picked is not None:
            return picked
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


def _smem_schedule(m: int, n: int, k: int, bm: int, warps: int, sm_count: int,
                   bn: int | None = None) -> tuple[int, int] | None:
    """(BN, split_k) for a_smem 1: among ``DEFAULT_BN_SMEM`` (or ``bn``) x split-K within
    ``_max_split`` whose grid keeps every SM busy (>= sm_count CTAs), runs in one wave (<= the CTAs
    the registers let the SMs hold at the default stages) and keeps >= ``IN_FLIGHT_PER_SM`` bytes
    of W in flight per SM, the least traffic beyond W: A once per CTA column plus, with split-K,
    ``SPLIT_WEIGHT`` x the partials' bytes and ``SPLIT_FIXED_BYTES`` (ties: less split-K, then the
    wider tile). None where no grid qualifies (``default_schedule`` then falls back to the a_smem
    0 rule). A guess from one measurement (M = 32 was bound by L2, not DRAM): the GPU probe's
    table decides."""
    best: tuple[float, int, int, int] | None = None
    for b in (bn,) if bn else DEFAULT_BN_SMEM:
        stages = default_stages(bm, b, warps, k, 1)
        _, rpw, _ = warp_layout(b, warps)
        resident = sm_count * _resident_ctas(register_estimate(bm, b, stages, warps, 1), warps)
        cap = _max_split(m, k, b, warps)
        for s in SPLIT_K_OPTIONS:
            if s > cap:
                break
            ctas = _cdiv(n, b) * _cdiv(m, bm) * s
            in_flight = min(ctas, resident) * warps * stages * rpw * 16 * CHUNK * 2
            if not sm_count <= ctas <= resident or in_flight < IN_FLIGHT_PER_SM * sm_count:
                continue
            traffic = _cdiv(n, b) * m * k * 2 + (SPLIT_WEIGHT * 2 * s * m * n * 4 + SPLIT_FIXED_BYTES if s > 1 else 0)
            key = (traffic, s, -b, b)
            if best is None or key < best:
                best = key
    return None if best is None else (best[3], best[1])


def default_w_bulk(k: int, limits: DeviceLimits) -> int:
    """``W_BULK_TMA`` where bulk copies can build (``bulk_applies``), else 0."""
    return W_BULK_TMA if bulk_applies(k, limits) else 0


def tma_schedule(m: int, n: int, k: int, bm: int, limits: DeviceLimits, bn: int | None = None,
                 stages: int | None = None, split_k: int | None = None, bulk_k: int | None = None,
                 warps: int | None = None, mode: int = 2) -> tuple[int, tuple[int, int, int, int] | None]:
    """(warps, (BN, split_k, stages, bulk_k)) for a shared-memory ring (w_bulk ``mode``, the
    shared memory counted as that mode lays it out), the knobs given kept: BN and warps by
    BM (``TMA_NARROW``/``TMA_WIDE``), ``DEFAULT_BULK_K``, the least split-K (at most one slot of K
    per split) that busies ``TMA_FILL`` of the SMs in one wave of resident CTAs, else the least
    that busies them, and the deepest ring that keeps ``TMA_MIN_RESIDENT`` CTAs per SM and the grid
    in one wave (else the deepest that keeps them, else the deepest that fits): at 16 x 8192 x 8192
    on the H200 16x16 with 8 slots (3 CTAs per SM, 512 CTAs in 1.3 waves) ran 43.7 us, with 6
    slots (4 per SM, one wave) 37.6. None for the knobs where no ring fits."""
    nb, nw = TMA_NARROW if bm <= TMA_NARROW_BM else TMA_WIDE
    warps = warps or nw
    bn = bn or nb
    bk = bulk_k or DEFAULT_BULK_K
    fit = bulk_stages_that_fit(bm, bn, warps, bk, limits, mode)
    if stages is not None and stages not in fit:
        return warps, None
    if not fit:
        return warps, None
    cap = max(1, _cdiv(k, bk))
    splits = [s for s in SPLIT_K_OPTIONS if s <= cap] if split_k is None else [split_k]
    busy = TMA_FILL * limits.sm_count

    def grid(st: int) -> tuple[int, int, int]:
        """(split-K, CTAs, resident CTA slots) at ring depth st."""
        slots = limits.sm_count * _bulk_resident(bm, bn, warps, st, bk, limits, mode)
        ctas = {s: _cdiv(n, bn) * _cdiv(m, bm) * s for s in splits}
        sp = next((s for s in splits if busy <= ctas[s] <= slots),
                  next((s for s in splits if ctas[s] >= busy), splits[-1]))
        return sp, ctas[sp], slots

    if stages is None:
        deep = [st for st in fit if _bulk_resident(bm, bn, warps, st, bk, limits, mode) >= TMA_MIN_RESIDENT]
        one_wave = [st for st in deep if grid(st)[1] <= grid(st)[2]]
        stages = max(one_wave or deep or fit)
    split_k = grid(stages)[0]
    return warps, (bn, split_k, stages, bk)


def plan(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, block_size: str | None = None,
         stages: int | None = None, warps: int | None = None, split_k: int | None = None,
         fuse: bool = True, a_smem: int | None = None, w_bulk: int | None = None,
         bulk_k: int | None = None, a_smem_rule: bool = False) -> SkinnyPlan:
    """Resolve every unset knob from the hardware (``default_bm``, ``default_schedule`` against
    limits.sm_count, ``default_stages``, ``default_a_smem``) and the launch geometry; ValueError
    naming the knob for a value this path cannot run (``check`` lists every problem). a_smem None
    resolves as ``check`` resolves it: ``default_a_smem`` of the final tile, stages and warps, by
    its rule where ``a_smem_rule`` (off by default)."""
    if min(m, n, k) < 1:
        raise ValueError(f"shape {m}x{n}x{k}: every dimension must be >= 1")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}: the skinny path takes {', '.join(DTYPES)}")
    if m > MAX_M:
        raise ValueError(f"shape.m={m}: the skinny path is for M <= {MAX_M}")
    warps_req = warps
    if warps is None:
        warps = DEFAULT_WARPS
    if warps not in WARPS_OPTIONS:
        raise ValueError(f"schedule.warps={warps}: one of {WARPS_OPTIONS}")
    if split_k is not None and split_k not in SPLIT_K_OPTIONS:
        raise ValueError(f"schedule.split_k={split_k}: one of {SPLIT_K_OPTIONS}")
    if stages is not None and stages not in STAGE_OPTIONS:
        raise ValueError(f"memory_pipelining={stages}: one of {STAGE_OPTIONS}")
    if a_smem is not None and a_smem not in A_SMEM_OPTIONS:
        raise ValueError(f"schedule.a_smem={a_smem}: one of {A_SMEM_OPTIONS}")
    if a_smem == 1 and k % 8:
        raise ValueError(f"schedule.a_smem={a_smem}: A in shared memory needs K % 8 == 0 (K = {k})")
    if w_bulk is not None and w_bulk not in W_BULK_OPTIONS:
        raise ValueError(f"schedule.w_bulk={w_bulk}: one of {W_BULK_OPTIONS}")
    if w_bulk == 0 and bulk_k is not None:
        raise ValueError(f"schedule.bulk_k={bulk_k}: slots of K are for schedule.w_bulk = 1 or 2 only")
    if bulk_k is not None and bulk_k not in BULK_K_OPTIONS:
        raise ValueError(f"schedule.bulk_k={bulk_k}: one of {BULK_K_OPTIONS}")
    bm, bn_req = (default_bm(m), None) if block_size is None else parse_block_size(block_size)
    if w_bulk is None:
        w_bulk = 1 if bulk_k is not None else 0 if a_smem == 1 else default_w_bulk(k, limits)
    if w_bulk:
        if not bulk_applies(k, limits):
            raise ValueError(f"schedule.w_bulk={w_bulk}: bulk copies need compute capability >= "
                             f"{BULK_MIN_CC[0]}.{BULK_MIN_CC[1]} and K % 8 == 0 (K = {k}, "
                             f"cc {limits.compute_capability[0]}.{limits.compute_capability[1]})")
        if a_smem == 1:
            raise ValueError(f"schedule.a_smem={a_smem}: with schedule.w_bulk = 1 A comes through the ring (a_smem 0)")
        warps, picked = tma_schedule(m, n, k, bm, limits, bn_req, stages, split_k, bulk_k, warps_req, w_bulk)
        if picked is None:
            raise ValueError(f"memory_pipelining={stages}: no ring of {bm}x{bn_req or 'any'} with bulk_k "
                             f"{bulk_k or DEFAULT_BULK_K} fits {limits.shared_memory_per_block_bytes} bytes of "
                             f"shared memory per block")
        bn, split, st, bk = picked
        plan_ = SkinnyPlan(bm=bm, bn=bn, stages=st, warps=warps, split_k=split, fuse=bool(fuse), aligned8=True,
                           aligned2=True, grid=(_cdiv(n, bn), split, _cdiv(m, bm)), block=(32 * (warps + 1), 1, 1),
                           smem_bytes=0, w_bulk=w_bulk, bulk_k=bk)
        return SkinnyPlan(**{**plan_.__dict__, "smem_bytes": smem_bytes(plan_)})

    def resolve(variant: int) -> tuple[int, int, int]:
        """(BN, split_k, stages) for the given a_smem variant, the user's knobs kept."""
        bn, auto_split = default_schedule(m, n, k, bm, warps, limits.sm_count, bn_req, variant)
        st = stages if stages is not None else default_stages(bm, bn, warps, k, variant)
        return bn, split_k if split_k is not None else auto_split, st

    if a_smem is not None:
        bn, split, st = resolve(a_smem)
        variant = a_smem
    else:
        bn, split, st = resolve(int(bm >= A_SMEM_MIN_BM and k % 8 == 0))
        variant = default_a_smem(bm, bn, st, warps, k, limits, a_smem_rule)
        if not variant and bm >= A_SMEM_MIN_BM and k % 8 == 0:  # a_smem 1 does not fit these knobs
            bn, split, st = resolve(0)
            variant = default_a_smem(bm, bn, st, warps, k, limits, a_smem_rule)
    grid = (_cdiv(n, bn), split, _cdiv(m, bm))
    return SkinnyPlan(bm=bm, bn=bn, stages=st, warps=warps, split_k=split, fuse=bool(fuse),
                      aligned8=k % 8 == 0, aligned2=k % 2 == 0, grid=grid, block=(32 * warps, 1, 1),
                      smem_bytes=_smem(bm, bn, warps, variant), a_smem=variant)
