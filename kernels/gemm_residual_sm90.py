"""Hopper-native path of gemm_residual: TMA + mbarrier pipeline + wgmma, warp-specialised,
persistent (``gemm_residual_sm90.cu``). Used on compute capability 9.0 for bf16/fp16, tf32
(fp32 data read as tf32 by the tensor cores) and fp32 (3xTF32: each fp32 operand split into a tf32
high and low part, three tensor-core products summed in fp32; fp32-class accuracy).

``out[M, N] = A[M, K] @ W[N, K]^T + R[M, N]``; fp32 accumulation, the residual added in fp32 in
the epilogue and the result rounded once. Tiles 128x256, 128x128, 256x128 and 128x160 (N = 2560 =
16 x 160), and for 16-bit data at small M the narrow 128x80 and 64x80 and, as knobs, cuBLAS's wide
256x160 and 128x320 (``WIDE_TILES``; 128x320's consumers split N), and the widths 128x144, 128x192
and 128x208 (``FIT_TILES``) that fit N into fewer blocks where the others leave a round nearly empty
(``FIT_GAIN``); optional 2x1 clusters with
TMA multicast of W (``build(cluster=2)``; the default only for 16-bit ping-pong 128x128,
``use_cluster``). Module-level functions, so that the ``gemm_residual`` spec can delegate to them:

- ``supported(limits, dtype, shape)``: cc 9.0 and bf16/fp16/tf32/fp32 (and N, K multiples of 8).
- ``block_size_options`` / ``pipelining_options`` / ``smem_bytes`` / ``check``.
- ``build(task, limits, block_size, stages, fuse=None)``: a :class:`kernels.spec.Build` whose
  GEMM launch takes four :class:`~kernels.spec.TensorMapArg` (A, W, R, out; 128B swizzle,
  64-element-wide boxes) and the ints M, N, K (fusion off adds a launch on ``out``, ``r``). The backend must encode the tensor maps
  (``engine.backends.tensormap``) and raise the kernel's dynamic shared-memory limit to
  ``Launch.shared_mem_bytes`` before launching.

Shapes: M is arbitrary (TMA zero-fills rows past M; the epilogue is predicated). N and K need
only be multiples of 8 (16-byte row strides for TMA): partial N and K tiles are zero-filled by
TMA too and the epilogue checks the columns, so no tile divisibility is required.

MEMORY_PIPELINING: 0 ("off") compiles one shared-memory slot (the producer waits for the
consumers before the next copy: no overlap); ``s`` >= 2 compiles ``s`` slots. For 16-bit data and a
given shape, the counts that fit only without the epilogue buffer are offered too: the epilogue
tile is then staged in the ring's freed slots (``ring_stage_options``; cooperative, data-parallel).

Schedule (not a knob: chosen per shape by ``plan_schedule``): the persistent grid runs whole tiles
data-parallel, and, where the tile count leaves a bad last wave (or too few tiles to fill the
GPU), splits the k-iterations of the tail tiles evenly over the grid (stream-K). Partial tiles
are summed in fp32 in a static workspace; the CTA that completes a tile's K adds the residual
once and rounds once. ``streamk=False`` compiles the purely data-parallel kernel.

Consumer schedule (not a knob either: ``use_pingpong``): cooperative (both consumer warpgroups
share every tile, BM / 2 rows each, or BN / 2 columns on 128x320, and run the epilogue together) or
ping-pong (each consumer
warpgroup owns whole tiles, alternately, with its own epilogue buffer, so one warpgroup's
epilogue overlaps the other's main loop). Ping-pong needs the whole tile in one warpgroup's
registers (<= 160 fp32 accumulators per thread: the 128x128 and 128x160 tiles) and two epilogue
buffers (128x160: at most 4 stages beside them). Each schedule is its own consumer body
(``kernels/sm90/consumer_cooperative.cuh``, ``consumer_pingpong.cuh``); the codegen renders the
plan's (``CONSUMERS``).

The code lives in the package ``kernels.sm90``, a module per concern (``tiles``, ``smem``, ``model``,
``choices``, ``defaults``, ``constants``, ``planner``, ``codegen``); this module re-exports its names. A
test or probe that changes a module-level setting sets it on the module that defines it.
"""

