"""Hopper-native path of gemm_residual: TMA + mbarrier pipeline + wgmma, warp-specialised,
persistent (``gemm_residual_sm90.cu``). Used on compute capability 9.0 for bf16/fp16.

``out[M, N] = A[M, K] @ W[N, K]^T + R[M, N]``; fp32 accumulation, the residual added in fp32 in
the epilogue and the result rounded once. Module-level functions, so that the ``gemm_residual``
spec can delegate to them:

- ``supported(limits, dtype, shape)``: cc 9.0 and bf16/fp16 (and N, K multiples of 8).
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
consumers before the next copy: no overlap); ``s`` >= 2 compiles ``s`` slots.
"""

from __future__ import annotations

from typing import Any

from kernels.spec import Build, DeviceLimits, Launch, TensorMapArg, Violation

SOURCE_FILE = "gemm_residual_sm90.cu"
KERNEL = "gemm_residual_sm90"
ADD_KERNEL = "residual_add_inplace"
BK = 64
"""K per stage: one 128-byte swizzle row of 16-bit elements."""

TILES: dict[str, tuple[int, int, int]] = {
    # name: (BM, BN, consumer warpgroups)
    "128x256": (128, 256, 2),
    "128x128": (128, 128, 2),
    "256x128": (256, 128, 2),
}
"""Tile shapes, best default first. Each consumer warpgroup owns BM / consumers rows."""

DTYPES = ("bf16", "fp16")
BARRIER_BYTES = 16
"""Two 8-byte mbarriers (full, empty) per stage; plus two for the epilogue buffer."""
ALIGN_SLACK = 1024
"""The dynamic shared-memory base is rounded up to 1024 bytes for the 128B swizzle atoms."""
MAX_STAGES = 8


def parse_block_size(block_size: str) -> tuple[int, int, int]:
    """'128x256' or '128x256x64' -> (BM, BN, consumers); ValueError for anything else."""
    text = str(block_size).strip().lower()
    parts = text.split("x")
    if len(parts) == 3:
        if parts[2] != str(BK):
            raise ValueError(f"the Hopper path takes BK = {BK} only (one 128-byte swizzle row), "
                             f"got {parts[2]}")
        text = "x".join(parts[:2])
    if text not in TILES:
        raise ValueError(f"unknown tile {block_size!r}; the Hopper path takes "
                         f"{', '.join(TILES)} (optionally with 'x{BK}')")
    return TILES[text]


def stage_count(stages: int) -> int:
    """MEMORY_PIPELINING -> shared-memory slots compiled (0 = off = one slot, no overlap)."""
    return 1 if stages == 0 else int(stages)


def smem_bytes(block_size: str, stages: int, dtype: str) -> int:
    """Dynamic shared memory for one CTA: stages x (A tile + W tile), the BM x BN epilogue
    buffer (residual in, result out), barriers, alignment."""
    bm, bn, _ = parse_block_size(block_size)
    itemsize = 2
    slots = stage_count(stages)
    return (slots * (bm + bn) * BK * itemsize + bm * bn * itemsize
            + (slots + 1) * BARRIER_BYTES + ALIGN_SLACK)


def supported(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None) -> bool:
    """True where this path applies: compute capability 9.0, bf16/fp16, N and K multiples of 8."""
    if tuple(limits.compute_capability) != (9, 0) or _dtype(dtype) not in DTYPES:
        return False
    if shape:
        _, n, k = _mnk(shape)
        return n % 8 == 0 and k % 8 == 0
    return True


def block_size_options(limits: DeviceLimits, dtype: str) -> list[str]:
    """Tiles whose smallest pipelined configuration (2 stages) fits the per-block limit."""
    if _dtype(dtype) not in DTYPES:
        return []
    return [name for name in TILES
            if smem_bytes(name, 2, dtype) <= limits.shared_memory_per_block_bytes]


def pipelining_options(limits: DeviceLimits, dtype: str, block_size: str) -> list[int]:
    """0 (off) and every stage count from 2 up to what fits in shared memory (at most 8)."""
    parse_block_size(block_size)
    cap = limits.shared_memory_per_block_bytes
    out = [0] if smem_bytes(block_size, 0, dtype) <= cap else []
    out += [s for s in range(2, MAX_STAGES + 1) if smem_bytes(block_size, s, dtype) <= cap]
    return out


def default_knobs(limits: DeviceLimits, dtype: str) -> tuple[str, int]:
    """(BLOCK_SIZE, MEMORY_PIPELINING) measured fastest on the H200: 128x256 with 3 stages."""
    options = block_size_options(limits, dtype)
    if not options:
        raise ValueError(f"no Hopper tile fits {limits.shared_memory_per_block_bytes} bytes")
    block = options[0]
    return block, max(pipelining_options(limits, dtype, block))


