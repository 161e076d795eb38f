"""CUDA debugging and profiling variables that change what a run measures."""

from __future__ import annotations

from engine.checks.context import CheckContext
from engine.checks.model import Status, ok

DISTORTING = {
    "CUDA_LAUNCH_BLOCKING": "serialises every launch: timings include the host round trip",
    "CUDA_INJECTION64_PATH": "a profiler or sanitizer is injected into every CUDA process",
    "NVTX_INJECTION64_PATH": "an Nsight tool is injected",
    "CUDA_PROFILE": "the legacy command-line profiler is on",
    "COMPUTE_PROFILE": "the legacy command-line profiler is on",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "GPU core dumps on exceptions (slow, large files)",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION": "the GPU halts on exceptions for a debugger",
    "CUDA_CACHE_DISABLE": "the driver's JIT cache is off: every PTX load recompiles",
    "CUPY_CUDA_COMPILE_WITH_DEBUG": "CuPy compiles kernels with -G (no optimisation)",
    "NVIDIA_TF32_OVERRIDE": "overrides TF32 use in libraries, changing results and speed",
    "CUDA_MPS_PIPE_DIRECTORY": "an MPS server may share this GPU with other work",
}
"""Variable -> what it does to a run."""

OFF_VALUES = {"", "0", "false", "no", "off"}


def check_cuda_debug(ctx: CheckContext) -> tuple[Status, str, str]:
    found = []
    for var, why in DISTORTING.items():
        val = ctx.env.get(var)
        if val is None:
            continue
        if var not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "NVIDIA_TF32_OVERRIDE",
                       "CUDA_MPS_PIPE_DIRECTORY") and val.strip().lower() in OFF_VALUES:
            continue
        found.append((var, val, why))
    if not found:
        return ok("no CUDA debugging or profiling variables set")
    detail = "; ".join(f"{v}={val} ({why})" for v, val, why in found)
    return "warn", detail, f"unset them before measuring: `unset {' '.join(v for v, _, _ in found)}`"
