"""The default knobs (BLOCK_SIZE, MEMORY_PIPELINING) for a dtype and shape: the cost model's pick,
then the rules fitted to the H200 that trade it for another tile or depth (ADR-0007)."""

from __future__ import annotations

from collections.abc import Callable

from kernels.sm90.choices import one_tile_per_cta, round_work, use_pingpong
from kernels.sm90.model import plan_schedule, schedule_cost
from kernels.sm90.smem import block_size_options, epi_shared_needed, pipelining_options, ring_stage_options
from kernels.sm90.tiles import (
    DECODE_ROWS,
    DECODE_TILES,
    FIT_TILES,
    ITEMSIZE,
    SWAP_TILES,
    TILES,
    WIDE_SWAP_TILES,
    _cdiv,
    _dtype,
    _k16,
    _mnk,
    _tile_name,
    decode_tile,
    swapped,
)
from kernels.spec import DeviceLimits

_TILE_STAGES = {"128x128": 4, "64x80": 8, **dict.fromkeys(SWAP_TILES, 4)}
"""Stage count per tile where the deepest that fits is not the fastest measured."""
_NEVER_DEFAULT_TILES = {"128x160", "128x80", "64x80", "256x160", "128x320", *FIT_TILES, *SWAP_TILES}
"""Tiles the cost model does not rate (chosen only by ``_few_full_waves`` and ``narrow_tile``)."""


def _few_full_waves(m: int, n: int, bm: int, bn: int, sms: int) -> bool:
    """N a multiple of BN, and the tiles fill one or two waves to >= 90 %: where the 128x160 tile
    measured faster than every other default (ADR-0007)."""
    if n % bn:
        return False
    tiles = _cdiv(m, bm) * (n // bn)
    waves = _cdiv(tiles, sms)
    return waves <= 2 and tiles >= 0.9 * waves * sms


TILE_160_GAIN = 0.97
"""``default_knobs`` trades 128x128 for 128x160 where the bigger tile's data-parallel rounds cost at
most this fraction of the work (rounds x tile area): where 128x128's last round is nearly empty,
128x160's fewer rounds are faster; at equal work 128x128 stays (ADR-0007)."""


def _tile_160_fills_rounds(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
                           stages_128: int, stages_160: int) -> bool:
    """16-bit data, and 128x160 (ping-pong where it applies, else cooperative, at ``stages_160``)
    runs its tiles in rounds that do at most ``TILE_160_GAIN`` of the work of 128x128's (at
    ``stages_128``, in 2x1 clusters where ``use_cluster`` takes them), counting data-parallel
    rounds (a stream-K tail measured slower than the round it saves: ADR-0007)."""
    if not shape or ITEMSIZE.get(_dtype(dtype), 2) != 2:
        return False
    try:
        _mnk(shape)
    except ValueError:
        return False
    return (round_work(limits, dtype, "128x160", stages_160, shape)[1]
            <= TILE_160_GAIN * round_work(limits, dtype, "128x128", stages_128, shape)[1])


def narrow_tile(m: int, n: int, sms: int) -> str | None:
    """The narrow tile (16-bit data) for a shape whose tiles fit in one wave, each CTA running the
    whole K loop (no stream-K fixup): 64x80 where its tiles fit, else 128x80; None where neither
    does. N = K = 2560: 64x80 for M <= 256, 128x80 for 256 < M <= 512. One wave only: at two waves
    128x160 is faster (ADR-0007)."""
    for tile in ("64x80", "128x80"):
        bm, bn, _ = TILES[tile]
        if _cdiv(m, bm) * _cdiv(n, bn) <= sms:
            return tile
    return None


PINGPONG_PREFER_STAGES = 5
"""``default_knobs`` prefers ping-pong 128x128 over the cost model's tile only where it fits this
many stages (measured at the seed shape with 5; 4 is slower than cooperative 128x256 there)."""

EPI_RING_TILES = ("64x80", "128x80", "128x160", "128x256")
"""The tiles measured faster with the epilogue tile in the ring and the deeper ring it buys:
``default_knobs`` stages the epilogue tile in the ring, for one stage more, where it finds one of
them with one tile per CTA (ADR-0007)."""


FIT_GAIN = 0.95
"""``default_knobs`` trades its pick for a ``FIT_TILES`` width where that tile's data-parallel rounds
do at most this fraction of the pick's work (rounds x tile area, ``tile_rounds`` as the other rules
count them), in fewer rounds, both taking two or more: the fewer rounds are what pays, and the
round model over-states the gain about twofold (ADR-0007)."""


def _cheaper_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None, block: str, stages: int,
                  candidates: tuple[str, ...], gain: float,
                  rounds_ok: Callable[[float, float], bool], min_rounds: int = 2) -> tuple[str, int] | None:
    """Of ``candidates`` (16-bit data, a known shape, ``block`` pipelined in ``min_rounds`` rounds or
    more), the one whose data-parallel rounds at its default stages do the least work, at most
    ``gain`` of ``block``'s at ``stages`` (``round_work``), where ``rounds_ok(its rounds, block's
    rounds)``: (tile, stages), or None."""
    if not shape or ITEMSIZE.get(_dtype(dtype), 2) != 2 or stages == 0:
        return None
    try:
        _mnk(shape)
    except ValueError:
        return None
    rounds, work = round_work(limits, dtype, block, stages, shape)
    if rounds < min_rounds:
        return None
    best = None
    offered = block_size_options(limits, dtype)
    for tile in candidates:
        if tile not in offered:
            continue
        st = default_stages(limits, dtype, tile, shape)
        r, w = round_work(limits, dtype, tile, st, shape)
        if rounds_ok(r, rounds) and w <= gain * work and (best is None or w < best[0]):
            best = (w, tile, st)
    return None if best is None else (best[1], best[2])


