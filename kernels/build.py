"""What a kernel's ``render`` returns: the source and its launches (``Build``, ``Launch``), the
buffers one run needs (``Buffer``, ``TensorMapArg``), and a peer timed beside it (``PeerSpec``).
Values only; ``kernels.spec`` names them as part of the kernel contract."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Buffer:
    """A device buffer one run needs. Inputs are filled with N(0,1); outputs are poisoned."""

    name: str
    shape: tuple[int, ...]
    dtype: Literal["bf16", "fp16", "fp32"]
    role: Literal["input", "output", "scratch"]


@dataclass(frozen=True)
class TensorMapArg:
    """A TMA tensor map (CUtensorMap, 128 bytes) over a 2-D row-major buffer, passed by value
    (``const __grid_constant__ CUtensorMap``). The backend encodes it with
    cuTensorMapEncodeTiled for the buffer's device address; box sizes are in elements."""

    buffer: str
    rows: int
    cols: int
    box_rows: int
    box_cols: int
    swizzle_bytes: int = 128
    """0 (none), 32, 64 or 128: the shared-memory swizzle the consumer expects."""
    l2_promotion: int = 256
    """0 (none), 64, 128 or 256: the L2 fetch size a box's row pieces are promoted to."""


@dataclass(frozen=True)
class Launch:
    """One kernel launch. ``args`` holds buffer names (str), int32 scalars (int) and tensor maps."""

    function: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem_bytes: int
    args: tuple[str | int | TensorMapArg, ...]
    cluster: int = 1
    """CTAs per thread-block cluster (the kernel's own ``__cluster_dims__``). A persistent grid of
    clusters must be co-resident: the backend caps ``grid`` at the clusters the device can hold at
    once (``cuOccupancyMaxActiveClusters``); the kernel strides by ``gridDim.x / cluster``, so any
    whole number of clusters is correct."""
    pdl: bool = False
    """The kernel runs ``grid_dependency_wait()`` (kernels/mbarrier.cuh) before its first global read
    or write, so it may be launched with programmatic dependent launch (engine/backends/pdl.py): its
    set-up overlaps the end of the kernel before it in the stream."""


@dataclass(frozen=True)
class Build:
    """Everything needed to compile and launch one configuration."""

    source: str
    functions: tuple[str, ...]
    launches: tuple[Launch, ...]
    options: tuple[str, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)
    """Resolved knobs and geometry for display: tile, stages, path (e.g. 'mma.sync+cp.async')."""
    scratch: tuple[Buffer, ...] = ()
    """Device buffers this configuration needs beyond the spec's ``buffers`` (e.g. the 3xTF32
    operand split), allocated by the backend next to the outputs and never verified."""

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


@dataclass(frozen=True)
class PeerSpec:
    """A peer implementation timed on the same inputs. ``run(xp, blas, inputs, outs)`` writes the
    output buffers in ``outs`` (name -> array); ``blas`` is the backend's cuBLAS wrapper (``gemm_nt``). ``baseline`` marks the
    unfused framework baseline (T_b of the SOL-ExecBench score)."""

    name: str
    label: str
    run: Callable[..., None]
    baseline: bool = False
    dtypes: tuple[str, ...] = ("bf16", "fp16", "fp32", "tf32")
    verify: bool = True
    """False for peers that compute only part of the function (e.g. the GEMM without R)."""
    needs: str | None = None
    """The Python package the peer runs on (``torch``): where it is not installed the peer is
    reported unavailable, on the GPU and on the simulated device alike."""
    prepare: Callable[..., None] | None = None
    """Untimed set-up, same arguments as ``run``, called before the warm-ups and before the
    verification run: for a peer that works in place on its output (cuBLAS with beta=1 adds into C,
    so C must first hold R), so that the copy is not timed as part of the peer."""
