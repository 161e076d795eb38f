"""Launches with programmatic dependent launch (PDL, compute capability 9.0 and later) through
``cuLaunchKernelEx``, by ctypes: CuPy launches through ``cuLaunchKernel``, which takes no launch
attributes.

A kernel launched so may start while the kernel before it in the stream is still running: its CTAs
take SMs as the earlier kernel's leave and run their set-up (shared-memory barriers, tensor-map
prefetch) there, and ``griddepcontrol.wait`` (``grid_dependency_wait`` in kernels/mbarrier.cuh)
holds each thread until the earlier kernel has finished and its writes are visible. That is only
correct for a kernel that waits before its first global read or write: ``Launch.pdl`` says so, and
only such launches come here. Without the attribute the wait returns at once, so the same binary is
correct launched either way (docs/decisions/ADR-0010-pdl.md)."""
from __future__ import annotations

import ctypes
import os
from typing import Any

from engine.backends.base import RunFailure
from engine.backends.clusters import _LaunchConfig

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
TENSOR_MAP_BYTES = 128
ENV_OFF = "SOL_COCKPIT_NO_PDL"
"""Set to 1: every launch goes through CuPy's plain launch (for an A/B, or a driver that misbehaves)."""


class _Attr(ctypes.Structure):
    """``CUlaunchAttribute``: the id, padding to 8 bytes, then the 64-byte value union (whose first
    int is ``programmaticStreamSerializationAllowed``)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]


_lib: Any = None


def _libcuda() -> Any:
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p,
                                         ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        lib.cuLaunchKernelEx.restype = ctypes.c_int
        _lib = lib
    return _lib


OFF_VALUES = {"1": True, "true": True, "yes": True, "": False, "0": False, "false": False, "no": False}


def switched_off() -> bool:
    """``SOL_COCKPIT_NO_PDL`` read; RunFailure naming it for a value that is neither yes nor no."""
    raw = os.environ.get(ENV_OFF, "")
    if raw.strip().lower() not in OFF_VALUES:
        raise RunFailure("invalid", f"{ENV_OFF}={raw!r}: expected 1 (launch plainly) or 0 (default)",
                         "constraint")
    return OFF_VALUES[raw.strip().lower()]


def enabled(compute_capability: tuple[int, int]) -> bool:
    """PDL launches apply: compute capability 9.0 or later, a driver with ``cuLaunchKernelEx`` (CUDA
    12 and later), not switched off by ``SOL_COCKPIT_NO_PDL`` (RunFailure for a malformed value)."""
    if switched_off() or compute_capability < (9, 0):
        return False
    try:
        _libcuda()
    except (OSError, AttributeError):  # no driver library, or one without cuLaunchKernelEx
        return False
    return True


def _param(value: Any) -> ctypes._SimpleCData | ctypes.Array[Any]:
    """One kernel argument as the host bytes the driver copies: a device array's address, a 128-byte
    tensor map (a ``numpy.void`` from ``tensormap.as_kernel_arg``), an int32 or a float32."""
    import numpy as np

    ptr = getattr(getattr(value, "data", None), "ptr", None)
    if ptr is not None:  # a CuPy array
        return ctypes.c_uint64(int(ptr))
    if isinstance(value, np.void):
        raw = bytes(value.tobytes())
        if len(raw) != TENSOR_MAP_BYTES:
            raise TypeError(f"a by-value struct argument of {len(raw)} bytes (tensor maps are {TENSOR_MAP_BYTES})")
        return (ctypes.c_ubyte * TENSOR_MAP_BYTES).from_buffer_copy(raw)
    if isinstance(value, np.float32):
        return ctypes.c_float(float(value))
    if isinstance(value, (np.int32, int)):
        return ctypes.c_int32(int(value))
    raise TypeError(f"kernel argument of type {type(value).__name__}")


class DependentLaunch:
    """One launch of ``function`` (a CuPy ``Function``) with its arguments packed once, launched with
    PDL on the stream current at each call. Raises CuPy's ``CUDADriverError`` where the driver
    refuses, as a plain launch would."""

    def __init__(self, function: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: tuple[Any, ...], shared_mem: int) -> None:
        self._values = [_param(a) for a in args]
        self._params = (ctypes.c_void_p * max(1, len(self._values)))(
            *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in self._values])
        self._attr = _Attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, b"", 1, b"")
        self._cfg = _LaunchConfig(grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem,
                                  None, ctypes.cast(ctypes.pointer(self._attr), ctypes.c_void_p), 1)
        self._function = function  # keeps the module loaded
        # a CuPy Function has the CUfunction as ``ptr``; a RawKernel holds that Function as ``kernel``
        self._ptr = ctypes.c_void_p(int(function.ptr if hasattr(function, "ptr") else function.kernel.ptr))
        self._launch = _libcuda().cuLaunchKernelEx

    def __call__(self) -> None:
        import cupy as cp
        from cupy.cuda import driver

        self._cfg.hStream = cp.cuda.get_current_stream().ptr or None
        rc = self._launch(ctypes.byref(self._cfg), self._ptr, self._params, None)
        if rc != 0:
            driver.check_status(rc)
