"""This GPU's measured ceilings for ``tui calibrate``: a large device-to-device copy and large
cuBLAS GEMMs per dtype."""

from __future__ import annotations

from typing import Any

import cupy as cp
import numpy as np
from cupy.cuda import runtime

from engine.backends.cuda_blas import Blas
from engine.backends.cuda_convert import STORAGE, to_storage


def measure_ceilings(device: int, log: Any = None, copy_bytes: int = 2**30) -> dict[str, Any]:
    """This GPU's ceilings, as METHOD.md asks: a large device-to-device copy (bytes read + written
    over time) and large cuBLAS GEMMs per dtype on N(0,1) data. Medians of CUDA-event timings."""
    cp.cuda.Device(device).use()
    say = log or (lambda msg: None)

    def median_ms(fn: Any, warm: int, reps: int) -> float:
        for _ in range(warm):
            fn()
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(reps):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1))
        return float(np.median(times))

    rng = cp.random.default_rng(0)

    def copy_ms() -> float:
        src = rng.integers(0, 255, size=copy_bytes, dtype=cp.uint8)
        dst = cp.empty_like(src)
        stream = cp.cuda.get_current_stream().ptr
        return median_ms(lambda: runtime.memcpyAsync(dst.data.ptr, src.data.ptr, copy_bytes,
                                                     runtime.memcpyDeviceToDevice, stream), 3, 20)

    def gemm_ms(dtype: str, n: int) -> float:
        a = to_storage(rng.standard_normal((n, n), dtype=cp.float32), dtype)
        w = to_storage(rng.standard_normal((n, n), dtype=cp.float32), dtype)
        c = cp.empty((n, n), dtype=STORAGE[dtype])
        blas = Blas(dtype)
        return median_ms(lambda: blas.gemm_nt(a, w, c), 3, 10)

    ms = copy_ms()
    copy_gbps = 2 * copy_bytes / (ms * 1e-3) / 1e9
    say(f"device-to-device copy of {copy_bytes / 2**30:.0f} GiB: {ms:.3f} ms, {copy_gbps:.0f} GB/s (read + write)")
    tflops: dict[str, float] = {}
    for dtype, n in (("bf16", 8192), ("fp16", 8192), ("tf32", 8192), ("fp32", 4096)):
        ms = gemm_ms(dtype, n)
        tflops[dtype] = 2 * n**3 / (ms * 1e-3) / 1e12
        say(f"cuBLAS {dtype} GEMM {n}^3: {ms:.3f} ms, {tflops[dtype]:.1f} TFLOP/s")
    props = runtime.getDeviceProperties(device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"copy_gbps": copy_gbps, "tflops": tflops, "gpu_name": name, "copy_bytes": copy_bytes}
