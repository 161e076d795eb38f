"""``Sm90Plan``: every decision of one Hopper build, made once (``plan``, ``_plan_swapped``), and
``check``, the constraints of a task's knobs before anything is compiled."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kernels.sm90.choices import (
    swap_n_fastest,
    use_cluster,
    use_half_tail,
    use_pingpong,
    use_raster_group,
    use_raster_m,
    use_tail_shift,
)
from kernels.sm90.constants import check_decode_cluster, defines
from kernels.sm90.model import half_tail_whole, plan_schedule
from kernels.sm90.smem import (
    MAX_STAGES,
    epi_shared_needed,
    pipelining_options,
    ring_stage_options,
    smem_bytes,
)
from kernels.sm90.tiles import (
    DECODE_TILES,
    DTYPES,
    ITEMSIZE,
    PINGPONG_TILES,
    _cdiv,
    _dtype,
    _k16,
    _mnk,
    _tile_name,
    bk_of,
    cluster_shape,
    k_padded,
    kernel_frame_error,
    multicast_operand,
    parse_block_size,
    stage_count,
    swapped,
    tiles_for,
)
from kernels.spec import DeviceLimits, Tile, Violation


def check(task: Any, limits: DeviceLimits) -> list[Violation]:
    """Every constraint of this path, before compiling."""
    out: list[Violation] = []
    dtype = _dtype(task.dtype)
    if tuple(limits.compute_capability) != (9, 0):
        out.append(Violation("device", limits.profile or str(limits.compute_capability),
                             "the wgmma/TMA path needs compute capability 9.0 (sm_90a)",
                             "cc 9.0"))
    if dtype not in DTYPES:
        out.append(Violation("dtype", dtype, "the Hopper path takes bf16, fp16, tf32 or fp32",
                             "bf16, fp16, tf32, fp32"))
    try:
        m, n, k = _mnk(task.shape)
    except ValueError as exc:
        return [*out, Violation("shape", task.shape, str(exc))]
    for name, val in (("m", m), ("n", n), ("k", k)):
        if val < 1:
            out.append(Violation(f"shape.{name}", val, "must be positive"))
    for name, val in (("n", n), ("k", k)):
        if val % 8 and not (name == "k" and ITEMSIZE.get(dtype, 4) == 2):
            out.append(Violation(f"shape.{name}", val,
                                 "TMA needs 16-byte row strides: a multiple of 8 elements"
                                 + (" (16-bit data pads K; N cannot be padded in place)" if name == "n" else ""),
                                 "multiple of 8"))
    if m * n >= 2**31 or m * k >= 2**31 or n * k >= 2**31:
        out.append(Violation("shape", f"{m}x{n}x{k}", "indices are 32-bit in the tile scheduler",
                             "each operand < 2**31 elements"))
    block = getattr(task, "block_size", None) or "128x256"
    stages = getattr(task, "memory_pipelining", None)
    stages = 3 if stages is None else stages
    try:
        parse_block_size(block, dtype if dtype in DTYPES else None)
    except ValueError as exc:  # the fix lists the tiles that fit: the message need not list them all
        text = str(exc)
        if text.startswith("unknown tile"):
            return [*out, Violation("block_size", block,
                                    f"unknown tile {block!r} for the Hopper path (tui kernels lists its tiles)")]
        return [*out, Violation("block_size", block, text, ", ".join(tiles_for(dtype)))]
    if (frame := kernel_frame_error(block)) is not None:
        return [*out, Violation("block_size", block, frame, ", ".join(tiles_for(dtype)))]
    if stages == 1 or stages < 0 or stages > MAX_STAGES:
        out.append(Violation("memory_pipelining", stages, f"must be 0 (off) or 2..{MAX_STAGES}",
                             f"0, 2..{MAX_STAGES}"))
        return out
    dt = dtype if dtype in DTYPES else "bf16"
    need = smem_bytes(block, stages, dt)
    ring = ring_stage_options(limits, dt, block, task.shape)
    if need > limits.shared_memory_per_block_bytes and stages not in ring:
        fits = pipelining_options(limits, dt, block, task.shape)
        deeper = (f" ({', '.join(map(str, ring))}: the epilogue tile staged in the ring)" if ring else "")
        out.append(Violation(
            "memory_pipelining", stages,
            f"{need} bytes of shared memory for {block} x {stage_count(stages)} stages; "
            f"fits: {', '.join(map(str, fits)) or 'none'}{deeper}",
            f"{limits.shared_memory_per_block_bytes} bytes per block"))
    return out


@dataclass(frozen=True)
class Sm90Plan:
    """Every decision of one Hopper build, made once by ``plan``; ``render`` only writes it out.
    Sizes and the tile are in the kernel's frame: a swapped plan (``swapped_rows`` > 0, a problem
    tile of R x C built as out^T = W A^T) holds the problem's N as ``m`` and its M as ``n``."""

    m: int
    n: int
    k: int
    dtype: str
    block_size: str
    """The kernel-frame tile name (a swapped R x C tile is CxR here)."""
    stages: int
    fuse: bool
    pingpong: bool
    epi_shared: bool
    cluster: tuple[int, int]
    streamk: bool
    grid: int
    dp_tiles: int
    half_tail: bool
    epi_ring: bool
    epi_ring_reuse: bool
    raster_m: bool
    raster_group: int
    tail_shift: bool
    split_hi: bool
    promote: int | None
    swapped_rows: int = 0
    k_pad: int = 0
    """K padded to whole 16-byte rows (``k_padded``) where the problem's K is not; 0: no padding."""
    pairs: bool = False
    """Launched in clusters of two CTAs that share no tile (``multicast=none``): the grid even."""

    @property
    def tile(self) -> Tile:
        """The tile in the problem's frame (rows along M x columns along N x BK)."""
        bm, bn, _ = parse_block_size(self.block_size, self.dtype)
        if self.swapped_rows:
            return Tile(self.swapped_rows, bm, bk_of(self.dtype))
        return Tile(bm, bn, bk_of(self.dtype))

    @property
    def decode(self) -> bool:
        """A swapped decode tile (``DECODE_TILES``): W streamed once, launched dependent."""
        return bool(self.swapped_rows) and f"{self.tile.m}x{self.tile.n}" in DECODE_TILES

    @property
    def tiles(self) -> int:
        bm, bn, _ = parse_block_size(self.block_size, self.dtype)
        return _cdiv(self.m, bm) * _cdiv(self.n, bn)

    def schedule(self) -> dict[str, Any]:
        """The schedule choices as a task names them (``SCHEDULE_KNOBS``)."""
        return {"consumers": "pingpong" if self.pingpong else "cooperative",
                "cluster": 2 if self.pairs else self.cluster[0] * self.cluster[1],
                "raster": ("group" if self.raster_group else "m" if self.raster_m else "n")
                if not self.swapped_rows else
                ("group" if self.raster_group else "n" if self.raster_m else "m"),
                "split": ("halves" if self.half_tail else "streamk" if self.dp_tiles < self.tiles else "off"),
                **({"multicast": self.multicast} if self.cluster != (1, 1) or self.pairs else {})}

    @property
    def multicast(self) -> str:
        """The problem's operand a cluster shares ('w' or 'a'; 'none' for pairs; '' unclustered)."""
        return "none" if self.pairs else multicast_operand(self.cluster, bool(self.swapped_rows))


