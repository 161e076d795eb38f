"""The cost model of ``gemm_residual`` (``kernels.gemm_residual_auto``): the tuner's prior
(``predict_ms``) and the SIMULATED device's rates for the Hopper path, its decode tiles and the
decode path. Fitted constants, each with the measurement it came from (ADR-0002, ADR-0005,
ADR-0011); predictions only, never a measurement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import kernels.sm90.model as sm90_model
import kernels.sm90.tiles as sm90_tiles
from kernels import gemm_residual_skinny as sk
from kernels.spec import DeviceLimits

DECODE_SIM_SHARE = 0.875
"""The Hopper decode tiles' share of the DRAM roofline on the SIMULATED device and in the tuner's
prior, beside a fixed launch cost: on the H200 the engine's timer read ~5 us + W's bytes at 4.2 TB/s at M = 9..48 with
64-132 CTAs (16 x 8192 x 8192 35.4-37.0 us, 16 x 28672 x 4096 63.4, 16 x 4096 x 14336 32.6,
16 x 5120 x 5120 17.9; ADR-0011)."""
DECODE_SIM_CTA_SHARE = 0.0138
"""One CTA's pull as a share of the DRAM roofline (16 x 4096 x 14336: 64 CTAs moved 4.25 TB/s, ~66 GB/s
each); fewer CTAs than the DRAM needs cap the rate."""
DECODE_SIM_DEPTH = (6 * 2**20, 1.2)
"""A ring that keeps less than 6 MB in flight over the grid runs at (its bytes / 6 MB) ** 1.2 of the
rate (16 x 8192 x 8192, 128 CTAs: 4 slots of 10 KB 41.2 us, 3 slots 56.6, against 35.8 at 8; at 64
CTAs 12 slots, 7.9 MB, were as fast as any)."""
SKINNY_SIM_BANDWIDTH = 4.8e12
"""The bandwidth the decode path's cost model is scaled by for the SIMULATED efficiency (a ratio,
so the roofline's own bandwidth then sets the time)."""

L2_PER_DRAM = 2.5
"""The L2's bandwidth over DRAM's for the prior (Hopper: roughly 10-12 TB/s against 4.8)."""
TILE_EFFICIENCY_MAX = 0.66
TILE_INTENSITY_REF = 128 * 256 / (128 + 256)
TILE_EFFICIENCY_POWER = 0.6
"""The share of the tensor-core peak a tile's main loop keeps grows with its operand reuse, the
intensity BM * BN / (BM + BN): ``TILE_EFFICIENCY_MAX`` x min(1, I / I_ref) ** power, fitted to the
H200 at 8192^3 bf16 (ADR-0002: 128x256 0.65 of the datasheet peak, 168x128 0.61, 128x128 0.55,
128x80 0.45); one consumer warpgroup (the 64-row tiles) keeps ``ONE_CONSUMER`` of that."""
ONE_CONSUMER = 0.8
PINGPONG_GAIN = 1.15
"""Ping-pong keeps the tensor cores busier than cooperative on the same tile: one consumer's
epilogue and barriers overlap the other's main loop (H200 seed shape: ping-pong 128x128 0.144 ms,
cooperative 128x256 0.152)."""
SHORT_GAIN = 1.33
"""A launch that ends within ``SHORT_MS`` runs at boost clocks before the board reaches its power
cap: the 8192^3 fit above is the capped case (the seed's 128x128 kept 0.75 of the peak for 0.14 ms,
8192^3's 0.55 for 2 ms)."""
SHORT_MS = 0.2
LONG_MS = 1.0


@dataclass(frozen=True)
class StreamKTail:
    """What a stream-K tail costs in rounds: ``fixed`` + its share of a round x ``scale``."""

    scale: float
    fixed: float


STREAMK_TAIL = StreamKTail(scale=1.15, fixed=0.5)
"""A stream-K tail's rounds: ``fixed`` + its share of a round x ``scale``.
The fixed half round (partials through the workspace, the finishing CTA's read-back, operands no
longer shared in L2 by CTAs at different K) is fitted to the tuned table shapes' trials and checked
on held-out ones (ADR-0002: without it, stream-K builds ran 1.15-1.46x their prediction, medians)."""


