"""Storage dtypes and conversions on the GPU: fp32 to bf16 bits (round to nearest even), bf16 bits
to float64, and the CuPy view of an array a peer library can use."""

from __future__ import annotations

from typing import Any

import cupy as cp
import numpy as np

try:  # a real bfloat16 dtype lets CuPy's own matmul run as a peer
    import ml_dtypes  # type: ignore[import-not-found,unused-ignore]  # optional; absent here, typed where present

    BF16: Any = np.dtype(ml_dtypes.bfloat16)
    cp.zeros(1, dtype=BF16)
except Exception:
    BF16 = None

STORAGE = {"bf16": np.uint16, "fp16": np.float16, "fp32": np.float32, "tf32": np.float32}
BITS = {"bf16": np.uint16, "fp16": np.uint16, "fp32": np.uint32, "tf32": np.uint32}
"""``STORAGE``: the array dtype of each task dtype (bf16 as uint16 bits); ``BITS``: the unsigned
integer view its NaN and poison patterns are written through."""

_f32_to_bf16 = cp.ElementwiseKernel(
    "float32 x", "uint16 y",
    "unsigned int u = __float_as_uint(x); u += 0x7FFFu + ((u >> 16) & 1u); y = (unsigned short)(u >> 16);",
    "sol_f32_to_bf16")
_bf16_to_f64 = cp.ElementwiseKernel(
    "uint16 b", "float64 y", "y = (double)__uint_as_float(((unsigned int)b) << 16);", "sol_bf16_to_f64")


def to_storage(x32: Any, dtype: str) -> Any:
    if dtype == "bf16":
        return _f32_to_bf16(x32)
    return x32.astype(STORAGE[dtype])


def to_f64(x: Any, dtype: str) -> Any:
    return _bf16_to_f64(x) if dtype == "bf16" else x.astype(cp.float64)


def native_view(x: Any, dtype: str) -> Any:
    """The array as CuPy's own dtype (for peers); None when CuPy has no bfloat16 here."""
    if dtype != "bf16":
        return x
    return None if BF16 is None else x.view(BF16)