def check(task: Any, limits: DeviceLimits) -> list[Violation]:
    """Every constraint of this path, before compiling."""
    out: list[Violation] = []
    dtype = _dtype(task.dtype)
    if tuple(limits.compute_capability) != (9, 0):
        out.append(Violation("device", limits.profile or str(limits.compute_capability),
                             "the wgmma/TMA path needs compute capability 9.0 (sm_90a)",
                             "cc 9.0"))
    if dtype not in DTYPES:
        out.append(Violation("dtype", dtype, "the Hopper path takes bf16 or fp16", "bf16, fp16"))
    try:
        m, n, k = _mnk(task.shape)
    except ValueError as exc:
        return [*out, Violation("shape", task.shape, str(exc))]
    for name, val in (("m", m), ("n", n), ("k", k)):
        if val < 1:
            out.append(Violation(f"shape.{name}", val, "must be positive"))
    for name, val in (("n", n), ("k", k)):
        if val % 8:
            out.append(Violation(f"shape.{name}", val,
                                 "TMA needs 16-byte row strides: a multiple of 8 elements",
                                 "multiple of 8"))
    if m * n >= 2**31 or m * k >= 2**31 or n * k >= 2**31:
        out.append(Violation("shape", f"{m}x{n}x{k}", "indices are 32-bit in the tile scheduler",
                             "each operand < 2**31 elements"))
    block = getattr(task, "block_size", None) or "128x256"
    stages = getattr(task, "memory_pipelining", None)
    stages = 3 if stages is None else stages
    try:
        parse_block_size(block)
    except ValueError as exc:
        return [*out, Violation("block_size", block, str(exc), ", ".join(TILES))]
    if stages == 1 or stages < 0 or stages > MAX_STAGES:
        out.append(Violation("memory_pipelining", stages, "must be 0 (off) or 2..8", "0, 2..8"))
        return out
    need = smem_bytes(block, stages, dtype if dtype in DTYPES else "bf16")
    if need > limits.shared_memory_per_block_bytes:
        fits = pipelining_options(limits, "bf16", block)
        out.append(Violation(
            "memory_pipelining", stages,
            f"{need} bytes of shared memory for {block} x {stage_count(stages)} stages; "
            f"fits: {', '.join(map(str, fits)) or 'none'}",
            f"{limits.shared_memory_per_block_bytes} bytes per block"))
    return out


def defines(block_size: str, stages: int, dtype: str, fuse: bool,
            tmap_global: bool = False) -> dict[str, int]:
    """The compile-time constants of one configuration (validated integers only)."""
    bm, bn, consumers = parse_block_size(block_size)
    if _dtype(dtype) not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: the Hopper path takes bf16 or fp16")
    slots = stage_count(stages)
    if not 1 <= slots <= MAX_STAGES:
        raise ValueError(f"stages {stages}: must be 0 (off) or 2..{MAX_STAGES}")
    return {"BM": bm, "BN": bn, "BK": BK, "STAGES": slots, "NUM_CONSUMERS": consumers,
            "IS_BF16": int(_dtype(dtype) == "bf16"), "FUSE": int(bool(fuse)),
            "TMAP_GLOBAL": int(bool(tmap_global))}


def render(block_size: str, stages: int, dtype: str, fuse: bool = True,
           tmap_global: bool = False) -> str:
    """The CUDA source for one configuration: #defines of integers, then the template."""
    consts = defines(block_size, stages, dtype, fuse, tmap_global)
    head = "".join(f"#define {k} {int(v)}\n" for k, v in consts.items())
    from kernels.spec import KERNEL_DIR

    return head + (KERNEL_DIR / SOURCE_FILE).read_text(encoding="utf-8")


def options(limits: DeviceLimits | None = None) -> tuple[str, ...]:
    """NVRTC options: sm_90a (wgmma and setmaxnreg need the arch-specific target)."""
    return ("--gpu-architecture=sm_90a", "--std=c++17")


def build(task: Any, limits: DeviceLimits, block_size: str, stages: int,
          fuse: bool | None = None, tmap_global: bool = False) -> Build:
    """Render and plan one configuration. ``fuse`` defaults to ``task.fusion`` (True when absent):
    off = the GEMM-only kernel (FUSE=0) then ``residual_add_inplace`` on ``out``."""
    m, n, k = _mnk(task.shape)
    dtype = _dtype(task.dtype)
    if fuse is None:
        fuse = bool(getattr(task, "fusion", True))
    bm, bn, consumers = parse_block_size(block_size)
    source = render(block_size, stages, dtype, fuse, tmap_global)
    tiles = -(-m // bm) * -(-n // bn)
    grid = max(1, min(tiles, limits.sm_count))
    smem = smem_bytes(block_size, stages, dtype)
    maps = (
        TensorMapArg("a", rows=m, cols=k, box_rows=bm, box_cols=BK, swizzle_bytes=128),
        TensorMapArg("w", rows=n, cols=k, box_rows=bn, box_cols=BK, swizzle_bytes=128),
        TensorMapArg("r", rows=m, cols=n, box_rows=bm, box_cols=BK, swizzle_bytes=128),
        TensorMapArg("out", rows=m, cols=n, box_rows=bm, box_cols=BK, swizzle_bytes=128),
    )
    launches = [Launch(KERNEL, (grid, 1, 1), (128 * (consumers + 1), 1, 1), smem,
                       (*maps, m, n, k))]
    functions = [KERNEL]
    if not fuse:
        total8 = m * n // 8
        add_grid = max(1, min(-(-total8 // 256), limits.sm_count * 8))
        launches.append(Launch(ADD_KERNEL, (add_grid, 1, 1), (256, 1, 1), 0, ("out", "r", m, n)))
        functions.append(ADD_KERNEL)
    info = {
        "path": "wgmma+TMA (sm_90a, warp-specialised, persistent)",
        "tile": f"{bm}x{bn}x{BK}",
        "stages": stage_count(stages),
        "pipelining": "off" if stages == 0 else stages,
        "consumer_warpgroups": consumers,
        "threads": 128 * (consumers + 1),
        "grid": grid,
        "tiles": tiles,
        "smem_bytes": smem,
        "fused": bool(fuse),
        "tensor_maps": "by pointer (global)" if tmap_global else "by value (__grid_constant__)",
    }
    return Build(source=source, functions=tuple(functions), launches=tuple(launches),
                 options=options(limits), info=info)


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
