"""The schedule cost model: rounds of tiles a persistent grid runs, the stream-K candidates for
a part-full last round, and their modelled time (``plan_schedule`` picks the cheapest)."""

from __future__ import annotations

from typing import Any

from kernels.sm90.tiles import BK, _cdiv, cluster_shape, parse_block_size

WS_TILES = 264
"""Stream-K workspace slots (fp32 BM x BN each, static in the module): at most this many tiles
are split; two waves of 132 SMs."""


# Schedule cost model in microseconds, fitted to an H200 M sweep (ADR-0007; 35 measured schedules
# of 128x256 and 128x128 within ~5 % rms): fixed cost of a launch; one
# k-block of a 128x256 tile (scaled by tile area), slower by up to _HOT once the chip runs long
# enough to reach its power limit; a tile's epilogue; a split segment's extra (fp32 partial
# added into the workspace and read back).
_F_US = 8.0
_KB_US = 0.55
_HOT = 0.4
_EPI_US = 2.0
_SEG_US = 6.0
_TILE_SLOWDOWN = {"128x256": 1.0, "128x128": 1.04, "256x128": 1.05, "128x160": 1.03}
"""Main-loop time per unit of tile area relative to 128x256 (seed shape, best stages)."""


def tile_rounds(m: int, n: int, bm: int, bn: int, sms: int, cluster: Any = 1,
                half_tail: bool = False) -> float:
    """Rounds of tiles a persistent data-parallel grid runs (clusters, ``cluster_shape``'s cm x cn
    neighbours, take a block of tiles each, ``sms // (cm * cn)`` of them at once): the busiest
    CTA's tile count; with ``half_tail`` (unclustered), a last round that ``half_tail_whole`` runs
    in halves counts ``HALF_ROUND``."""
    cm, cn = cluster_shape(cluster)
    blocks = _cdiv(m, bm * cm) * _cdiv(n, bn * cn)
    grid = max(1, sms // (cm * cn))
    if half_tail and cm * cn == 1 and half_tail_whole(blocks, grid) is not None:
        return blocks // grid + HALF_ROUND
    return _cdiv(blocks, grid)


HALF_ROUND = 0.8
"""A round of half tiles in units of a whole round, for ``tile_rounds``: a 64-row half reads all of
its W tile for half the math, so a round of halves costs more than half a round (measured 0.66-0.86:
ADR-0007)."""


def half_tail_whole(tiles: int, grid: int) -> int | None:
    """The tiles a persistent grid runs whole before its last round runs in halves: where the grid
    takes its tiles in more than one round and the last round holds at most half a grid of them
    (their halves then fill at most one round); else None."""
    tail = tiles % grid
    if tiles > grid and 0 < 2 * tail <= grid:
        return tiles - tail
    return None


def schedule_cost(m: int, n: int, k: int, block_size: str, sms: int, grid: int,
                  dp_tiles: int) -> float:
    """Modelled time in us of one (grid, dp_tiles) schedule: the busiest CTA's work."""
    bm, bn, _ = parse_block_size(block_size)
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    kb = _cdiv(k, BK)
    area = bm * bn / 32768
    grid = max(1, grid)
    dp_tiles = min(max(dp_tiles, 0), tiles)
    work = tiles * kb * area / sms  # 128x256 k-blocks per SM: how long the chip runs flat out
    t_kb = _KB_US * area * _TILE_SLOWDOWN.get(block_size, 1.0) * (1 + _HOT * min(1.0, work / 200))
    t = _F_US + (_cdiv(dp_tiles, grid) if dp_tiles else 0) * (kb * t_kb + _EPI_US * area)
    sk_tiles = tiles - dp_tiles
    sk_iters = sk_tiles * kb
    if sk_iters:
        per = _cdiv(sk_iters, grid)
        if grid % sk_tiles == 0:  # a whole number of CTAs per tile: one segment each
            segs, split = 1, grid > sk_tiles
        elif sk_iters % grid == 0 and per % kb == 0:  # whole tiles each
            segs, split = per // kb, False
        else:
            segs, split = _cdiv(per, kb) + 1, True
        t += per * t_kb + segs * _EPI_US * area + (segs * _SEG_US * area if split else 0.0)
    return t


def schedule_candidates(m: int, n: int, k: int, bm: int, bn: int,
                        sms: int) -> list[tuple[int, int]]:
    """(grid, dp_tiles) schedules worth trying: data-parallel first, then stream-K over the tail
    (one full wave plus the tail, or the tail alone) or, when the tiles do not fill the GPU,
    over all tiles with a grid of 2..8 CTAs per tile or the whole GPU."""
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    kb = _cdiv(k, BK)
    out = [(max(1, min(tiles, sms)), tiles)]
    if kb < 2 or tiles % sms == 0:
        return out
    q = tiles // sms
    if q == 0:
        grids = sorted({g for g in (tiles * s for s in range(2, 9)) if g <= sms} | {sms})
        out += [(g, 0) for g in grids]
    else:
        out += [(sms, d) for d in ((q - 1) * sms, q * sms)
                if tiles - d <= WS_TILES]
    return out


def plan_schedule(m: int, n: int, k: int, block_size: str, sms: int,
                  streamk: bool = True) -> tuple[int, int]:
    """(grid, dp_tiles) for this shape: the cheapest of ``schedule_candidates`` by the cost model;
    stream-K only where it saves at least 3 % of the data-parallel time."""
    bm, bn, _ = parse_block_size(block_size)
    cands = schedule_candidates(m, n, k, bm, bn, sms)
    if not streamk:
        return cands[0]
    costs = [schedule_cost(m, n, k, block_size, sms, g, d) for g, d in cands]
    best = min(range(len(cands)), key=lambda i: costs[i])
    return cands[best] if costs[best] < 0.97 * costs[0] else cands[0]
