"""Does the CUDA stack CuPy brings fit this driver: the CuPy wheel, its runtime and NVRTC, and the
NVML bindings. Versions come from package metadata and the probe subprocess, never from a CUDA
context in this process."""

from __future__ import annotations

import re

from engine.checks.context import CheckContext
from engine.checks.model import NO_DRIVER_SKIP, Status, ok, skip

MIN_DRIVER = {13: 580, 12: 525, 11: 450}
"""CUDA major -> the oldest driver branch that runs it (NVIDIA's compatibility table)."""

EXTRA_FIX = ("pip install 'sol-cockpit[cuda13]' (driver >= 580) or 'sol-cockpit[cuda12]' (driver >= 525); "
             "uninstall the other CuPy wheel first")


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def driver_branch(ctx: CheckContext) -> int | None:
    v = version_tuple(ctx.nvml.driver_version()) if ctx.driver_ok() else None
    return v[0] if v else None


def fitting_extra(branch: int) -> str:
    if branch >= MIN_DRIVER[13]:
        return "sol-cockpit[cuda13] (cupy-cuda13x)"
    if branch >= MIN_DRIVER[12]:
        return "sol-cockpit[cuda12] (cupy-cuda12x)"
    return "none: the driver is older than 525; upgrade it"


def cupy_wheels(ctx: CheckContext) -> dict[str, str]:
    """Installed CuPy distributions (cupy-cuda12x, cupy-cuda13x, cupy) -> version."""
    return {k: v for k, v in ctx.dists("cupy").items() if k == "cupy" or k.startswith("cupy-cuda")}


def wheel_cuda_major(name: str) -> int | None:
    m = re.match(r"cupy-cuda(\d+)x$", name)
    return int(m.group(1)) if m else None


def check_cupy(ctx: CheckContext) -> tuple[Status, str, str]:
    wheels = cupy_wheels(ctx)
    branch = driver_branch(ctx)
    if not wheels:
        msg = "CuPy is not installed: the cuda backend cannot compile or launch kernels (sim still works)"
        if branch is None:
            return "warn", msg, EXTRA_FIX
        return "fail", msg, f"this driver ({branch}) fits {fitting_extra(branch)}: pip install it"
    if len(wheels) > 1:
        return "fail", (f"several CuPy packages are installed ({', '.join(f'{k} {v}' for k, v in wheels.items())}); "
                        "they overwrite each other's files"), "keep one: `pip uninstall -y " + " ".join(wheels) + "` then " + EXTRA_FIX
    name, ver = next(iter(wheels.items()))
    major = wheel_cuda_major(name)
    found = f"{name} {ver}" + (f" (built for CUDA {major})" if major else " (built from source)")
    if branch is None:
        need = f"; it needs a driver >= {MIN_DRIVER[major]}" if major in MIN_DRIVER else ""
        return skip(f"{found}{need}; {NO_DRIVER_SKIP}")
    if major in MIN_DRIVER and branch < MIN_DRIVER[major]:
        return "fail", (f"{found} needs a driver >= {MIN_DRIVER[major]}, this driver is {branch}: CuPy will raise "
                        "cudaErrorInsufficientDriver"), (
            f"install the wheel that fits this driver: {fitting_extra(branch)}, or upgrade the driver to >= "
            f"{MIN_DRIVER[major]}")
    return ok(f"{found} fits driver {branch}; the fitting extra is {fitting_extra(branch)}")


def probe_arch(ctx: CheckContext) -> str:
    """NVRTC target for the probe: the first GPU's arch, else the --profile's, else sm_80."""
    cc = None
    devs = ctx.devices()
    if devs and getattr(devs[0], "compute_capability", None):
        cc = devs[0].compute_capability
    elif ctx.profile_name:
        try:
            cc = ctx.profile_set().get(ctx.profile_name).compute_capability
        except Exception:
            cc = None
    if not cc:
        return "sm_80"
    major, minor = cc.split(".")
    return f"sm_{major}{minor}" + ("a" if (major, minor) == ("9", "0") else "")