def skinny_cost_us(p: sk.SkinnyPlan, shape: dict[str, int], dtype: str, bandwidth: float,
                    limits: DeviceLimits) -> float:
    """The decode path's model for either way W travels (``sk.cost_us``, ``sk.bulk_cost_us``)."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    if p.w_bulk:
        return sk.bulk_cost_us(m, n, k, p.bm, p.bn, p.stages, p.warps, p.split_k, p.bulk_k, limits, bandwidth,
                               p.w_bulk)
    return sk.cost_us(p, m, n, k, dtype, bandwidth, limits.sm_count)


def decode_tile_share(block_size: str, stages: int, m: int, n: int, limits: DeviceLimits) -> tuple[float, int]:
    """(the share of the DRAM roofline a Hopper decode tile streams W at, the rows of tiles that each
    stream it): ``DECODE_SIM_SHARE``, or the CTAs' own pull (``DECODE_SIM_CTA_SHARE`` each) where few
    run, less where the ring keeps too little in flight (``DECODE_SIM_DEPTH``)."""
    rows, cols, _ = sm90_tiles.TILES[block_size]
    row_blocks = -(-m // rows)
    ctas = min(row_blocks * -(-n // cols), limits.sm_count)
    in_flight = sm90_tiles.stage_count(stages) * ctas * (rows + cols) * 128
    share = min(DECODE_SIM_SHARE, ctas * DECODE_SIM_CTA_SHARE)
    return share * min(1.0, in_flight / DECODE_SIM_DEPTH[0]) ** DECODE_SIM_DEPTH[1], row_blocks


def sm90_predict_ms(p: Any, limits: DeviceLimits, peak_flops: float, bandwidth: float, dram_bytes: int,
                    tail: StreamKTail = STREAMK_TAIL) -> float:
    """A Hopper plan's predicted time: rounds of tiles (``tile_rounds`` for data-parallel plans; the
    busiest CTA's K share under stream-K) x each tile's time, the slower of its MMAs at the share of
    the tensor cores its operand reuse keeps and its operands through the CTA's share of the L2 (W's
    shared by a 2x1 cluster), plus its epilogue (overlapped by ping-pong) and a launch; never under
    the DRAM floor. A decode tile (``sm90_tiles.DECODE_TILES``) streams W: ``decode_tile_share``."""
    bm, bn, consumers = sm90_tiles.parse_block_size(p.block_size, p.dtype)
    item = sm90_tiles.ITEMSIZE[p.dtype]
    if p.decode:  # W streamed: its own model
        share, row_blocks = decode_tile_share(f"{p.tile.m}x{p.tile.n}", p.stages, p.n, p.m, limits)
        # relative to the full share, as the other plans' floor is the whole DRAM bandwidth
        t = 5e-6 + p.m * p.k * item * row_blocks / (bandwidth * share / DECODE_SIM_SHARE)
        return 1e3 * (t + (0 if p.fuse else 2.0 * p.m * p.n * item / bandwidth))
    passes = sm90_tiles.PASSES.get(p.dtype, 1)
    sms = limits.sm_count
    intensity = bm * bn / (bm + bn)
    eff = TILE_EFFICIENCY_MAX * min(1.0, intensity / TILE_INTENSITY_REF) ** TILE_EFFICIENCY_POWER
    eff *= (1.0 if consumers > 1 else ONE_CONSUMER) * (PINGPONG_GAIN if p.pingpong else 1.0)
    mma_s = 2.0 * bm * bn * p.k * passes / (peak_flops / sms * eff)
    cm, cn = p.cluster
    l2_share = L2_PER_DRAM * bandwidth / sms
    l2_s = (bm / cn + bn / cm) * p.k * item / l2_share
    epi_s = 2.0 * bm * bn * item / l2_share
    depth = {1: 2.2, 2: 1.35, 3: 1.03}.get(sm90_tiles.stage_count(p.stages), 1.0)
    tile_s = max(mma_s, l2_s) * depth + (0.3 if p.pingpong else 1.0) * epi_s
    tiles = p.tiles
    if p.dp_tiles < tiles and not p.half_tail:  # stream-K: the tail's K spread over the grid
        rounds = (-(-p.dp_tiles // max(1, p.grid))
                  + tail.fixed + (tiles - p.dp_tiles) / max(1, p.grid) * tail.scale)
    else:
        rounds = sm90_model.tile_rounds(p.m, p.n, bm, bn, sms, p.cluster, p.half_tail)
    busy = rounds * tile_s
    # boost clocks for short launches, the power cap's for long ones, linear in between
    ramp = min(1.0, max(0.0, (busy * 1e3 / SHORT_GAIN - SHORT_MS) / (LONG_MS - SHORT_MS)))
    busy /= SHORT_GAIN - (SHORT_GAIN - 1.0) * ramp
    t = busy + 5e-6 + (0 if p.fuse else 2.0 * p.m * p.n * item / bandwidth)
    return 1e3 * max(t, dram_bytes / bandwidth)