def _fit_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
              block: str, stages: int) -> tuple[str, int] | None:
    """The ``FIT_TILES`` width (and its stages) ``default_knobs`` takes instead of ``block`` at
    ``stages`` for this shape (``FIT_GAIN``, in fewer rounds, two or more), or None."""
    return _cheaper_tile(limits, dtype, shape, block, stages, FIT_TILES, FIT_GAIN,
                         lambda r, rounds: 2 <= r < rounds)


SWAP_GAIN = 0.965
"""``default_knobs`` trades its pick for a ``SWAP_TILES`` tile where that tile's two data-parallel
rounds do at most this fraction of the pick's work (``round_work``). The swapped build does a little
less per unit of work than the unswapped tiles (4 stages; its epilogue moves R's natural tile through
ldmatrix / stmatrix .trans), so it takes them only with less work (the threshold sits between the
measured gains and the level shapes: ADR-0007)."""


def _swap_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
               block: str, stages: int) -> tuple[str, int] | None:
    """The ``SWAP_TILES`` tile (and its stages) ``default_knobs`` takes instead of ``block`` at
    ``stages`` for this shape (``SWAP_GAIN``; the candidate in exactly two rounds), or None."""
    return _cheaper_tile(limits, dtype, shape, block, stages, SWAP_TILES, SWAP_GAIN,
                         lambda r, rounds: r == 2)


WIDE_SWAP_GAIN = 0.9
"""``default_knobs`` trades its pick for a swapped R x 256 tile (``WIDE_SWAP_TILES``) where that tile's
data-parallel rounds, no more of them, do at most this fraction of the pick's work (``round_work``):
where the rows along M cut M into as many blocks as a round of 256-wide column blocks has room for,
as cuBLAS sizes its 104 x 256 tile at M = 1337, N = 2560 (one round of 130 tiles where 128-row
tiles leave 22 SMs idle). Measured at the 14 shapes of N = K = 1024-8192 where it changes the pick:
0.57-0.98x the pick's time, never slower (ADR-0007). ``_swap_tile`` offers these tiles too, for two
rounds."""


def _wide_swap_tile(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None,
                    block: str, stages: int) -> tuple[str, int] | None:
    """The swapped R x 256 tile (and its stages) ``default_knobs`` takes instead of ``block`` at
    ``stages`` for this shape (``WIDE_SWAP_GAIN``, in no more rounds, one round or more), or None."""
    return _cheaper_tile(limits, dtype, shape, block, stages, WIDE_SWAP_TILES, WIDE_SWAP_GAIN,
                         lambda r, rounds: r <= rounds, min_rounds=1)


