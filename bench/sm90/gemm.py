"""The Hopper GEMM bench's building blocks: N(0,1) inputs (16-bit data as bit patterns), a compiled
build bound to its buffers (``Runner``), the float64 reference and its comparison, event timing
(the engine's ``launch_times``), cuBLAS (the engine's ``Blas``), torch matmul + add and the
SOL-ExecBench score."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import cupy as cp
import numpy as np

from engine import Blas, TaskSpec, encode_tensor_map, fit_cluster_grid, get_spec, tensor_map_kernel_arg
from engine import launch_times as _event_times
from kernels.gemm_residual_experiments import hopper_plan
from kernels.spec import Build, DeviceLimits, TensorMapArg, plan_or_raise

SEED = (8192, 2560, 2560)
F32 = ("tf32", "fp32")
"""fp32 data in memory (tf32: one tensor-core product; fp32: 3xTF32)."""


def to_bits(x: cp.ndarray, dtype: str) -> cp.ndarray:
    """float32 -> 16-bit bit patterns (round to nearest even), as uint16."""
    if dtype == "fp16":
        return x.astype(cp.float16).view(cp.uint16)
    u = x.astype(cp.float32).view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)


def from_bits(b: cp.ndarray, dtype: str) -> cp.ndarray:
    if dtype == "fp16":
        return b.view(cp.float16).astype(cp.float32)
    return (b.astype(cp.uint32) << 16).view(cp.float32)


def limits_of_device() -> DeviceLimits:
    dev = cp.cuda.Device()
    rt = cp.cuda.runtime
    return DeviceLimits(
        compute_capability=tuple(int(c) for c in dev.compute_capability),  # type: ignore[arg-type]
        sm_count=rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, dev.id),
        shared_memory_per_block_bytes=rt.deviceGetAttribute(
            rt.cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.id),
        shared_memory_per_sm_bytes=rt.deviceGetAttribute(
            rt.cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev.id),
        profile="device",
    )


_modules: dict[str, cp.RawModule] = {}


def product_build(limits: DeviceLimits, shape: dict[str, int], dtype: str, fusion: bool = True) -> tuple[Build, str, int]:
    """The product's build of ``gemm_residual`` at this shape: the kernel spec's ``plan`` (the
    knobs its rules give) rendered by its ``render``; with the plan's tile (rows x columns, as the
    probes' tables name it) and stages."""
    spec = get_spec("gemm_residual")
    kp = plan_or_raise(spec, TaskSpec(kernel="gemm_residual", shape=shape, dtype=dtype, fusion=fusion), limits)
    return spec.render(kp, limits), f"{kp.block_size.m}x{kp.block_size.n}", kp.memory_pipelining



def hopper_build(limits: DeviceLimits, shape: dict[str, int], dtype: str, block_size: str, stages: int,
                 **choices: Any) -> Build:
    """The Hopper path's build of these knobs with the planner's ``choices`` forced (``hopper_plan``),
    rendered by the ``gemm_residual`` spec."""
    task = SimpleNamespace(shape=shape, dtype=dtype)
    return get_spec("gemm_residual").render(hopper_plan(task, limits, block_size, stages, **choices), limits)


class Runner:
    """One compiled configuration bound to one set of buffers."""

    def __init__(self, build, bufs: dict[str, cp.ndarray], dtype: str):
        key = build.source_sha256
        if key not in _modules:
            _modules[key] = cp.RawModule(code=build.source, options=build.options)
        mod = _modules[key]
        for b in build.scratch:  # e.g. the 3xTF32 split: shared by every build on these buffers
            if b.name not in bufs or bufs[b.name].shape != b.shape:
                bufs[b.name] = cp.empty(b.shape, dtype=cp.float32)
        self.calls = []
        for launch in build.launches:
            fn = mod.get_function(launch.function)
            if launch.shared_mem_bytes > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = launch.shared_mem_bytes
            grid = fit_cluster_grid(fn.kernel.ptr, launch.grid, launch.block, launch.shared_mem_bytes, launch.cluster)
            self.grid = grid[0]  # the last launch's (the GEMM's) grid as launched
            args = []
            for a in launch.args:
                if isinstance(a, TensorMapArg):
                    desc = encode_tensor_map(a, bufs[a.buffer].data.ptr, dtype)
                    args.append(tensor_map_kernel_arg(desc))
                elif isinstance(a, str):
                    args.append(bufs[a])
                else:
                    args.append(np.int32(a))
            self.calls.append((fn, grid, launch.block, tuple(args), launch.shared_mem_bytes))

    def __call__(self) -> None:
        for fn, grid, block, args, smem in self.calls:
            fn(grid, block, args, shared_mem=smem)