def runtime_versions(ctx: CheckContext) -> dict[str, str | None]:
    """CUDA runtime and NVRTC versions CuPy uses: the probe's answer, else the wheels' metadata."""
    out: dict[str, str | None] = {"runtime": None, "nvrtc": None}
    if cupy_wheels(ctx):
        facts = ctx.probe(probe_arch(ctx), bool(ctx.devices())) or {}
        out["runtime"], out["nvrtc"] = facts.get("runtime_version"), facts.get("nvrtc_version")
    for key, prefix in (("runtime", "nvidia-cuda-runtime"), ("nvrtc", "nvidia-cuda-nvrtc")):
        if out[key] is None:
            found = ctx.dists(prefix)
            if found:
                out[key] = ".".join(next(iter(found.values())).split(".")[:2])
    return out


def check_runtime(ctx: CheckContext) -> tuple[Status, str, str]:
    vers = runtime_versions(ctx)
    if vers["runtime"] is None and vers["nvrtc"] is None:
        return skip("no CUDA runtime or NVRTC found (CuPy and the nvidia-cuda-* wheels are not installed)")
    found = f"CUDA runtime {vers['runtime'] or '?'}, NVRTC {vers['nvrtc'] or '?'}"
    if not ctx.driver_ok():
        return skip(f"{found}; {NO_DRIVER_SKIP}")
    dcv = version_tuple(ctx.nvml.cuda_driver_version())
    if dcv is None:
        return skip(f"{found}; the driver does not report its CUDA version")
    dtext = ".".join(map(str, dcv[:2]))
    found += f"; the driver supports CUDA {dtext}"
    for label, v in (("runtime", version_tuple(vers["runtime"])), ("NVRTC", version_tuple(vers["nvrtc"]))):
        if v and v[0] > dcv[0]:
            return "fail", f"CUDA {label} {'.'.join(map(str, v[:2]))} is newer than the driver: " + found, (
                f"upgrade the driver to >= {MIN_DRIVER.get(v[0], '?')}, or install the CuPy wheel for CUDA "
                f"{dcv[0]} ({EXTRA_FIX})")
    nv = version_tuple(vers["nvrtc"])
    if nv and len(nv) > 1 and nv[:2] > dcv[:2]:
        return "warn", ("NVRTC is a newer minor release than the driver: cubins load, but PTX it emits cannot be "
                        "JIT-compiled by this driver (CUDA_ERROR_UNSUPPORTED_PTX_VERSION): " + found), (
            "compile to cubin for the device's arch (the cockpit does), or upgrade the driver")
    return ok(found)


def check_pynvml(ctx: CheckContext) -> tuple[Status, str, str]:
    origin = ctx.module_origin("pynvml")
    official = ctx.dist_version("nvidia-ml-py")
    legacy = ctx.dist_version("pynvml")
    fix = "`pip uninstall -y pynvml && pip install --force-reinstall nvidia-ml-py`"
    if origin is None:
        return "fail", "no pynvml module: NVML telemetry and the driver checks cannot work", "pip install nvidia-ml-py"
    if legacy:
        lv = version_tuple(legacy) or (0,)
        if lv[0] < 12:
            return "fail", (f"the unofficial pynvml {legacy} package ships its own pynvml module, shadowing "
                            f"nvidia-ml-py (its API lags the driver): loads from {origin}"), fix
        return "warn", (f"the deprecated pynvml {legacy} wrapper is installed (it warns on import and only "
                        "re-exports nvidia-ml-py)"), fix
    if official is None:
        return "warn", f"pynvml loads from {origin}, which no installed nvidia-ml-py owns (a vendored copy?)", fix
    if "site-packages" not in origin and "dist-packages" not in origin:
        return "warn", f"pynvml loads from {origin}, shadowing nvidia-ml-py {official}", (
            f"remove or rename {origin}")
    return ok(f"nvidia-ml-py {official} ({origin})")
