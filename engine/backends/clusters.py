"""How many thread-block clusters of a kernel the device holds at once (``cuOccupancyMaxActiveClusters``,
through ctypes: CuPy does not bind it). A persistent kernel launched in clusters must not have more
clusters than that: a cluster's CTAs all sit in one GPC, so on a 132-SM H200 fewer 4-CTA clusters
fit than 132 / 4 (GPCs whose SM count is not a multiple of 4 leave SMs over), and a cluster past the
resident ones would start only when another has finished all its tiles: a second wave at the end."""
from __future__ import annotations

import ctypes
from typing import Any


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


_lib: Any = None


def _libcuda() -> Any:
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL("libcuda.so.1")
        _lib.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                                                      ctypes.POINTER(_LaunchConfig)]
        _lib.cuOccupancyMaxActiveClusters.restype = ctypes.c_int
    return _lib


def max_active_clusters(func_ptr: int, grid: int, block: int, smem: int) -> int:
    """Clusters of ``func_ptr`` (a CUfunction whose cluster size is compiled in, its dynamic
    shared-memory limit already raised to ``smem``) resident at once. Raises RuntimeError with the
    CUresult where the driver refuses."""
    cfg = _LaunchConfig(grid, 1, 1, block, 1, 1, smem, None, None, 0)
    n = ctypes.c_int(0)
    rc = _libcuda().cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(func_ptr), ctypes.byref(cfg))
    if rc != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed (CUresult {rc})")
    return int(n.value)


def fit_grid(func_ptr: int, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
             cluster: int) -> tuple[int, int, int]:
    """``grid`` capped at the clusters the device holds at once (whole clusters); as is for
    ``cluster`` 1, where the device holds them all, or where the driver has no
    ``cuOccupancyMaxActiveClusters`` (before CUDA 12: no clusters either). RuntimeError where the
    driver refuses the query or no cluster fits."""
    if cluster <= 1:
        return grid
    try:
        _libcuda()
    except (OSError, AttributeError):
        return grid
    most = max_active_clusters(func_ptr, grid[0], block[0], smem)
    if most < 1:
        raise RuntimeError(f"no cluster of {cluster} CTAs with {smem} bytes of shared memory fits this device")
    return (min(grid[0], most * cluster), grid[1], grid[2])