from __future__ import annotations

from kernels.sm90.choices import (  # noqa: F401
    CLUSTER_DEFAULT,
    CLUSTER_DEFAULT_DTYPES,
    CLUSTER_DEFAULT_TILES,
    HALF_TAIL_DEFAULT,
    PINGPONG_DEFAULT,
    PINGPONG_MIN_STAGES,
    RASTER_GROUP_DEFAULT,
    RASTER_M_DEFAULT,
    RASTER_M_TILES,
    SWAP_ORDER_GAIN,
    TAIL_SHIFT_DEFAULT,
    half_tail_fits,
    halves_planned,
    one_tile_per_cta,
    round_rows,
    round_work,
    swap_n_fastest,
    use_cluster,
    use_half_tail,
    use_pingpong,
    use_raster_group,
    use_raster_m,
    use_tail_shift,
)
from kernels.sm90.codegen import (  # noqa: F401
    ADD_KERNEL,
    ADD_KERNEL_F32,
    CONSUMERS,
    HALF_TAIL_OPTIONS,
    HEADERS,
    KERNEL,
    PAD_KERNEL,
    PAD_SOURCE,
    SOURCE_FILE,
    SOURCE_FILES,
    SPLIT_KERNEL,
    TRAILERS,
    build,
    options,
    render,
    render_source,
)
from kernels.sm90.constants import (  # noqa: F401
    CLUSTER_DTYPES,
    MC_SHARE_ROWS,
    PROMOTE_DEFAULT,
    SPLIT_HI_DEFAULT,
    defines,
)
from kernels.sm90.defaults import (  # noqa: F401
    EPI_RING_DEFAULT,
    EPI_RING_TILES,
    EPI_SHARED_DEFAULT,
    FIT_GAIN,
    PINGPONG_PREFER_STAGES,
    SWAP_GAIN,
    TILE_160_GAIN,
    WIDE_SWAP_GAIN,
    _base_knobs,
    _fit_tile,
    _swap_tile,
    _wide_swap_tile,
    decode_stages,
    default_knobs,
    default_stages,
    narrow_tile,
)
from kernels.sm90.model import (  # noqa: F401
    HALF_ROUND,
    STREAMK_DEFAULT,
    WS_TILES,
    half_tail_whole,
    plan_schedule,
    schedule_candidates,
    schedule_cost,
    tile_rounds,
)
from kernels.sm90.planner import (  # noqa: F401
    Sm90Plan,
    check,
    defines_of,
    plan,
)
from kernels.sm90.smem import (  # noqa: F401
    ALIGN_SLACK,
    BARRIER_BYTES,
    EPI_SHARED_DTYPES,
    MAX_STAGES,
    block_size_options,
    epi_shared_needed,
    pingpong_fits,
    pipelining_options,
    ring_stage_options,
    smem_bytes,
)
from kernels.sm90.tiles import (  # noqa: F401
    BK,
    DECODE_ROWS,
    DECODE_TILES,
    DT_CODE,
    DTYPES,
    FIT_TILES,
    ITEMSIZE,
    NARROW_TILES,
    PASSES,
    PINGPONG_TILES,
    SPLIT_N_TILES,
    SWAP_ROWS,
    SWAP_TILES,
    SWAP_WIDE_ROWS,
    TILES,
    WIDE_SWAP_TILES,
    WIDE_TILES,
    _k16,
    _mnk,
    bk_of,
    cluster_label,
    cluster_shape,
    decode_tile,
    k_padded,
    kernel_frame_error,
    multicast_cluster,
    parse_block_size,
    promote_fits,
    stage_count,
    supported,
    swapped,
    tiles_for,
)
from kernels.spec import TensorMapArg  # noqa: F401
