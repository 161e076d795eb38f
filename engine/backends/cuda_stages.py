"""The CUDA backend's stages, each a function of its inputs: the device's limits, NVRTC to a cubin
(cached), the rotating input sets, loading a build (refusing a binary not for this device), binding
its launches, and verifying the outputs against the float64 reference."""

from __future__ import annotations

from typing import Any

import cupy as cp
import numpy as np
from cupy.cuda import driver, runtime
from cupy_backends.cuda.libs import nvrtc

from engine.backends import clusters, pdl
from engine.backends.base import RunFailure
from engine.backends.cuda_convert import BITS, STORAGE, to_f64, to_storage
from engine.backends.cuda_support import (
    COMPILE_ERROR_LINE,
    FAULT_SOURCE,
    HOLD_SOURCE,
    POISON_BITS,
    cache_key,
    cache_load,
    cache_store,
    input_sets,
)
from engine.verify import compare, merge
from kernels import nvrtc_check
from kernels.spec import DeviceLimits, TensorMapArg

CUDA_ERRORS: tuple[type[BaseException], ...] = (runtime.CUDARuntimeError, driver.CUDADriverError)
"""What CuPy raises for a CUDA runtime or driver error (a run turns it into a launch_error)."""


def device_limits(index: int, profile_name: str) -> tuple[DeviceLimits, dict[str, Any]]:
    p = runtime.getDeviceProperties(index)
    lim = DeviceLimits(
        compute_capability=(int(p["major"]), int(p["minor"])), sm_count=int(p["multiProcessorCount"]),
        shared_memory_per_block_bytes=int(p["sharedMemPerBlockOptin"]),
        shared_memory_per_sm_bytes=int(p["sharedMemPerMultiprocessor"]),
        registers_per_sm=int(p["regsPerMultiprocessor"]), max_threads_per_block=int(p["maxThreadsPerBlock"]),
        profile=profile_name)
    return lim, p


def compile_inputs(build: Any, limits: DeviceLimits, fault: str = "none") -> tuple[str, str, list[str]]:
    """(source, arch, options) a build compiles with (also used to pre-fill the cache). The backend
    owns the target: a spec's own arch option would duplicate (or contradict) it."""
    source = build.source + FAULT_SOURCE + HOLD_SOURCE
    if fault == "compile_error":
        source += COMPILE_ERROR_LINE
    extra = [o for o in build.options if not o.startswith(("--gpu-architecture", "-arch"))]
    return source, limits.arch, ["-Xptxas=-v", *extra]


def compile_cubin(source: str, arch: str, options: list[str]) -> tuple[bytes, str, bool]:
    """NVRTC straight to a cubin for the exact arch; cached by source + arch + options + NVRTC version."""
    key = cache_key(source, [arch, *options], nvrtc.getVersion())
    hit = cache_load(key)
    if hit is not None:
        return hit[0], hit[1], True
    report = nvrtc_check.compile_cubin(source, arch, tuple(options))
    if not report.ok:
        raise RunFailure("compile_error", f"NVRTC_ERROR_COMPILATION\n{report.log}".strip(), "nvrtc_compile")
    cache_store(key, report.cubin, report.log)
    return report.cubin, report.log, False


def make_inputs(spec: Any, task: Any, dtype: str, l2_bytes: int) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """(input sets, output buffers, input bytes of one set): N(0,1) inputs from the task's seed, as
    many rotating sets as keep the inputs from living in the L2 between launches (``input_sets``)."""
    rng = cp.random.default_rng(task.seed)
    buffers = spec.buffers(task)
    in_bytes = sum(int(np.prod(b.shape)) * np.dtype(STORAGE[dtype]).itemsize for b in buffers if b.role == "input")
    sets: list[dict[str, Any]] = []
    for _ in range(input_sets(in_bytes, l2_bytes)):
        sets.append({b.name: to_storage(rng.standard_normal(b.shape, dtype=cp.float32), dtype)
                     for b in buffers if b.role == "input"})
    outs = {b.name: cp.empty(b.shape, dtype=STORAGE[dtype]) for b in buffers if b.role != "input"}
    return sets, outs, in_bytes


def rotating_outs(outs: dict[str, Any], n_sets: int, outputs: Any) -> list[dict[str, Any]]:
    """One output dict per input set: ``outs`` itself for set 0 (what verification reads), and for
    every other set its own copy of each of ``outputs`` (the rest, scratch, shared). A launch then
    writes an output no launch has touched since the other sets ran, as it reads inputs the L2 no
    longer holds: ours and every peer alike, so no implementation keeps an output, or an in-place
    operand such as cuBLAS's C = R, hot in the L2 between launches (ADR-0004)."""
    return [outs] + [{**outs, **{name: cp.empty_like(outs[name]) for name in outputs}}
                     for _ in range(n_sets - 1)]


