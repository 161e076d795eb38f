"""The Hopper path's tiles and dtypes: the tile tables, BLOCK_SIZE and shape parsing, and the
small facts every other module of the path reads (K per stage, element sizes, cluster shapes)."""

from __future__ import annotations

from typing import Any

from kernels.spec import DeviceLimits, Tile

BK = 64
"""K per stage for 16-bit data: one 128-byte swizzle row (tf32: 32 fp32 elements, ``bk_of``)."""

SWAP_ROWS = range(136, 201, 8)
"""The swapped R x 128 tiles' side along M (``SWAP_TILES``): every multiple of 8 from 136 to 200."""
SWAP_WIDE_ROWS = range(80, 121, 8)
"""The swapped R x 256 tiles' side along M (``SWAP_TILES``): every multiple of 8 from 80 to 120
(128 x 256 is the unswapped tile; more than 120 rows would hold more than 120 accumulators a
consumer thread)."""
DECODE_ROWS = range(8, 57, 8)
"""The swapped R x 64 decode tiles' side along M (``DECODE_TILES``): every multiple of 8 from 8 to 56
(64 x 64 would read as its own kernel frame)."""
TILES: dict[str, tuple[int, int, int]] = {
    # name: (BM, BN, consumer warpgroups)
    "128x256": (128, 256, 2),
    "128x128": (128, 128, 2),
    "256x128": (256, 128, 2),
    "128x160": (128, 160, 2),
    "128x80": (128, 80, 2),
    "64x80": (64, 80, 1),
    "256x160": (256, 160, 2),
    "128x320": (128, 320, 2),
    "128x144": (128, 144, 2),
    "128x192": (128, 192, 2),
    "128x208": (128, 208, 2),
    # swapped-operand tiles (``SWAP_TILES``): rows along M x 128 or 256 columns of N
    **{f"{r}x128": (r, 128, 2) for r in SWAP_ROWS},
    **{f"{r}x256": (r, 256, 2) for r in SWAP_WIDE_ROWS},
    # swapped decode tiles (``DECODE_TILES``): R tokens x 64 rows of W, one consumer warpgroup
    **{f"{r}x64": (r, 64, 1) for r in DECODE_ROWS},  # DECODE_COLS
}
"""Tile shapes, best default first. Each consumer warpgroup owns BM / consumers rows. The narrow
tiles (N = 80: 2560 = 32 x 80) are for small M, where the wide ones leave most SMs idle or split K:
N = K = 2560 gives 128 tiles at M = 256 (64x80, one consumer warpgroup) and M = 512 (128x80),
each CTA running the whole K loop."""
NARROW_TILES = ("128x80", "64x80")
"""Tiles for 16-bit data only: their 16-column epilogue tail chunk (32B swizzle) is not written for
fp32 data (``tiles_for``)."""
WIDE_TILES = ("256x160", "128x320")
"""cuBLAS's big tiles (knobs, not defaults: ADR-0007), 16-bit data only: 160 accumulators per
consumer thread,
two m64n160k16 per k16 each; 256x160's consumers split the rows as every cooperative tile does,
128x320's split the columns (``SPLIT_N_TILES``). Their 80 KB epilogue tile fits beside 2 stages,
deeper rings only with it staged in the ring (``build(epi_ring=True)``)."""
FIT_TILES = ("128x144", "128x192", "128x208")
"""Widths that fit N = 2560 into fewer N blocks (18, 14, 13) than 128 and 160 do (20, 16), after
cuBLAS, which picks its tile's free side per shape (ADR-0007): where the tiles of 128 or 160 leave
the last round nearly empty, 13 x 20 M blocks of 128x208 fill two rounds of 132 (M = 2433-2560). 16-bit data only (their 16-column tail
chunk, as the narrow tiles'); 128x144 runs ping-pong (144 accumulators per thread), the wider two
cooperative."""
DECODE_COLS = 64
"""A decode tile's rows of W (the kernel's BM: one consumer warpgroup's m64)."""
DECODE_TILES = tuple(f"{r}x{DECODE_COLS}" for r in DECODE_ROWS)
"""Swapped tiles of R <= 56 tokens by 64 rows of W, one consumer warpgroup (the kernel's 64 x R,
wgmma m64nRk16): cuBLAS's decode design, one 64-row W tile a CTA streamed once from DRAM through a
deep ring (``defaults.decode_stages``) with an L2 evict-first policy (``STREAM_HINT``), the tokens
the wgmma's narrow side (ADR-0011). On Hopper their names take the place of the decode path's
mma.sync tiles of the same size (never a tuned best there)."""
SWAP_TILES = (*(f"{r}x128" for r in SWAP_ROWS), *(f"{r}x256" for r in SWAP_WIDE_ROWS), *DECODE_TILES)
"""Tiles of R rows along M (a multiple of 8) by C = 64 (``DECODE_TILES``), 128 or 256 columns of N,
built as the transposed product out^T = W A^T (``_build_swapped``, ``SWAP_AB`` in the kernel): the kernel's C-row side runs
along N (W as the wgmma's A operand, each consumer warpgroup C / 2 of its rows) and its BN = R along M
(A as its B operand, so any width a wgmma takes sizes the tile along M), as cuBLAS sizes its tiles to
the shape (ADR-0007): R x 128 for R from 136 to 200 (``SWAP_ROWS``), R x 256 for R from 80 to 120
(``SWAP_WIDE_ROWS``: cuBLAS's 104 x 256 at M = 1337, N = 2560 runs 13 x 10 tiles, one round).
Cooperative, unclustered, data-parallel, 16-bit data; R and out keep their [M, N] layout (the
epilogue tile is R's natural R x 64 boxes, in its own buffer; for a shape, the deeper rings that fit
only with it staged in the ring's freed slots are knobs too, ``ring_stage_options``). ``default_knobs``
takes the R x 128 tiles at 4 stages where ``_swap_tile`` finds 13 row blocks filling two rounds with
clearly less work (``SWAP_GAIN``)."""


