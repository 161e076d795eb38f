"""One configuration's compile-time constants (the kernel's #defines), validated: every
combination the kernel cannot compile is refused here."""

from __future__ import annotations

from typing import Any

from kernels.sm90 import model
from kernels.sm90.choices import half_tail_fits
from kernels.sm90.smem import MAX_STAGES
from kernels.sm90.tiles import (
    DECODE_TILES,
    DT_CODE,
    DTYPES,
    ITEMSIZE,
    PINGPONG_TILES,
    SPLIT_N_TILES,
    _dtype,
    _tile_name,
    bk_of,
    cluster_shape,
    parse_block_size,
    promote_fits,
    stage_count,
    swapped,
)

CLUSTER_DTYPES = ("bf16", "fp16", "tf32")
"""Clusters are compiled for these only: fp32's three-product producer spills a register in the
ping-pong cluster build (the producer warpgroup keeps 40), and clusters measured no gain anyway."""
MC_SHARE_ROWS = 8
"""A multicast box's rows are a multiple of this (one 128-byte swizzle atom is 8 rows: each CTA's
share then starts on an atom)."""
PROMOTE_K_BLOCKS = 4
"""fp32: k-blocks (of 32) the tensor cores sum from zero before the group is drained and added
into a second register accumulator by FADD; 0 = all of K in the tensor cores, whose own
accumulation is coarser than fp32 round-to-nearest (its error grows with the steps). The group
size trades accuracy against time (ADR-0007). ``promote_fits`` says where it applies."""


DECODE_DEFINES = {"STREAM_HINT": 1, "PDL_WAIT": 1}
"""What a decode tile (``DECODE_TILES``) compiles beside ``SWAP_AB``: W loaded evict-first, and the
wait that lets it be launched with programmatic dependent launch (ADR-0011)."""
DECODE_L2_PROMOTION = 128
"""Bytes a decode tile's W map promotes its row pieces to in the L2: one k-block's 128-byte row
piece, not two (256, every other map's), since each is read once and the next k-block's arrives
later (ADR-0011)."""


def check_decode_cluster(block_size: str, cluster: Any) -> None:
    """A decode tile streams W evict-first (``STREAM_HINT``), which the A-multicast loads do not:
    ValueError for a decode tile in a cluster along the kernel's N (the problem's W shared)."""
    if _tile_name(block_size) in DECODE_TILES and cluster_shape(cluster)[1] > 1:
        raise ValueError(f"tile {block_size}: a decode tile streams W evict-first, unclustered along "
                         "the problem's M (multicast=w takes the other tiles)")


