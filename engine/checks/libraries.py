"""Can the dynamic loader find the libraries CUDA work needs (the way `ldd` would)?"""

from __future__ import annotations

from engine.checks.context import CheckContext
from engine.checks.model import NO_DRIVER_SKIP, Status, ok, skip

STANDARD_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                 "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/wsl/lib")


def _ldconfig(ctx: CheckContext) -> str:
    def go() -> str:
        for prog in ("ldconfig", "/sbin/ldconfig"):
            out = ctx.run([prog, "-p"], 10)
            if out is not None and out[0] == 0:
                return out[1]
        return ""

    return ctx.memo("ldconfig", go)


def find_library(ctx: CheckContext, stem: str) -> str | None:
    """Where ``stem`` (e.g. 'libcuda') resolves: LD_LIBRARY_PATH, NVIDIA wheels, ldconfig, usual dirs."""
    dirs = [d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += ctx.memo("lib_dirs", ctx.lib_dirs)
    for d in dirs:
        for name in ctx.fs.listdir(d) or []:
            if name.startswith(stem + ".so"):
                return f"{d.rstrip('/')}/{name}"
    for line in _ldconfig(ctx).splitlines():
        line = line.strip()
        if line.startswith(stem + ".so") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    for d in STANDARD_DIRS:
        for name in ctx.fs.listdir(d) or []:
            if name.startswith(stem + ".so"):
                return f"{d}/{name}"
    return None


def _ldpath(ctx: CheckContext) -> str:
    return f"LD_LIBRARY_PATH={ctx.env.get('LD_LIBRARY_PATH', '') or '(unset)'}"


def check_driver_libs(ctx: CheckContext) -> tuple[Status, str, str]:
    found = {stem: find_library(ctx, stem) for stem in ("libcuda", "libnvidia-ml")}
    missing = [s for s, p in found.items() if p is None]
    if len(missing) == len(found) and not ctx.driver_ok():
        return skip(f"{NO_DRIVER_SKIP}: libcuda and libnvidia-ml come with it")
    text = "; ".join(f"{s}: {p or 'NOT FOUND'}" for s, p in found.items()) + f"; {_ldpath(ctx)}"
    if missing:
        return "fail", text, (
            "the driver's user-space libraries are missing: reinstall the driver, or in a container pass "
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility; then `sudo ldconfig` and check with "
            "`ldconfig -p | grep -e libcuda -e libnvidia-ml`")
    return ok(text)


def check_cuda_libs(ctx: CheckContext) -> tuple[Status, str, str]:
    found = {stem: find_library(ctx, stem) for stem in ("libnvrtc", "libcublas")}
    text = "; ".join(f"{s}: {p or 'NOT FOUND'}" for s, p in found.items()) + f"; {_ldpath(ctx)}"
    fix = ("install CuPy with its toolkit wheels (pip install 'sol-cockpit[cuda13]', which pulls "
           "nvidia-cuda-nvrtc and nvidia-cublas), or add the toolkit's lib64 to LD_LIBRARY_PATH")
    if found["libnvrtc"] is None:
        return "fail", text + " (kernels cannot be compiled)", fix
    if found["libcublas"] is None:
        return "warn", text + " (the cuBLAS peer comparison will be missing)", fix
    return ok(text)