def decode_tile(m: int) -> str:
    """The decode tile whose R holds M tokens in one row of tiles (R = M rounded up to 8); ValueError
    past the largest."""
    r = max(DECODE_ROWS[0], -(-int(m) // 8) * 8)
    if r not in DECODE_ROWS:
        raise ValueError(f"M = {m}: the decode tiles hold at most {DECODE_ROWS[-1]} tokens")
    return f"{r}x{DECODE_COLS}"


WIDE_SWAP_TILES = tuple(f"{r}x256" for r in SWAP_WIDE_ROWS)
"""The swapped tiles with 256 columns of N (the kernel's 256 x R)."""
_SWAP_KERNEL_TILES = {f"{TILES[t][1]}x{TILES[t][0]}": (TILES[t][1], TILES[t][0], TILES[t][2]) for t in SWAP_TILES}
"""The swapped tiles in the kernel's frame (C x R): what ``_build_swapped`` renders; no knob."""
SPLIT_N_TILES = ("128x320",)
"""Cooperative tiles whose two consumers split the columns (SPLIT_N): a consumer of 64 x 320 would
need n320 wgmmas (n <= 256)."""
PINGPONG_TILES = ("128x128", "128x160", "128x144")
"""Tiles one consumer warpgroup can hold whole (BM * BN / 128 threads <= 160 accumulators)."""

DTYPES = ("bf16", "fp16", "tf32", "fp32")
"""tf32: fp32 A, W, R and out; the tensor cores read the fp32 operands as tf32 (wgmma .tf32, the low
13 mantissa bits ignored), fp32 accumulation; the residual added in fp32.
fp32: the same data, fp32-class results by 3xTF32 (``tf32_split`` writes each operand's low part
tf32(x - hi); the GEMM sums a_lo*w_hi + a_hi*w_lo + a_hi*w_hi over 3x the k-blocks). The
portable path's FFMA kernel stays available as ``gemm_residual_mma``."""
ITEMSIZE = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}
DT_CODE = {"bf16": 0, "fp16": 1, "tf32": 2, "fp32": 3}
PASSES = {"fp32": 3}
"""Tensor-core products per k-block (3xTF32 for fp32; one otherwise)."""


def promote_fits(block_size: str, pingpong: bool) -> bool:
    """A second accumulator set fits beside the first: cooperative tiles of at most 64 x 160
    accumulators per consumer warpgroup (128x128, 128x160)."""
    bm, bn, consumers = parse_block_size(block_size, "fp32")
    return not pingpong and bm // consumers * bn <= 64 * 160


def bk_of(dtype: Any) -> int:
    """K per stage in elements: one 128-byte swizzle row (64 for bf16/fp16, 32 for tf32)."""
    return 128 // ITEMSIZE.get(_dtype(dtype), 2)


def _k16(k: int, dtype: Any) -> int:
    """K in 16-bit-element units times the products per k-block, so that k-block counts (cdiv by
    ``BK``) hold for every dtype (fp32's three tf32 products count three times)."""
    dt = _dtype(dtype)
    return k * ITEMSIZE.get(dt, 2) // 2 * PASSES.get(dt, 1)


def tiles_for(dtype: Any) -> list[str]:
    """The tiles this dtype can take (before shared memory): every one for 16-bit data, all but
    ``NARROW_TILES`` for fp32 data (tf32, fp32)."""
    sixteen = ITEMSIZE.get(_dtype(dtype), 2) == 2
    return [t for t in TILES if sixteen or t not in NARROW_TILES + WIDE_TILES + FIT_TILES + SWAP_TILES]


def swapped(block_size: str) -> bool:
    """Whether this BLOCK_SIZE runs as the transposed product (``SWAP_TILES``)."""
    return _tile_name(block_size) in SWAP_TILES


def kernel_frame_error(block_size: str) -> str | None:
    """For a swapped tile written in the kernel's own frame (C x R, not itself a tile), what to
    write instead; else None. ``parse_block_size`` accepts the name for ``_build_swapped``'s inner
    build; ``check`` and ``build`` refuse it from anyone else with this message."""
    name = _tile_name(block_size)
    if name not in _SWAP_KERNEL_TILES or name in TILES:
        return None
    cols, rows, _ = _SWAP_KERNEL_TILES[name]
    return (f"{block_size} is the kernel's own frame of the swapped tile {rows}x{cols} (rows along M "
            f"first): write {rows}x{cols}, e.g. BLOCK_SIZE={rows}x{cols}")


def parse_block_size(block_size: str, dtype: Any = None) -> tuple[int, int, int]:
    """'128x256' or '128x256x64' (tf32: 'x32') -> (BM, BN, consumers); ValueError for anything
    else. Without a dtype the BK part must be 16-bit's 64."""
    bk = bk_of(dtype) if dtype is not None else BK
    tile = Tile.parse(block_size)
    if tile.k is not None and tile.k != bk:
        raise ValueError(f"the Hopper path takes BK = {bk} only here (one 128-byte swizzle "
                         f"row), got {tile.k}")
    text = tile.name
    if text in _SWAP_KERNEL_TILES and text not in TILES:  # _build_swapped's name for the kernel's frame
        return _SWAP_KERNEL_TILES[text]
    if text not in TILES:
        raise ValueError(f"unknown tile {block_size!r}; the Hopper path takes "
                         f"{', '.join(TILES)} (optionally with 'x{bk}')")
    if dtype is not None and text not in tiles_for(dtype):
        raise ValueError(f"tile {text} takes 16-bit data (bf16, fp16) only; for {_dtype(dtype)} "
                         f"use {', '.join(tiles_for(dtype))}")
    return TILES[text]


def stage_count(stages: int) -> int:
    """MEMORY_PIPELINING -> shared-memory slots compiled (0 = off = one slot, no overlap)."""
    return 1 if stages == 0 else int(stages)


def _tile_name(block_size: str) -> str:
    """'128x160x64' or ' 128X160 ' -> '128x160' (a key of ``TILES``)."""
    return Tile.parse(block_size).name


def supported(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None) -> bool:
    """True where this path applies: compute capability 9.0, bf16/fp16/tf32/fp32, N a multiple of 8,
    and K a multiple of 8 or 16-bit data (whose K is then padded, ``k_padded``)."""
    if tuple(limits.compute_capability) != (9, 0) or _dtype(dtype) not in DTYPES:
        return False
    if shape:
        _, n, k = _mnk(shape)
        return n % 8 == 0 and (k % 8 == 0 or ITEMSIZE[_dtype(dtype)] == 2)
    return True


def k_padded(k: int, dtype: str) -> int:
    """K as the GEMM reads it: TMA needs rows of whole 16 bytes, so 16-bit data whose K is not a
    multiple of 8 is copied, each launch, into rows of the next multiple of 8 with zeros after K
    (``PAD_KERNEL``: one more read and write of A and W); else K itself."""
    return -(-k // 8) * 8 if ITEMSIZE[_dtype(dtype)] == 2 else k


def cluster_shape(cluster: Any) -> tuple[int, int]:
    """A ``cluster`` argument as (CTAs along M sharing W, CTAs along N sharing A), in the kernel's
    frame: an int c, 1 (none) or 2 (2x1, W multicast), or the pair (1, 1), (2, 1) or (1, 2) (1x2:
    N-neighbours, A multicast)."""
    cm, cn = (cluster, 1) if isinstance(cluster, int) else tuple(cluster)
    if (cm, cn) not in ((1, 1), (2, 1), (1, 2)):
        raise ValueError(f"cluster {cluster}: 1 (none), 2 or (2, 1) (W multicast between the CTAs of "
                         "neighbouring M tiles), or (1, 2) (A multicast between neighbouring N tiles)")
    return int(cm), int(cn)


def multicast_cluster(operand: str, swapped: bool) -> tuple[int, int]:
    """The kernel-frame cluster whose two CTAs share the problem's ``operand`` ('w' or 'a'): (2, 1)
    shares the kernel's W, which a swapped build's kernel runs as the problem's A."""
    return (2, 1) if (operand == "w") != swapped else (1, 2)


def multicast_operand(cluster: tuple[int, int], swapped: bool) -> str:
    """The problem's operand a kernel-frame cluster shares ('w' or 'a'; '' unclustered): the inverse
    of ``multicast_cluster``."""
    if tuple(cluster) == (1, 1):
        return ""
    return "w" if (cluster[0] > 1) != swapped else "a"


def cluster_label(cm: int, cn: int, pairs: bool = False) -> str:
    """How ``info`` and the bench tables name a cluster shape (``pairs``: clusters of two sharing
    nothing)."""
    if pairs:
        return "pairs (2 CTAs, nothing shared)"
    return "none" if cm * cn == 1 else f"{cm}x{cn}, {'W' if cm > 1 else 'A'} multicast"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _dtype(dtype: Any) -> str:
    return str(getattr(dtype, "value", dtype))


def _mnk(shape: Any) -> tuple[int, int, int]:
    """m, n, k from a shape mapping: named (m, n, k), batch/seq/hidden, or positional '_0'.."""
    if not isinstance(shape, dict):
        raise ValueError(f"expected a mapping of dimensions, got {shape!r}")
    if all(key in shape for key in ("m", "n", "k")):
        return int(shape["m"]), int(shape["n"]), int(shape["k"])
    if all(key in shape for key in ("batch", "seq", "hidden")):
        h = int(shape["hidden"])
        return int(shape["batch"]) * int(shape["seq"]), h, h
    if shape and all(str(key).startswith("_") for key in shape):
        vals = [int(shape[key]) for key in sorted(shape, key=lambda s: int(s[1:]))]
        if len(vals) == 3:
            return vals[0], vals[1], vals[2]
    raise ValueError(f"cannot read m, n, k from shape {shape!r}")