def make_inputs(m: int, n: int, k: int, dtype: str, seed: int) -> dict[str, cp.ndarray]:
    rs = cp.random.RandomState(seed)
    if dtype in F32:  # fp32 data, NaN-poisoned fp32 output
        return {"a": rs.standard_normal((m, k), dtype=cp.float32),
                "w": rs.standard_normal((n, k), dtype=cp.float32),
                "r": rs.standard_normal((m, n), dtype=cp.float32),
                "out": cp.full((m, n), cp.nan, dtype=cp.float32)}
    return {
        "a": to_bits(rs.standard_normal((m, k), dtype=cp.float32), dtype),
        "w": to_bits(rs.standard_normal((n, k), dtype=cp.float32), dtype),
        "r": to_bits(rs.standard_normal((m, n), dtype=cp.float32), dtype),
        "out": cp.full((m, n), 0xFFFF, dtype=cp.uint16),  # NaN in bf16 and fp16
    }


def reference(bufs: dict[str, cp.ndarray], dtype: str) -> cp.ndarray:
    if dtype in F32:
        return (bufs["a"].astype(cp.float64) @ bufs["w"].astype(cp.float64).T
                + bufs["r"].astype(cp.float64))
    a = from_bits(bufs["a"], dtype).astype(cp.float64)
    w = from_bits(bufs["w"], dtype).astype(cp.float64)
    r = from_bits(bufs["r"], dtype).astype(cp.float64)
    return a @ w.T + r


def compare(out_bits: cp.ndarray, ref: cp.ndarray, dtype: str) -> dict:
    out = (out_bits if dtype in F32 else from_bits(out_bits, dtype)).astype(cp.float64)
    nan = int(cp.count_nonzero(~cp.isfinite(out)))
    diff = cp.abs(out - ref)
    rms = float(cp.sqrt(cp.mean(ref * ref)))
    rel_fro = float(cp.linalg.norm(out - ref) / max(float(cp.linalg.norm(ref)), 1e-30))
    max_rel = float(cp.max(diff)) / max(rms, 1e-30)
    ok = nan == 0 and rel_fro < 1e-2 and max_rel < 0.05
    if dtype == "fp32":  # fp32-class: the engine's fp32 rtol is 1e-4
        ok = nan == 0 and rel_fro < 1e-5 and max_rel < 1e-4
    return {"nonfinite": nan, "rel_fro": rel_fro, "max_abs_over_rms": max_rel, "ok": ok}



def launch_times(fn, warmup: int = 10, iters: int = 100) -> list[float]:
    """``warmup`` launches of ``fn()``, then ``iters`` queued back to back, each between its own CUDA
    events (``engine.launch_times``): the per-launch times in ms, in launch
    order."""
    return _event_times(lambda _i: fn(), warmup, iters)


def time_fn(fn, warmup: int = 10, iters: int = 100) -> dict:
    ts = sorted(launch_times(fn, warmup, iters))
    return {"median_ms": ts[len(ts) // 2], "p10_ms": ts[len(ts) // 10],
            "p90_ms": ts[(9 * len(ts)) // 10]}



def cublas_gemm(bufs, c: cp.ndarray, dtype: str, beta: float):
    """Row-major C[M,N] (+)= A @ W^T through the engine's cuBLAS gemmEx, bound to these buffers."""
    return Blas(dtype).bind(bufs["a"], bufs["w"], c, 1.0, beta)


def torch_matmul_add_fn(m: int, n: int, k: int, dtype: str):
    """A callable running torch.matmul(a, w.t()) + r on its own N(0,1) inputs; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=dt, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=dt, generator=g)
    r = torch.randn(m, n, device="cuda", dtype=dt, generator=g)
    return lambda: torch.matmul(a, w.t()) + r


def torch_matmul_add(m: int, n: int, k: int, dtype: str, iters: int) -> float | None:
    fn = torch_matmul_add_fn(m, n, k, dtype)
    return None if fn is None else time_fn(fn, iters=iters)["median_ms"]


def score(t_k: float, t_b: float | None, m: int, n: int, k: int) -> float | None:
    if not t_b:
        return None
    t_sol = 2 * m * n * k / 989.4e12 * 1e3
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))
