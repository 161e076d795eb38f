"""TMA tensor maps: encode a :class:`kernels.spec.TensorMapArg` into the 128-byte ``CUtensorMap``.

The encoding calls ``cuTensorMapEncodeTiled`` from the driver library (``libcuda.so.1``) through
ctypes; it needs no context and no CuPy, so this module imports neither at the top and can be
imported (not called) on machines without a driver.

How the descriptor reaches a kernel launched through CuPy (``RawKernel``/``RawModule``): by value.
CuPy 14 passes a NumPy structured/void scalar as a by-value struct argument: its ``CScalar`` copies
the scalar's bytes and hands the driver a pointer to them, and ``cuLaunchKernel`` copies
``sizeof(param)`` bytes into the parameter buffer, laid out by the kernel's own metadata. So the
kernel declares ``const __grid_constant__ TmaDesc tmap`` (a 64-byte-aligned 128-byte struct) and
the host passes ``as_kernel_arg(bytes)``, a ``numpy.void`` of 128 bytes (dtype from
``cupy.make_aligned_dtype(..., alignment=64)`` where available). Checked on the CPU:
``cupy._core._scalar.CScalar(numpy.void)`` holds the exact 128 bytes. On the H200 (CuPy 14.2,
driver 580) ``bench/sm90_gemm.py`` verified it: the kernel's output matches the float64 reference
(a wrong descriptor would fail).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64

# CUtensorMapDataType
# tf32 data is fp32 in memory (the tensor cores read it as tf32)
_DATA_TYPES = {"fp16": 6, "fp32": 7, "tf32": 7, "bf16": 9, "u8": 0, "u16": 1, "u32": 2}
_ITEMSIZE = {"fp16": 2, "fp32": 4, "tf32": 4, "bf16": 2, "u8": 1, "u16": 2, "u32": 4}
# CUtensorMapSwizzle
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_INTERLEAVE_NONE = 0
_L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}  # CUtensorMapL2promotion by bytes
_OOB_FILL_ZEROS = 0
_CUDA_ERROR_NOT_INITIALIZED = 3

_lib: Any = None


class TensorMapError(RuntimeError):
    """The driver refused to encode a tensor map (message names the argument and the code)."""


def _driver() -> Any:
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("cuda") or "libcuda.so.1"
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            try:
                lib = ctypes.CDLL(name)
            except OSError as exc:
                raise TensorMapError(f"cannot load the CUDA driver library ({exc}); TMA tensor "
                                     "maps need an NVIDIA driver") from None
        fn = lib.cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        fn.argtypes = [
            ctypes.c_void_p,                   # CUtensorMap*
            ctypes.c_int,                      # CUtensorMapDataType
            ctypes.c_uint32,                   # rank
            ctypes.c_void_p,                   # globalAddress
            ctypes.POINTER(ctypes.c_uint64),   # globalDim
            ctypes.POINTER(ctypes.c_uint64),   # globalStrides (rank - 1, bytes)
            ctypes.POINTER(ctypes.c_uint32),   # boxDim
            ctypes.POINTER(ctypes.c_uint32),   # elementStrides
            ctypes.c_int,                      # interleave
            ctypes.c_int,                      # swizzle
            ctypes.c_int,                      # l2Promotion
            ctypes.c_int,                      # oobFill
        ]
        lib.cuInit.restype = ctypes.c_int
        lib.cuInit.argtypes = [ctypes.c_uint]
        _lib = lib
    return _lib


def encode_2d(ptr: int, dtype: str, rows: int, cols: int, box_rows: int, box_cols: int,
              swizzle_bytes: int = 128, row_stride_elems: int | None = None,
              l2_promotion: int = 256) -> bytes:
    """The CUtensorMap of a row-major ``rows x cols`` matrix at device address ``ptr``.

    Dimension 0 is the contiguous one (``cols``); boxes are ``box_rows x box_cols`` elements;
    out-of-bounds elements read as zeros. Raises TensorMapError (with the driver's code) on a
    bad argument: unaligned address (16 B), row stride not a multiple of 16 bytes, a box side
    over 256, or a swizzled box row wider than the swizzle span. ``l2_promotion``: the L2 fetch
    size (bytes: 0, 64, 128 or 256) a box row's pieces are promoted to."""
    if dtype not in _DATA_TYPES:
        raise TensorMapError(f"dtype {dtype!r} has no tensor-map type (known: {', '.join(_DATA_TYPES)})")
    if swizzle_bytes not in _SWIZZLE:
        raise TensorMapError(f"swizzle_bytes={swizzle_bytes}: must be 0, 32, 64 or 128")
    if l2_promotion not in _L2_PROMOTION:
        raise TensorMapError(f"l2_promotion={l2_promotion}: must be 0, 64, 128 or 256")
    item = _ITEMSIZE[dtype]
    stride = (row_stride_elems or cols) * item
    if ptr % 16:
        raise TensorMapError(f"device address {ptr:#x} is not 16-byte aligned")
    if stride % 16:
        raise TensorMapError(f"row stride {stride} bytes is not a multiple of 16")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise TensorMapError(f"box {box_rows}x{box_cols}: each side must be 1..256")
    if swizzle_bytes and box_cols * item > swizzle_bytes:
        raise TensorMapError(f"box row of {box_cols * item} bytes exceeds the {swizzle_bytes}B swizzle")
    lib = _driver()
    out = ctypes.create_string_buffer(TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN)
    addr = ctypes.addressof(out)
    aligned = (addr + TENSOR_MAP_ALIGN - 1) & ~(TENSOR_MAP_ALIGN - 1)
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(stride)
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    estr = (ctypes.c_uint32 * 2)(1, 1)
    args = (ctypes.c_void_p(aligned), _DATA_TYPES[dtype], 2, ctypes.c_void_p(ptr), dims, strides,
            box, estr, _INTERLEAVE_NONE, _SWIZZLE[swizzle_bytes], _L2_PROMOTION[l2_promotion],
            _OOB_FILL_ZEROS)
    rc = lib.cuTensorMapEncodeTiled(*args)
    if rc == _CUDA_ERROR_NOT_INITIALIZED:
        lib.cuInit(0)
        rc = lib.cuTensorMapEncodeTiled(*args)
    if rc != 0:
        raise TensorMapError(
            f"cuTensorMapEncodeTiled failed (CUresult {rc}) for {rows}x{cols} {dtype} at "
            f"{ptr:#x}, box {box_rows}x{box_cols}, swizzle {swizzle_bytes}B")
    return ctypes.string_at(aligned, TENSOR_MAP_BYTES)


def encode(arg: Any, ptr: int, dtype: str) -> bytes:
    """Encode a :class:`kernels.spec.TensorMapArg` for the buffer at device address ``ptr``."""
    return encode_2d(ptr, dtype, arg.rows, arg.cols, arg.box_rows, arg.box_cols,
                     arg.swizzle_bytes, l2_promotion=arg.l2_promotion)


def as_kernel_arg(desc: bytes) -> Any:
    """A by-value kernel argument for CuPy: a 128-byte ``numpy.void`` (64-byte aligned dtype)."""
    import numpy as np

    base = np.dtype([("bytes", np.uint8, (TENSOR_MAP_BYTES,))])
    try:
        import cupy

        dt = cupy.make_aligned_dtype(base, alignment=TENSOR_MAP_ALIGN)
    except (ImportError, AttributeError):
        dt = base
    return np.frombuffer(bytes(desc), dtype=dt)[0]