def default_knobs(limits: DeviceLimits, dtype: str,
                  shape: dict[str, int] | None = None) -> tuple[str, int]:
    """16-bit data with M <= 56: the decode tile for M (``decode_tile``, ``decode_stages``). Else the
    knobs of ``_base_knobs``, or a ``FIT_TILES`` width where ``_fit_tile`` finds one whose
    rounds do clearly less work, or a swapped tile where ``_swap_tile`` does, or a swapped R x 256
    tile where ``_wide_swap_tile`` does (16-bit data, a known shape)."""
    if shape and ITEMSIZE.get(_dtype(dtype), 4) == 2 and _mnk(shape)[0] <= DECODE_ROWS[-1]:
        tile = decode_tile(_mnk(shape)[0])  # decode shapes: W streamed once (ADR-0011)
        if any(pipelining_options(limits, dtype, tile, shape)):  # a pipelined ring fits
            return tile, decode_stages(limits, dtype, tile, shape)
    block, stages = _base_knobs(limits, dtype, shape)
    block, stages = _fit_tile(limits, dtype, shape, block, stages) or (block, stages)
    block, stages = _swap_tile(limits, dtype, shape, block, stages) or (block, stages)
    return _wide_swap_tile(limits, dtype, shape, block, stages) or (block, stages)


def _deepest_ring(limits: DeviceLimits, dtype: str, block: str, shape: dict[str, int] | None) -> int:
    """One tile a CTA on a measured tile: the deepest ring, the epilogue tile staged in it (0: not
    here; with more tiles a CTA the ring measured slower than ping-pong, ADR-0007)."""
    if (_tile_name(block) not in EPI_RING_TILES
            or not one_tile_per_cta(limits, block, dtype, shape)):
        return 0
    return max(ring_stage_options(limits, dtype, block, shape), default=0)


DECODE_IN_FLIGHT_BYTES = 10 * 2**20
"""The bytes of W the whole grid keeps in flight with a decode tile (``decode_stages``): on the H200
the fastest rings held 8-12 MB (16 x 8192 x 8192, 128 CTAs: 8 stages; 16 x 5120 x 5120, 80 CTAs:
12; 16 x 14336 x 4096, 132 CTAs: 8), deeper ones and shallower ones slower (ADR-0011)."""
DECODE_STAGES = (4, 12)
"""The range ``decode_stages`` keeps to: below 4 the ring starves; with few CTAs (64: 16 x 4096 x
14336) 12 stages measured faster than 22."""


def decode_stages(limits: DeviceLimits, dtype: str, block: str, shape: dict[str, int] | None) -> int:
    """MEMORY_PIPELINING for a decode tile (``DECODE_TILES``): the ring that keeps
    ``DECODE_IN_FLIGHT_BYTES`` in flight over the CTAs that run (Little's law: DRAM's latency under
    load times its bandwidth), within ``DECODE_STAGES`` and what fits; 8 without a shape."""
    fits = [s for s in pipelining_options(limits, dtype, block, shape) if s]
    want = 8
    if shape:
        m, n, _ = _mnk(shape)
        rows, cols, _ = TILES[_tile_name(block)]
        ctas = max(1, min(_cdiv(m, rows) * _cdiv(n, cols), limits.sm_count))
        want = round(DECODE_IN_FLIGHT_BYTES / (ctas * (rows + cols) * 128))
        want = min(max(want, DECODE_STAGES[0]), DECODE_STAGES[1])
    return max([s for s in fits if s <= want], default=min(fits))


def default_stages(limits: DeviceLimits, dtype: str, block: str, shape: dict[str, int] | None) -> int:
    """The MEMORY_PIPELINING ``default_knobs`` gives ``block`` for this shape: the deepest ring where
    a CTA has one tile (``_deepest_ring``); for ping-pong the deepest count that fits (128x128: 5
    beside two epilogue buffers; never a count that needs the consumers to share one, slower than two
    buffers: ADR-0007);
    cooperative 16-bit ``_TILE_STAGES`` (128x128 measured best at 4; the swapped tiles 4, R x 256
    with the epilogue tile in the ring), else the deepest (tf32: 5); a decode tile ``decode_stages``."""
    if _tile_name(block) in DECODE_TILES:
        return decode_stages(limits, dtype, block, shape)
    ring = _deepest_ring(limits, dtype, block, shape)
    if ring:
        return ring
    # no shape: the counts beside a buffer; a swapped tile's 4 stages may need the ring (R x 256)
    fits = pipelining_options(limits, dtype, block, shape if swapped(block) else None)
    pp = [st for st in fits if st and use_pingpong(limits, block, st, dtype, shape)
          and not epi_shared_needed(limits, block, st, dtype)]
    if pp:
        return max(pp)
    want = _TILE_STAGES.get(block, max(fits)) if ITEMSIZE.get(_dtype(dtype), 2) == 2 else max(fits)
    return want if want in fits else max(fits)