def defines(block_size: str, stages: int, dtype: str, fuse: bool,
            streamk: bool = True, pingpong: bool = False, cluster: Any = 1,
            split_hi: bool = False, promote: int | None = None,
            raster_m: bool = False, raster_group: int = 0,
            epi_ring: bool = False, epi_shared: bool = False, epi_ring_reuse: bool = False,
            tail_shift: bool = False, half_tail: bool = False, pairs: bool = False) -> dict[str, int]:
    """The compile-time constants of one configuration (validated integers only). ``cluster``: see
    ``cluster_shape``; ``split_hi`` (fp32): False reads each operand's high part as the tensor cores
    see x itself (low 13 bits ignored) and writes only the low parts, True also writes hi = tf32(x)
    rounded to nearest; ``promote`` (fp32 only; default ``PROMOTE_K_BLOCKS`` where ``promote_fits``,
    else 0). Defined only when set: ``raster_m`` numbers the tiles M-fastest (adjacent CTAs share a
    W tile), ``raster_group`` = G numbers them in groups of G M blocks, M-fastest inside a group
    (``build`` chooses both by default: ``use_raster_m``, ``use_raster_group``).
    ``epi_ring`` / ``epi_shared``: the epilogue tile in the ring's freed slots / one buffer for
    both ping-pong consumers; ``epi_ring_reuse`` (with ``epi_ring``, where a CTA may get a second
    tile): the ring goes on after each epilogue, its slots returned once the store has read them.
    ``tail_shift``: a tile that reaches past M (N) and starts inside is moved back to end there.
    ``half_tail``: the tiles past the kernel's dp_tiles argument run as two 64-row halves each
    (unclustered data-parallel ping-pong, 128-row tiles, 16-bit data, two epilogue buffers).
    ``pairs``: launched in clusters of two CTAs that share no tile (``CLUSTER_LAUNCH``: the
    hardware places a pair on one GPC), unclustered otherwise, data-parallel, 16-bit data.
    A ``SWAP_TILES`` tile R x C: ``SWAP_AB`` and the kernel's frame C x R, cooperative and
    data-parallel whatever ``streamk`` and ``pingpong`` say (what ``_build_swapped`` compiles); a
    ``DECODE_TILES`` one also ``STREAM_HINT`` (W loaded evict-first) and ``PDL_WAIT`` (launched with
    programmatic dependent launch)."""
    if swapped(block_size):
        rows, cols, _ = parse_block_size(block_size, dtype)
        extra = DECODE_DEFINES if _tile_name(block_size) in DECODE_TILES else {}
        check_decode_cluster(block_size, cluster)
        return {"SWAP_AB": 1, **extra, **defines(f"{cols}x{rows}", stages, dtype, fuse, streamk=False,
                                                pingpong=False, cluster=cluster, split_hi=split_hi,
                                                promote=promote, raster_m=raster_m, raster_group=raster_group,
                                                pairs=pairs)}
    bm, bn, consumers = parse_block_size(block_size, dtype)
    cm, cn = cluster_shape(cluster)
    if cm * cn > 1 and streamk:
        raise ValueError("the cluster schedule is data-parallel only (streamk=False)")
    if cm * cn > 1 and _dtype(dtype) not in CLUSTER_DTYPES:
        raise ValueError(f"the cluster schedule takes {', '.join(CLUSTER_DTYPES)}")
    if (bn // cm) % MC_SHARE_ROWS or (bm // cn) % MC_SHARE_ROWS:
        raise ValueError(f"cluster {cm}x{cn} on {block_size}: each CTA's multicast share must be a "
                         f"multiple of {MC_SHARE_ROWS} rows")
    if cn > 1 and ITEMSIZE[_dtype(dtype)] != 2:
        raise ValueError(f"cluster {cm}x{cn} (A multicast) takes 16-bit data")
    if cn > 1 and half_tail:
        raise ValueError(f"cluster {cm}x{cn}: the halves run unclustered")
    if pingpong and _tile_name(block_size) not in PINGPONG_TILES:
        raise ValueError(f"tile {block_size}: ping-pong takes {', '.join(PINGPONG_TILES)}")
    if _dtype(dtype) not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: the Hopper path takes bf16, fp16, tf32 or fp32")
    slots = stage_count(stages)
    if not 1 <= slots <= MAX_STAGES:
        raise ValueError(f"stages {stages}: must be 0 (off) or 2..{MAX_STAGES}")
    out = {"BM": bm, "BN": bn, "BK": bk_of(dtype), "STAGES": slots, "NUM_CONSUMERS": consumers,
           "DT": DT_CODE[_dtype(dtype)], "FUSE": int(bool(fuse)), "STREAMK": int(bool(streamk)),
           "WS_TILES": model.WS_TILES, "PINGPONG": int(bool(pingpong)), "CLUSTER": cm * cn}
    if cn > 1:
        out["CLUSTER_N"] = 1
    if pairs:
        if cm * cn > 1 or streamk or half_tail:
            raise ValueError("pairs (multicast=none) share no tile: unclustered otherwise, data-parallel "
                             "(no stream-K, no halves)")
        if ITEMSIZE[_dtype(dtype)] != 2:
            raise ValueError("pairs (multicast=none): 16-bit data (the dtypes they ran with on the GPU)")
        out["CLUSTER_LAUNCH"] = 2
    if _tile_name(block_size) in SPLIT_N_TILES:
        out["SPLIT_N"] = 1
    if raster_m:
        out["RASTER_M"] = 1
    if tail_shift:
        out["TAIL_SHIFT"] = 1
    if half_tail:
        if not half_tail_fits(block_size, dtype, pingpong, (cm, cn), streamk, epi_shared):
            raise ValueError("half_tail: unclustered data-parallel ping-pong on a 128-row tile, "
                             "16-bit data, an epilogue buffer per consumer")
        out["HALF_TAIL"] = 1
    if epi_ring:
        if pingpong or streamk or ITEMSIZE[_dtype(dtype)] != 2 or slots < 2:
            raise ValueError("epi_ring: cooperative, data-parallel, 16-bit data (the dtypes it ran "
                             "with on the GPU), >= 2 stages")
        if -(-bm * bn * ITEMSIZE[_dtype(dtype)] // ((bm + bn) * 128)) > slots:
            raise ValueError(f"epi_ring: the {block_size} epilogue tile needs more than {slots} slots")
        out["EPI_RING"] = 1
        if epi_ring_reuse:
            out["EPI_RING_REUSE"] = 1
    elif epi_ring_reuse:
        raise ValueError("epi_ring_reuse: with epi_ring")
    if epi_shared:
        if not pingpong:
            raise ValueError("epi_shared: ping-pong consumers")
        out["EPI_SHARED"] = 1
    if raster_group:
        if raster_m or int(raster_group) < 1:
            raise ValueError("raster_group: a positive group of M blocks, instead of raster_m")
        out["RASTER_GROUP"] = int(raster_group)
    if _dtype(dtype) == "fp32":
        fits = promote_fits(block_size, pingpong)
        if promote is None:
            promote = PROMOTE_K_BLOCKS if fits else 0
        if int(promote) < 0 or (promote and not fits):
            raise ValueError(f"promote {promote}: 0, or k-blocks per group on a cooperative tile "
                             "of at most 64 x 160 accumulators per warpgroup")
        out["SPLIT_HI"] = int(bool(split_hi))
        out["PROMOTE"] = int(promote)
    return out