def load_build(build: Any, cubin: bytes, limits: DeviceLimits) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """Load a compiled build: (functions by name, with the fault and hold kernels; the grid of each
    launch, capped for persistent clusters; registers and local memory per function). Refuses a
    binary that is not the device's own architecture (no silent PTX fallback); RunFailure names why."""
    module = cp.cuda.function.Module()
    module.load(cubin)
    funcs = {name: module.get_function(name)
             for name in (*build.functions, "sol_fault_kernel", "sol_hold_kernel")}
    funcs["__module__"] = module  # keeps the module loaded as long as its functions are used
    want = limits.compute_capability[0] * 10 + limits.compute_capability[1]
    for name in build.functions:
        got = driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_BINARY_VERSION, funcs[name].ptr)
        if got != want:
            raise RunFailure("compile_error", f"{name}: loaded binary is sm_{got}, device is sm_{want} "
                             "(refusing a silent fallback)", "arch_fallback")
    for ln in build.launches:
        # the 48 KB a launch gets without asking counts static and dynamic shared memory
        # together: ask for any dynamic amount (add_rmsnorm's ring of 3 x 16 KB plus its
        # static barriers failed with "invalid argument" before)
        if ln.shared_mem_bytes > 0:
            driver.funcSetAttribute(funcs[ln.function].ptr,
                                    driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    ln.shared_mem_bytes)
    # a persistent grid of clusters holds no more clusters than the device runs at once
    try:
        grids = [clusters.fit_grid(funcs[ln.function].ptr, ln.grid, ln.block, ln.shared_mem_bytes, ln.cluster)
                 for ln in build.launches]
    except RuntimeError as exc:
        raise RunFailure("launch_error", f"thread-block clusters: {exc}", "cluster") from None
    resources = {name: {"registers": driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_NUM_REGS, funcs[name].ptr),
                        "local_bytes": driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                                               funcs[name].ptr)}
                 for name in build.functions}
    return funcs, grids, resources


def bind_launches(build: Any, funcs: dict[str, Any], grids: list[Any], sets: list[dict[str, Any]],
                  outs: dict[str, Any] | list[dict[str, Any]], dtype: str, dependent: bool = False) -> Any:
    """``run_once(i)``: the build's launches on input set ``i % len(sets)`` and ``outs`` (one dict for
    every set, or one per set: ``rotating_outs``), with every
    argument (buffers, tensor maps, int32 scalars) prepared once, so a timed launch does no host work
    beyond the launch itself. With ``dependent`` (``pdl.enabled``), a launch marked ``pdl`` goes
    through ``pdl.DependentLaunch``: it may start while the kernel before it finishes."""

    def launch_args(ln: Any, bufs: dict[str, Any]) -> tuple[Any, ...]:
        args: list[Any] = []
        for a in ln.args:
            if isinstance(a, str):
                args.append(bufs[a])
            elif isinstance(a, TensorMapArg):
                from engine.backends import tensormap

                desc = tensormap.encode(a, bufs[a.buffer].data.ptr, dtype)
                args.append(tensormap.as_kernel_arg(desc))
            elif isinstance(a, float):  # a user kernel's float32 scalar
                args.append(np.float32(a))
            else:
                args.append(np.int32(a))
        return tuple(args)

    def bound(fn: Any, grid: Any, ln: Any, args: tuple[Any, ...]) -> Any:
        if dependent and ln.pdl:
            return pdl.DependentLaunch(fn, grid, ln.block, args, ln.shared_mem_bytes)
        return lambda: fn(grid, ln.block, args, shared_mem=ln.shared_mem_bytes)

    out_sets = outs if isinstance(outs, list) else [outs] * len(sets)
    plans = []
    for s, o in zip(sets, out_sets, strict=True):
        bufs = {**s, **o}
        plans.append([bound(funcs[ln.function], g, ln, launch_args(ln, bufs))
                      for ln, g in zip(build.launches, grids, strict=True)])
    n_sets = len(sets)

    def run_once(i: int) -> None:
        for launch in plans[i % n_sets]:
            launch()

    return run_once


def verify_outputs(spec: Any, inputs: dict[str, Any], outs: dict[str, Any], dtype: str) -> Any:
    """Every output against the float64 reference of ``inputs``; poisoned elements count as unwritten."""
    refs = spec.reference_outputs(cp, {k: to_f64(v, dtype) for k, v in inputs.items()})
    return compare_outputs(spec, outs, dtype, refs)


def compare_outputs(spec: Any, outs: dict[str, Any], dtype: str, refs: dict[str, Any]) -> Any:
    """Every output against its float64 reference in ``refs``; poisoned elements count as unwritten."""
    bits = BITS[dtype]
    parts = {}
    for name in spec.outputs:
        out = outs[name]
        unwritten = int((out.view(bits) == POISON_BITS[dtype]).sum())
        parts[name] = compare(cp, to_f64(out, dtype), refs[name], spec.rtol(dtype), unwritten)
    return merge(parts)
