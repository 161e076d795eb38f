"""cuBLAS gemmEx through CuPy's bindings: the peers' GEMM, the ceilings' GEMM and the bench
scripts' cuBLAS baseline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cupy as cp
import numpy as np
from cupy.cuda import cublas, runtime


class Blas:
    """cuBLAS through CuPy's bindings: c[M,N] = alpha * a[M,K] @ w[N,K]^T + beta * c, fp32 compute."""

    _TYPES = {"bf16": runtime.CUDA_R_16BF, "fp16": runtime.CUDA_R_16F, "fp32": runtime.CUDA_R_32F,
              "tf32": runtime.CUDA_R_32F}

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def bind(self, a: Any, w: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> Callable[[], None]:
        """The GEMM as a call with every argument prepared (stream and pointer mode set now), so a
        timed call does no host work beyond ``gemmEx`` itself."""
        m, k = a.shape
        n = w.shape[0]
        handle = cp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        al, be = np.array(alpha, np.float32), np.array(beta, np.float32)
        t = self._TYPES[self.dtype]
        compute = cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if self.dtype == "tf32" else cublas.CUBLAS_COMPUTE_32F

        def run() -> None:
            # Row-major C = A W^T is column-major C^T = W A^T: op(W)=T (ld K), op(A)=N (ld K), ldc N.
            cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k, al.ctypes.data,
                          w.data.ptr, t, k, a.data.ptr, t, k, be.ctypes.data, c.data.ptr, t, n,
                          compute, cublas.CUBLAS_GEMM_DEFAULT)
        return run

    def gemm_nt(self, a: Any, w: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> None:
        self.bind(a, w, c, alpha, beta)()
