"""Environment checks: is this machine ready to run and measure GPU kernels, and if not, why?

Checks run in the order below, from "is there a driver" to "is the host sane", each a small function
of a ``CheckContext`` (injectable, so tests fake NVML, files and the environment). ``run_checks``
runs them and attaches the troubleshooting rules each non-passing result matches.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.checks import (
    arch,
    cuda_stack,
    driver,
    environment,
    gpu_state,
    health,
    host,
    libraries,
    toolchain,
    visibility,
)
from engine.checks.context import CheckContext
from engine.checks.model import Check, CheckResult, Status

__all__ = ["CHECKS", "Check", "CheckContext", "CheckResult", "Status", "check_ids", "run_checks", "summary"]

CHECKS: list[Check] = [
    Check("driver.loaded", "NVIDIA driver (does NVML answer?)", driver.check_loaded),
    Check("driver.nouveau", "nouveau driver", driver.check_nouveau),
    Check("driver.version_mismatch", "kernel module and user-space driver versions", driver.check_mismatch),
    Check("devices.nodes", "device nodes /dev/nvidia* against NVML's GPUs", visibility.check_nodes),
    Check("devices.visible_env", "CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES", visibility.check_visible_env),
    Check("container.gpu", "the container's GPU and compute,utility capabilities", visibility.check_container),
    Check("cuda.cupy", "CuPy wheel against the driver", cuda_stack.check_cupy),
    Check("cuda.runtime", "driver CUDA version against CuPy's runtime and NVRTC", cuda_stack.check_runtime),
    Check("cuda.pynvml", "NVML bindings (nvidia-ml-py, or a shadowing pynvml?)", cuda_stack.check_pynvml),
    Check("gpu.profile", "GPU against the selected hardware profile", arch.check_profile),
    Check("gpu.kernel_arch", "compute capability against the kernels", arch.check_kernel_arch),
    Check("gpu.nvrtc_probe", "NVRTC probe kernel (compiles, and runs on the GPU?)", arch.check_nvrtc_probe),
    Check("toolchain.nvcc", "nvcc against the driver", toolchain.check_nvcc),
    Check("libs.driver", "driver libraries (libcuda, libnvidia-ml)", libraries.check_driver_libs),
    Check("libs.cuda", "CUDA libraries (libnvrtc, libcublas)", libraries.check_cuda_libs),
    Check("health.persistence", "persistence mode", health.check_persistence),
    Check("health.ecc", "uncorrectable ECC errors", health.check_ecc),
    Check("health.retirement", "pending row remaps and page retirement", health.check_retirement),
    Check("health.xid", "Xid errors in the kernel log", health.check_xid),
    Check("health.throttle", "clock throttling", gpu_state.check_throttle),
    Check("health.power_limit", "power limit against the board's default", gpu_state.check_power_limit),
    Check("health.pcie", "PCIe link width", gpu_state.check_pcie),
    Check("health.temperature", "temperature against the slowdown threshold", gpu_state.check_temperature),
    Check("health.mig", "MIG mode", gpu_state.check_mig),
    Check("health.compute_mode", "compute mode (does it let the engine in?)", gpu_state.check_compute_mode),
    Check("health.processes", "other processes on the GPU", gpu_state.check_processes),
    Check("env.cuda_debug", "CUDA debugging/profiling variables", environment.check_cuda_debug),
    Check("host.user", "user account (root or unprivileged?)", host.check_user),
    Check("host.disk", "free disk for the kernel cache and results", host.check_disk),
    Check("host.memory", "host memory and swap for compiling", host.check_memory),
    Check("host.dirs", "cockpit folders (writable?)", host.check_dirs),
]
"""Every check, in the order an operator should read them. A title names what the check looks
at, never the outcome hoped for: beside WARN or FAIL it must not read as a finding ("WARN running
as an unprivileged user" while root); the detail says what was found."""


def check_ids() -> list[str]:
    return [c.id for c in CHECKS]


def _selected(only: Iterable[str] | None) -> list[Check]:
    if not only:
        return list(CHECKS)
    wanted = list(only)
    return [c for c in CHECKS if any(c.id == w or c.id.startswith(w.rstrip(".") + ".") for w in wanted)]


def run_checks(profile_name: str | None = None, only: Iterable[str] | None = None,
               ctx: CheckContext | None = None, with_rules: bool = True) -> list[CheckResult]:
    """Run the checks (all, or those whose id or area prefix is in ``only``), in order."""
    ctx = ctx or CheckContext(profile_name=profile_name)
    if profile_name and not ctx.profile_name:
        ctx.profile_name = profile_name
    results = [c.run(ctx) for c in _selected(only)]
    if with_rules:
        from engine.troubleshoot import match_check

        for r in results:
            if r.status in ("fail", "warn"):
                r.rules = [m.id for m in match_check(r)]
    return results


def summary(results: list[CheckResult]) -> dict[str, int]:
    """Counts per status, e.g. {'pass': 20, 'warn': 3, 'fail': 1, 'skip': 6}."""
    out = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
    for r in results:
        out[r.status] += 1
    return out
