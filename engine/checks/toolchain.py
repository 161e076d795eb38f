"""nvcc, for the C++/CUDA projects operators build with CMake and a CUDA_ARCH flag (the cockpit
itself compiles through NVRTC, so a missing nvcc is a warning, never a failure)."""

from __future__ import annotations

import re

from engine.checks.context import CheckContext
from engine.checks.cuda_stack import version_tuple
from engine.checks.model import Status, ok

NVCC_FALLBACK = "/usr/local/cuda/bin/nvcc"


def _arch_hint(ctx: CheckContext) -> str:
    devs = ctx.devices()
    cc = getattr(devs[0], "compute_capability", None) if devs else None
    if not cc:
        return ""
    arch = cc.replace(".", "")
    return f"; build for this GPU with -DCMAKE_CUDA_ARCHITECTURES={arch} (CUDA_ARCH={arch})"


def check_nvcc(ctx: CheckContext) -> tuple[Status, str, str]:
    path = ctx.which("nvcc") or (NVCC_FALLBACK if ctx.fs.exists(NVCC_FALLBACK) else None)
    if path is None:
        return "warn", "nvcc not found (only C++/CUDA projects built with CMake need it; the cockpit uses NVRTC)", (
            "install the CUDA toolkit matching the driver (e.g. `sudo apt install cuda-toolkit-13-0`) and "
            "add /usr/local/cuda/bin to PATH")
    out = ctx.run([path, "--version"], 20)
    if out is None or out[0] != 0:
        return "warn", f"{path} does not run: {(out[1].strip() if out else 'no output')[:200]}", (
            "reinstall the CUDA toolkit")
    m = re.search(r"release (\d+\.\d+)", out[1])
    ver = m.group(1) if m else None
    found = f"nvcc {ver or '?'} at {path}"
    dcv = version_tuple(ctx.nvml.cuda_driver_version()) if ctx.driver_ok() else None
    nv = version_tuple(ver)
    if dcv is None or nv is None:
        return ok(found + ("" if ctx.driver_ok() else "; no driver to compare it with") + _arch_hint(ctx))
    dtext = ".".join(map(str, dcv[:2]))
    if nv[0] > dcv[0]:
        return "warn", f"{found} is newer than the driver (CUDA {dtext}): what it builds will not load", (
            f"install a CUDA {dcv[0]}.x toolkit or upgrade the driver")
    if nv[:2] > dcv[:2]:
        return "warn", (f"{found} is a newer minor release than the driver (CUDA {dtext}): SASS loads, PTX "
                        "it embeds cannot be JIT-compiled"), "build SASS for the GPU's arch, or upgrade the driver"
    return ok(f"{found}; the driver supports CUDA {dtext}" + _arch_hint(ctx))