def _base_knobs(limits: DeviceLimits, dtype: str,
                shape: dict[str, int] | None = None) -> tuple[str, int]:
    """(BLOCK_SIZE, MEMORY_PIPELINING): without a shape, 128x256 with the deepest pipeline that
    fits (3 stages; measured fastest on the H200). With a shape, the tile whose planned schedule
    (data-parallel waves, stream-K tail) the cost model rates fastest for this M, N, K (128x256
    unless another tile is more than 5 % faster: the model's error): 128x128 (4 stages) where 128x256 tiles leave a
    bad last wave or too few tiles, e.g. M = 256, 512 at N = K = 2560; and 128x128 with 5 stages
    wherever that tile runs ping-pong (>= 2 tiles per CTA: M >= 4096 at N = K = 2560, the seed
    shape included), unless 128x160 runs its tiles in rounds that do less work in all
    (``TILE_160_GAIN``, rounds of halves counted by ``tile_rounds``: at N = K = 2560 M = 769-1024,
    1665-1792, 2433-2560, 2945-3072, 4993-5248, 5889-6272 and 6657-6784); 128x160 with 5 stages (16-bit data) where N is a multiple of 160 and its tiles
    fill one or two waves (``_few_full_waves``: M = 1024, 2048 at N = K = 2560). tf32 takes
    cooperative 128x128 with 5 stages (its fp32 epilogue buffer leaves the bigger tiles 2)."""
    options = block_size_options(limits, dtype)
    if not options:
        raise ValueError(f"no Hopper tile fits {limits.shared_memory_per_block_bytes} bytes")
    # a tile that fits only 2 stages (tf32's 128x256 and 256x128 beside their fp32 epilogue
    # buffer) is offered as a knob but not chosen: two slots cannot cover the TMA latency
    options = [b for b in options if max(pipelining_options(limits, dtype, b)) >= 3] or options
    options = [b for b in options if b not in _NEVER_DEFAULT_TILES] or options

    block = options[0]
    if shape:
        try:
            m, n, k = _mnk(shape)
        except ValueError:
            return block, default_stages(limits, dtype, block, shape)
        k = _k16(k, dtype)
        sms = limits.sm_count

        def cost(b: str) -> float:
            g, d = plan_schedule(m, n, k, b, sms, True)
            return schedule_cost(m, n, k, b, sms, g, d) * (1.0 if b == options[0] else 1.05)

        narrow = narrow_tile(m, n, sms)
        if narrow in block_size_options(limits, dtype):  # 16-bit data, and it fits
            return narrow, default_stages(limits, dtype, narrow, shape)
        block = min(options, key=lambda b: (cost(b), options.index(b)))
        # ping-pong 128x128 wherever it applies (>= 2 tiles per CTA): timed in alternation with
        # the cooperative 128x256 at the seed shape it is faster under sustained load and level in
        # a cold run (ADR-0007); the model does not know ping-pong
        if "128x128" in options and any(
                use_pingpong(limits, "128x128", st, dtype, shape)
                for st in pipelining_options(limits, dtype, "128x128")
                if st >= PINGPONG_PREFER_STAGES):
            block = "128x128"
        # 128x160 where 128x128's last round of tiles is nearly empty and the bigger tile's rounds
        # do less work in all (16-bit data)
        if (block == "128x128" and ITEMSIZE.get(_dtype(dtype), 2) == 2
                and "128x160" in block_size_options(limits, dtype)):
            st160 = default_stages(limits, dtype, "128x160", shape)
            st128 = default_stages(limits, dtype, "128x128", shape)
            if _tile_160_fills_rounds(limits, dtype, shape, st128, st160):
                return "128x160", st160
        # 128x160 where its tiles fill one or two waves (measured for 16-bit data only)
        if (ITEMSIZE.get(_dtype(dtype), 2) == 2
                and "128x160" in block_size_options(limits, dtype)
                and _few_full_waves(m, n, 128, 160, sms)):
            return "128x160", _deepest_ring(limits, dtype, "128x160", shape) or max(pipelining_options(limits, dtype, "128x160"))
    return block, default_stages(limits, dtype, block, shape)
