"""What the row-wise memory-bound kernels (``add_rmsnorm``, ``bias_gelu``) share: the dtypes and
thread counts they offer, resident threads per SM, and the checks of dtype, an ``[m, n]`` shape
moved in 16-byte vectors, and BLOCK_SIZE as threads per block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernels.spec import DeviceLimits, KernelSpec, Violation

THREAD_CHOICES = (128, 256, 512, 1024)
DTYPE_CODE = {"bf16": 0, "fp16": 1, "fp32": 2}
ITEMSIZE = {"bf16": 2, "fp16": 2, "fp32": 4}


def dtype_of(task: Any) -> str:
    return str(getattr(task.dtype, "value", task.dtype))


THREADS_1536_CC = ((8, 6), (8, 7), (8, 9), (12, 0), (12, 1))
"""Compute capabilities whose SMs hold 1536 resident threads (CUDA C++ Programming Guide, limits per
compute capability): GA10x, Ada and GeForce Blackwell (sm_120). The others here hold 2048."""


def threads_per_sm(limits: DeviceLimits | None) -> int:
    """Resident threads per SM: 1536 on sm_86/sm_89/sm_120, 2048 on sm_80, sm_90 and sm_100. A block
    count per SM above this is ignored by ptxas (``.minnctapersm``) and oversubscribes the grid."""
    if limits is not None and tuple(limits.compute_capability) in THREADS_1536_CC:
        return 1536
    return 2048


def check_rows(spec: KernelSpec, task: Any, limits: DeviceLimits,
               size_check: Callable[[dict[str, int], str], list[Violation]]
               ) -> tuple[list[Violation], dict[str, int] | None, int | None]:
    """(violations, shape or None, threads or None) for the checks both kernels make: dtype (an
    unknown one ends the check), m and n in int32 range, n a multiple of 8, the kernel's own size
    limit (``size_check(shape, dtype)``), and BLOCK_SIZE one of ``THREAD_CHOICES`` within the
    device's threads per block."""
    dtype = dtype_of(task)
    if dtype not in DTYPE_CODE:
        return [Violation("dtype", dtype, "unknown dtype", "bf16, fp16 or fp32")], None, None
    out, shape = spec.shape_violations(task, "m, n")
    if shape is not None:
        if shape["n"] % 8:
            out.append(Violation("shape.n", shape["n"],
                                 "n must be a multiple of 8 (rows move in 16-byte vectors)", "multiple of 8"))
        out += size_check(shape, dtype)
    threads = None
    bs = task.block_size
    if bs is not None:
        allowed = ", ".join(str(t) for t in THREAD_CHOICES)
        if str(bs) not in {str(t) for t in THREAD_CHOICES}:
            out.append(Violation("block_size", bs, "expected threads per block", allowed))
        elif int(str(bs)) > limits.max_threads_per_block:
            out.append(Violation("block_size", bs, f"needs {bs} threads per block",
                                 f"{limits.max_threads_per_block} threads"))
        else:
            threads = int(str(bs))
    return out, shape, threads
