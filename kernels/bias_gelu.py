"""Bias + GELU, fused: ``out = gelu(x + bias)`` in one pass over the data (memory-bound).

GELU is the tanh approximation (GPT-2/Gemma's ``gelu_pytorch_tanh``):
``gelu(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))``, evaluated in fp32 on the fp32 sum
x + bias and rounded once; the reference is the same formula in float64.

Knobs:

* BLOCK_SIZE = threads per block ("128", "256", "512", "1024"); the grid is persistent
  (sm_count x resident threads per SM / BLOCK_SIZE blocks: one full SM's worth) and strides over the array as
  16-byte vectors.
* MEMORY_PIPELINING = 16-byte vectors each thread has in flight: off = load one vector, compute,
  store, next; S (2, 4, 8) = S loads issued before the first is used.
* fusion off: ``bias_add`` writes out = x + bias (rounded), then ``gelu_inplace`` reads it back and
  overwrites it: two more passes over [M, N] (4 instead of 2) and a second launch.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kernels.rowwise import DTYPE_CODE, ITEMSIZE, check_rows, threads_per_sm
from kernels.rowwise import dtype_of as _dtype
from kernels.spec import (
    INT32_MAX,
    Buffer,
    Build,
    DeviceLimits,
    KernelPlan,
    KernelSpec,
    Launch,
    PeerSpec,
    Violation,
    fill_knobs,
    torch_view,
    with_fields,
)

STAGE_CHOICES = (0, 2, 4, 8)
"""MEMORY_PIPELINING: off (0) or 16-byte vectors in flight per thread."""
GELU_C = math.sqrt(2.0 / math.pi)


def gelu_tanh(xp: Any, v: Any) -> Any:
    """The tanh-approximation GELU on any array module."""
    return 0.5 * v * (1.0 + xp.tanh(GELU_C * (v + 0.044715 * v * v * v)))


class BiasGeluSpec(KernelSpec):
    """Bias add + GELU (tanh approximation), fused or as two kernels."""

    source_files = ("bias_gelu.py", "bias_gelu.cu", "rowwise.py", "vec16.cuh")

    name = "bias_gelu"
    title = "bias + GELU (tanh)"
    description = "out = gelu_tanh(x + bias); one pass, 16-byte vectors, fp32 math"
    dims = ("m", "n")
    default_shape = {"m": 8192, "n": 10240}
    outputs = ("out",)

    def block_size_options(self, limits: DeviceLimits, dtype: str,
                           shape: dict[str, int] | None = None) -> list[str]:
        if dtype not in DTYPE_CODE:
            return []
        return [str(t) for t in (256, 128, 512, 1024) if t <= limits.max_threads_per_block]

    def pipelining_options(self, limits: DeviceLimits, dtype: str, block_size: str,
                           shape: dict[str, int] | None = None) -> list[int]:
        if dtype not in DTYPE_CODE or str(block_size) not in self.block_size_options(limits, dtype):
            return []
        return [8, 4, 2, 0]

    def default_knobs(self, limits: DeviceLimits, dtype: str,
                      shape: dict[str, int] | None = None) -> tuple[str, int]:
        """256 threads, one vector in flight per thread: with a full SM of threads that is already
        32 KB of loads outstanding per SM, and on the H200 it measured best (3.52 TB/s bf16 against
        3.18-3.26 for 2-8 in flight: deeper unrolling coarsens the grid-stride and its last pass)."""
        opts = self.block_size_options(limits, dtype)
        if not opts:
            raise ValueError(f"{self.name}: dtype {dtype} not supported")
        return opts[0], 0

    def check(self, task: Any, limits: DeviceLimits) -> list[Violation]:
        def size(shape: dict[str, int], dtype: str) -> list[Violation]:
            if shape["m"] * shape["n"] * ITEMSIZE[dtype] // 16 > INT32_MAX:
                return [Violation("shape.m", shape["m"], "m * n is more than 2^31 16-byte vectors",
                                  "32-bit vector indices")]
            return []

        out, _, _ = check_rows(self, task, limits, size)
        if any(v.field == "dtype" for v in out):
            return out
        st = task.memory_pipelining
        if st is not None and st not in STAGE_CHOICES:
            out.append(Violation("memory_pipelining", st, "vectors in flight not offered", "off (0), 2, 4 or 8"))
        return out

    def flops(self, shape: dict[str, int]) -> int:
        """10 per element: the bias add, then v^2, 1 + 0.044715 v^2 (FMA = 2), times c*v (2),
        tanh (counted as 1), 1 + tanh, times 0.5 v (2)."""
        s = self.normalize_shape(shape)
        return 10 * s["m"] * s["n"]

    def bytes_moved(self, shape: dict[str, int], dtype: str) -> int:
        """x read once, out written once, the bias read once."""
        s = self.normalize_shape(shape)
        return ITEMSIZE[dtype] * (2 * s["m"] * s["n"] + s["n"])

    def buffers(self, task: Any) -> list[Buffer]:
        s = self.normalize_shape(dict(task.shape))
        dt = _dtype(task)
        return [Buffer("x", (s["m"], s["n"]), dt, "input"), Buffer("bias", (s["n"],), dt, "input"),
                Buffer("out", (s["m"], s["n"]), dt, "output")]

    def source(self, dtype: str, threads: int, stages: int, fusion: bool) -> str:
        defines = {"BG_DTYPE": DTYPE_CODE[dtype], "BG_THREADS": int(threads),
                   "BG_UNROLL": max(1, int(stages)), "BG_FUSE": int(bool(fusion))}
        head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
        return head + self.vec16(defines["BG_DTYPE"]) + self.read_source("bias_gelu.cu")

    def _resolve(self, task: Any, limits: DeviceLimits) -> tuple[int, int]:
        """(threads, stages) of a task, its unset knobs filled by the kernel's rules (``fill_knobs``)."""
        task = with_fields(task, fill_knobs(self, task, limits))
        return int(str(task.block_size)), task.memory_pipelining

    def describe(self, plan: KernelPlan, task: Any, limits: DeviceLimits) -> dict[str, Any]:
        return self._layout(replace(plan, task=task), limits)[1]

    def render(self, plan: KernelPlan, limits: DeviceLimits) -> Build:
        launches, _, source_args = self._layout(plan, limits)
        return Build(source=self.source(*source_args), functions=tuple(ln.function for ln in launches),
                     launches=tuple(launches), options=("-std=c++17",), info=dict(plan.info))

    def _layout(self, plan: KernelPlan, limits: DeviceLimits) -> tuple[list[Launch], dict[str, Any], tuple[Any, ...]]:
        """(launches, display info, the source's arguments) of a plan."""
        task = plan.task
        dtype = _dtype(task)
        s = self.normalize_shape(dict(task.shape))
        m, n = s["m"], s["n"]
        threads, stages = int(str(plan.block_size)), plan.memory_pipelining
        fusion = bool(task.fusion)
        unroll = max(1, stages)
        nvec = m * n * ITEMSIZE[dtype] // 16
        grid = (max(1, min(math.ceil(nvec / (threads * unroll)), limits.sm_count * (threads_per_sm(limits) // threads))), 1, 1)
        block = (threads, 1, 1)
        if fusion:
            launches = [Launch("bias_gelu", grid, block, 0, ("x", "bias", "out", m, n))]
        else:
            launches = [Launch("bias_add", grid, block, 0, ("x", "bias", "out", m, n)),
                        Launch("gelu_inplace", grid, block, 0, ("out", m, n))]
        info = {"threads": threads, "vectors_in_flight": unroll, "grid": grid, "fusion": fusion,
                "path": f"16-byte vectors, {unroll} in flight per thread"}
        return launches, info, (dtype, threads, stages, fusion)

    def reference(self, xp: Any, inputs: dict[str, Any]) -> Any:
        """float64 gelu_tanh(x + bias)."""
        v = inputs["x"].astype(xp.float64) + inputs["bias"].astype(xp.float64)
        return gelu_tanh(xp, v)

    def rtol(self, dtype: str) -> float:
        return {"bf16": 1.6e-2, "fp16": 2e-3, "fp32": 1e-5}[dtype]

    def peers(self, task: Any) -> list[PeerSpec]:
        """PyTorch's eager bias add then gelu(tanh) (the baseline where torch is installed; copied into
        ours for verification); CuPy ops in fp32, a strawman, the baseline only without torch."""
        return [PeerSpec("torch_bias_gelu", "torch add + gelu(tanh) (PyTorch eager, + a copy into out)",
                         _peer_torch, baseline=True, dtypes=("bf16", "fp16", "fp32"), needs="torch"),
                PeerSpec("cupy_bias_gelu", "CuPy ops in fp32 (strawman: unfused passes)", _peer_cupy,
                         baseline=True, dtypes=("bf16", "fp16", "fp32"))]

    def sim_efficiency(self, task: Any, limits: DeviceLimits) -> float:
        """Fraction of the bandwidth SOL for the simulated device (factors from an H200: ADR-0005):
        off 0.73, 2 in flight 0.68, 4 and 8 0.67; fusion off 0.54x (twice the bytes, two
        launches)."""
        try:
            _, stages = self._resolve(task, limits)
        except (ValueError, TypeError):
            return 0.05
        f_pipe = {0: 0.73, 2: 0.68, 4: 0.67}.get(stages, 0.67)
        f_fuse = 1.0 if task.fusion else 0.54
        return max(0.01, min(0.95, f_pipe * f_fuse))


def _peer_torch(xp: Any, blas: Any, inputs: dict[str, Any], outs: dict[str, Any]) -> None:
    import torch

    v = torch_view(inputs["x"]) + torch_view(inputs["bias"])
    torch_view(outs["out"]).copy_(torch.nn.functional.gelu(v, approximate="tanh"))


def _peer_cupy(xp: Any, blas: Any, inputs: dict[str, Any], outs: dict[str, Any]) -> None:
    v = inputs["x"].astype(xp.float32) + inputs["bias"].astype(xp.float32)
    outs["out"][...] = gelu_tanh(xp, v).astype(outs["out"].dtype)


SPEC = BiasGeluSpec()