def plan(task: Any, limits: DeviceLimits, block_size: str, stages: int,
         fuse: bool | None = None, streamk: bool | None = None,
         schedule: tuple[int, int] | None = None, pingpong: bool | None = None,
         cluster: Any = None, split_hi: bool | None = None,
         promote: int | None = None, raster_m: bool | None = None,
         raster_group: int | None = None, epi_ring: bool | None = None,
         epi_shared: bool | None = None,
         tail_shift: bool | None = None, half_tail: bool | None = None,
         pairs: bool = False, _swapped: bool = False) -> Sm90Plan:
    """Decide one configuration: every argument left None is the engine's choice for these knobs
    and this shape. ``fuse`` defaults to ``task.fusion`` (True when absent):
    off = the GEMM-only kernel (FUSE=0) then ``residual_add_inplace`` on ``out``. ``streamk``
    (default True) compiles the stream-K tail in (the schedule still runs purely data-parallel
    where ``plan_schedule`` finds no gain); ``schedule`` = (grid, dp_tiles)
    overrides ``plan_schedule`` (benchmarks; any value is correct, the kernel clamps it);
    ``pingpong`` (default ``use_pingpong``) picks the consumer schedule; ``cluster`` (default
    ``use_cluster``) 2 or (2, 1) runs 2x1 clusters sharing W by TMA multicast, (1, 2) 1x2 clusters
    sharing A (data-parallel only); ``pairs`` (a tuner's choice, never a default: ADR-0011)
    launches clusters of two that share no tile, the grid made even (data-parallel, unclustered).
    fp32 (3xTF32) first launches ``tf32_split`` on A and W into scratch buffers (``Build.scratch``:
    a_lo, w_lo, and with ``split_hi``, default False, a_hi, w_hi); ``promote``
    see ``defines``, as ``raster_m`` and ``raster_group`` (the
    tile order; defaults ``use_raster_m``, ``use_raster_group``; an explicit ``raster_m=True``
    numbers M-fastest, not grouped). ``epi_ring`` (default: exactly where the stage count fits only
    without an epilogue buffer, 16-bit cooperative) stages the epilogue tile in the ring and makes
    the schedule data-parallel; the ring is reused where a CTA gets more than one tile.
    ``tail_shift`` (default ``use_tail_shift``) moves a last tile that reaches past M or N back to
    end there (``TAIL_SHIFT``). ``half_tail`` (default ``use_half_tail``) runs the last round of
    tiles, where it is at most half full, as 64-row halves on twice the CTAs (``HALF_TAIL``; a
    ``schedule``'s dp_tiles then counts the tiles run whole). A ``SWAP_TILES`` block size plans the
    transposed product (``_plan_swapped``; ``cluster`` in the kernel's frame, for measurements)."""
    if swapped(block_size) and not _swapped:
        return _plan_swapped(task, limits, block_size, stages, fuse, 1 if cluster is None else cluster,
                             raster_m, raster_group, epi_ring, pairs)
    if not _swapped and (frame := kernel_frame_error(block_size)) is not None:
        raise ValueError(frame)
    m, n, k = _mnk(task.shape)
    dtype = _dtype(task.dtype)
    if fuse is None:
        fuse = bool(getattr(task, "fusion", True))
    bm, bn, consumers = parse_block_size(block_size, dtype)
    k16 = _k16(k, dtype)
    streamk_forced = streamk is not None
    if streamk is None:
        streamk = True
    if pingpong is None:
        pingpong = use_pingpong(limits, block_size, stages, dtype, task.shape)
    if epi_shared is None:  # the engine's choice: only where the stage count needs it
        epi_shared = bool(pingpong) and epi_shared_needed(limits, block_size, stages, dtype)
    if pingpong and (_tile_name(block_size) not in PINGPONG_TILES
                     or smem_bytes(block_size, stages, dtype, True, epi_shared=bool(epi_shared))
                     > limits.shared_memory_per_block_bytes):
        raise ValueError(f"ping-pong does not fit {block_size} with {stage_count(stages)} stages"
                         + ("" if epi_shared else " and an epilogue buffer per consumer"))
    if cluster is None:
        cluster = use_cluster(limits, block_size, stages, dtype, task.shape)
    cm, cn = cluster_shape(cluster)
    cluster = cm * cn  # CTAs per cluster
    if cluster > 1:
        streamk = False
    if pairs:  # data-parallel unless asked otherwise, which ``defines`` refuses
        streamk = streamk and streamk_forced
        half_tail = bool(half_tail)
    if split_hi is None:
        split_hi = False
    tiles = -(-m // bm) * -(-n // bn)
    blocks = tiles  # the schedule's units: tiles, or with a cluster blocks of cm x cn tiles
    if cluster > 1:
        # whole clusters; the kernel's tile unit is a block of cm x cn tiles
        blocks = groups = _cdiv(m, bm * cm) * _cdiv(n, bn * cn)
        if schedule is not None:
            groups = min(groups, max(1, int(schedule[0]) // cluster))
        grid = cluster * max(1, min(groups, limits.sm_count // cluster))
        dp_tiles = tiles
    elif schedule is None or not streamk:
        grid, dp_tiles = plan_schedule(m, n, k16, block_size, limits.sm_count, streamk)
        if streamk and dp_tiles >= tiles and not streamk_forced and ITEMSIZE[dtype] == 2:
            # the plan splits nothing: compile the data-parallel kernel, the same schedule without
            # the stream-K code, which is faster (ADR-0007). 16-bit data only: fp32 (3xTF32)
            # measured slower without it
            streamk = False
    else:
        grid, dp_tiles = max(1, int(schedule[0])), int(schedule[1])
    dp_grid = max(1, min(tiles, limits.sm_count))  # the data-parallel grid, one tile per CTA a round
    if half_tail is None:  # the engine's choice; it replaces a planned stream-K tail (not a forced one)
        half_tail = schedule is None and use_half_tail(
            block_size, dtype, bool(pingpong), (cm, cn), streamk_forced and streamk, bool(epi_shared),
            tiles, dp_grid)
    if half_tail:
        if streamk_forced and streamk:
            raise ValueError("half_tail: a data-parallel schedule (streamk=False): the halves replace a stream-K tail")
        streamk = False
        # schedule's dp_tiles: the tiles run whole
        grid, dp_tiles = ((dp_grid, half_tail_whole(tiles, dp_grid) or tiles) if schedule is None
                          else (max(1, int(schedule[0])), int(schedule[1])))
    if epi_ring is None:  # the engine's choice: only where the stage count needs it
        epi_ring = not pingpong and stages in ring_stage_options(limits, dtype, block_size, task.shape)
    epi_ring_reuse = False
    if epi_ring:
        # data-parallel only; where a CTA gets more than one tile (block of tiles) the ring's
        # slots come back after each epilogue (EPI_RING_REUSE)
        if cluster == 1 and dp_tiles < tiles:
            grid, dp_tiles = plan_schedule(m, n, k16, block_size, limits.sm_count, False)
        streamk = False
        epi_ring_reuse = blocks > grid // cluster
    if pairs and grid % 2:
        grid += 1  # whole pairs: the last CTA finds no tile
    if raster_group is None:
        raster_group = 0 if raster_m else use_raster_group(block_size, tiles, grid, dp_tiles, cluster,
                                                           bool(pingpong), dtype)
    if raster_m is None:
        raster_m = not raster_group and use_raster_m(block_size, tiles, grid, dp_tiles, cluster, dtype)
    if tail_shift is None:
        tail_shift = use_tail_shift(m, n, block_size, dtype, streamk)
    kp = k_padded(k, dtype)
    p = Sm90Plan(m=m, n=n, k=k, dtype=dtype, block_size=_tile_name(block_size), stages=int(stages),
                 fuse=bool(fuse), pingpong=bool(pingpong), epi_shared=bool(epi_shared), cluster=(cm, cn),
                 streamk=bool(streamk), grid=int(grid), dp_tiles=int(dp_tiles), half_tail=bool(half_tail),
                 epi_ring=bool(epi_ring), epi_ring_reuse=bool(epi_ring_reuse), raster_m=bool(raster_m),
                 raster_group=int(raster_group), tail_shift=bool(tail_shift), split_hi=bool(split_hi),
                 promote=promote, k_pad=kp if kp != k else 0, pairs=pairs)
    defines_of(p)  # every combination the kernel cannot compile is refused here, not at render
    smem = smem_bytes(p.block_size, p.stages, dtype, p.pingpong, p.epi_ring, p.epi_shared)
    if smem > limits.shared_memory_per_block_bytes:  # would fail at launch (the knob checks refuse it first)
        raise ValueError(f"{block_size} with {stage_count(stages)} stages needs {smem} bytes of shared memory "
                         f"({'ring-staged epilogue' if epi_ring else 'with its epilogue buffer'}); a block "
                         f"gets {limits.shared_memory_per_block_bytes}")
    return p


def defines_of(p: Sm90Plan) -> dict[str, int]:
    """``defines`` for a plan (kernel frame)."""
    return defines(p.block_size, p.stages, p.dtype, p.fuse, streamk=p.streamk, pingpong=p.pingpong,
                   cluster=p.cluster, split_hi=p.split_hi, promote=p.promote, raster_m=p.raster_m,
                   raster_group=p.raster_group, epi_ring=p.epi_ring, epi_shared=p.epi_shared,
                   epi_ring_reuse=p.epi_ring_reuse, tail_shift=p.tail_shift, half_tail=p.half_tail,
                   pairs=p.pairs)


def _plan_swapped(task: Any, limits: DeviceLimits, block_size: str, stages: int,
                  fuse: bool | None, cluster: Any = 1, raster_m: bool | None = None,
                  raster_group: int | None = None, epi_ring: bool | None = None,
                  pairs: bool = False) -> Sm90Plan:
    """A ``SWAP_TILES`` tile (R x C) as the transposed product (``SWAP_AB``): the kernel computes
    out^T = W A^T, its M the problem's N (C rows of W a tile, the wgmma's A operand) and its N the
    problem's M (R rows of A, the wgmma's B operand); R and out keep their [M, N] layout, staged and
    stored as R x 64 boxes. Cooperative, data-parallel, 16-bit data; fusion off runs the GEMM-only
    kernel and then ``residual_add_inplace`` as unswapped; ``cluster`` as ``plan``'s in the kernel's
    frame (2: CTAs along the problem's N share A's box by multicast; (1, 2): CTAs along its M share
    W's; both measured slower where tuned, ADR-0007), and so
    are ``pairs``, ``raster_m`` and ``raster_group`` (``raster_m=True``: the problem's N blocks fastest; by
    default where ``swap_n_fastest`` says so, else the inner build's order)."""
    from types import SimpleNamespace

    m, n, k = _mnk(task.shape)
    dtype = _dtype(task.dtype)
    if fuse is None:
        fuse = bool(getattr(task, "fusion", True))
    rows, cols, _ = parse_block_size(block_size, dtype)
    check_decode_cluster(block_size, cluster)
    if raster_m is None and raster_group is None and swap_n_fastest(m, n, rows, limits.sm_count, cols):
        raster_m = True  # the kernel's M blocks (the problem's N blocks) fastest
    if epi_ring is None:  # as plan's: only where the stage count needs it
        epi_ring = stages in ring_stage_options(limits, dtype, block_size, task.shape)
    t = SimpleNamespace(shape={"m": n, "n": m, "k": k}, dtype=dtype, fusion=fuse)
    inner = plan(t, limits, f"{cols}x{rows}", stages, fuse=fuse, pingpong=False, cluster=cluster, streamk=False,
                 tail_shift=False, half_tail=False, epi_ring=epi_ring, raster_m=raster_m,
                 raster_group=raster_group, pairs=pairs, _swapped=True)
    return replace(inner, swapped_rows=rows)
