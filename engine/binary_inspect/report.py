"""Inspect one binary: its device code against the GPU, its libraries, its CUDA runtime against the
driver, and (with a smoke run) what it prints. Every finding names its troubleshooting rule."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from engine.binary_inspect.compat import (
    Verdict,
    arch_list,
    cuda_for_ptx,
    fmt_cc,
    gencode_fix,
    judge,
    parse_cc,
    parse_version,
)
from engine.binary_inspect.elf_file import ElfInfo, host_machine, read_elf
from engine.binary_inspect.libs import missing_findings, run_ldd, runtime_findings, runtime_info
from engine.binary_inspect.model import Finding, Library, Report, Target
from engine.binary_inspect.smoke import diagnose_smoke, run_smoke
from engine.errors import InputError
from engine.text_safety import visible

ASSUMED_PROFILE = "h100-sxm"
"""The profile judged against when no GPU answers and no --profile is given (the simulated
backend's default too)."""
JIT_CACHE_FIX = ("until then keep the JIT cache warm: CUDA_CACHE_MAXSIZE=4294967296 and a CUDA_CACHE_PATH on a "
                 "persistent disk (containers lose ~/.nv/ComputeCache)")
_ORDER = {"error": 0, "warn": 1, "info": 2}


@dataclass(frozen=True)
class Gpu:
    """What NVML says about this machine's GPU and driver."""

    name: str
    compute_capability: str | None
    driver_version: str | None
    driver_cuda: str | None


GpuProbe = Callable[[int], "Gpu | None"]


def nvml_gpu(index: int) -> Gpu | None:
    """GPU ``index`` and the driver, from NVML; None without a driver or that GPU."""
    try:
        from engine import nvml

        usable, _, _ = nvml.probe()
        if not usable:
            return None
        info = nvml.device_info(index)
        if info is None:
            return None
        return Gpu(name=info.name, compute_capability=info.compute_capability,
                   driver_version=nvml.driver_version(), driver_cuda=nvml.cuda_driver_version())
    except Exception:  # NVML is optional here: any failure means "no GPU to ask"
        return None


def resolve_target(profile_name: str | None, device: int, probe: GpuProbe | None = None) -> Target:
    """--profile when given (with this machine's driver, if any); else the GPU NVML sees; else the
    assumed profile, said so. ``probe``: how to ask for the GPU (default: ``nvml_gpu``)."""
    from engine.profiles import load_profiles

    profiles = load_profiles()
    gpu = (probe or nvml_gpu)(device)
    driver = {"driver_cuda": gpu.driver_cuda, "driver_version": gpu.driver_version} if gpu else {}
    if profile_name:
        prof = profiles.get(profile_name)
        note = None
        if gpu and gpu.compute_capability and gpu.compute_capability != prof.compute_capability:
            note = (f"judged for profile {prof.name} (cc {prof.compute_capability}); this machine's GPU {device} "
                    f"'{gpu.name}' is cc {gpu.compute_capability}")
        return Target(compute_capability=prof.compute_capability, name=prof.display_name, source="profile",
                      profile=prof.name, note=note, **driver)
    if gpu and parse_cc(gpu.compute_capability):
        detected = profiles.detect(gpu.name)
        return Target(compute_capability=str(gpu.compute_capability), name=gpu.name, source="nvml",
                      profile=detected.name if detected else None, **driver)
    prof = profiles.get(ASSUMED_PROFILE)
    why = f"GPU {device} did not report its compute capability" if gpu else "no NVIDIA GPU answers here (NVML)"
    return Target(compute_capability=prof.compute_capability, name=prof.display_name, source="assumed",
                  profile=prof.name, note=f"{why} and no --profile was given: assumed {prof.name} "
                                      f"(cc {prof.compute_capability}); pass --profile NAME for another GPU", **driver)


def _arch_findings(v: Verdict, target: Target) -> list[Finding]:
    cc = fmt_cc(v.cc)
    on = f"{target.name} (cc {cc})"
    if v.via == "none":
        return [Finding(id="arch.no-code", severity="error", title=f"no code that runs on cc {cc}",
                        detail=f"{v.reason}. On {on} every kernel launch fails with 'no kernel image is "
                               "available for execution on the device'",
                        fix=gencode_fix(v.cc), rule="cuda-no-kernel-image")]
    if v.via != "ptx-jit" or v.image is None:
        return []
    out = []
    driver = parse_version(target.driver_cuda)
    need = v.ptx_needs_cuda
    isa = f"PTX ISA {v.image.ptx_isa[0]}.{v.image.ptx_isa[1]}" if v.image.ptx_isa else "its PTX"
    if need and driver and need > driver:
        out.append(Finding(id="arch.ptx-too-new", severity="error",
                           title=f"{v.image.name} PTX is newer than the driver",
                           detail=f"{v.reason}, but it is {isa} (CUDA {need[0]}.{need[1]}) and the driver supports "
                                  f"CUDA {target.driver_cuda}: the JIT fails ('the provided PTX was compiled with an "
                                  "unsupported toolchain')",
                           fix=f"upgrade the driver to one that supports CUDA {need[0]}.{need[1]}, or {gencode_fix(v.cc)}",
                           rule="cuda-unsupported-ptx"))
    if os.environ.get("CUDA_DISABLE_PTX_JIT", "").strip() == "1":
        out.append(Finding(id="arch.jit-disabled", severity="error", title="PTX JIT is disabled (CUDA_DISABLE_PTX_JIT=1)",
                           detail=f"{v.reason}, but CUDA_DISABLE_PTX_JIT=1 forbids it: launches fail with 'no kernel "
                                  "image is available'",
                           fix=f"unset CUDA_DISABLE_PTX_JIT, or {gencode_fix(v.cc)}", rule="cuda-no-kernel-image"))
    needs = (f"; {isa} needs a driver that supports CUDA {need[0]}.{need[1]} or newer"
             if need and driver is None else "")
    out.append(Finding(id="arch.ptx-jit", severity="warn", title=f"runs on cc {cc} only through PTX JIT",
                       detail=f"{v.reason}{needs}: the first launch waits for the compile (seconds; minutes for "
                              f"large libraries) and the code uses only {v.image.name}'s features, not cc {cc}'s",
                       fix=f"add SASS for the GPU: {gencode_fix(v.cc)}; {JIT_CACHE_FIX}", rule="ptx-jit-warmup"))
    return out


def _built_with(info: ElfInfo) -> tuple[int, int] | None:
    if info.fatbin and info.fatbin.toolkit:
        return info.fatbin.toolkit
    isas = [i.ptx_isa for i in info.images if i.ptx_isa]
    return cuda_for_ptx(max(isas)) if isas else None


def check_has_cuda(info: ElfInfo) -> None:
    """InputError unless the file has device code or links a CUDA library (or runtime)."""
    if info.images or info.cuda_libraries() or info.static_cudart:
        return
    libs = ", ".join(info.needed) or "none"
    where = ("its fat binary could not be read (an unknown format: `cuobjdump --list-elf` may list it)"
             if info.fatbin is not None and info.fatbin.damaged else "no fat binary (.nv_fatbin section)")
    raise InputError(f"path={visible(info.path, one_line=True)}: no CUDA code: {where}, and none of the libraries "
                     "it needs is a CUDA "
                     f"library (it needs: {libs})",
                     fix="give the binary built with nvcc, or the .so that holds the kernels "
                         "(`ldd PROGRAM` lists the libraries a program loads)")


def inspect_binary(path: Path, profile: str | None = None, device: int = 0, run_args: list[str] | None = None,
                   timeout_s: float = 60.0, probe: GpuProbe | None = None) -> Report:
    """Inspect ``path``; with ``run_args`` (a list, empty for none) also run it once. InputError for
    bad input: a missing, unreadable or non-ELF file, one without CUDA code, an unknown profile."""
    info = read_elf(path)
    check_has_cuda(info)
    if run_args is not None and info.kind != "executable":
        raise InputError(f"--run: {visible(path, one_line=True)} is a {info.kind}: it cannot run by itself",
                         fix="inspect it without --run, and smoke-test the program that loads it")
    target = resolve_target(profile, device, probe)
    cc = parse_cc(target.compute_capability) or (0, 0)
    findings: list[Finding] = []
    runs_via: Literal["sass", "ptx-jit", "none", "unknown"] = "unknown"
    if info.images:
        verdict = judge(info.images, cc)
        runs_via = verdict.via
        findings += _arch_findings(verdict, target)
    else:
        cuda = ", ".join(info.cuda_libraries()) or "a static CUDA runtime"
        findings.append(Finding(id="arch.no-own-kernels", severity="info", title="no kernels of its own",
                                detail=f"no fat binary: its GPU code comes from what it links ({cuda})",
                                fix="inspect those libraries too: `tui inspect /path/to/libX.so`",
                                rule="cuda-no-kernel-image"))
    libraries: list[Library] = []
    note: str | None = None
    here = host_machine()
    if here is not None and info.machine != here:
        note = f"built for {info.machine}, this machine is {here}: ldd cannot list its libraries here"
    else:
        libraries, note = run_ldd(path)
    built = _built_with(info)
    rt = runtime_info(info.needed, libraries, info.static_cudart, built, target.driver_cuda)
    rt_version = parse_version(rt.version)
    rt_major = rt_version[0] if rt_version else (built[0] if built else None)
    findings += missing_findings(libraries, path, info.runpath, rt_major)
    findings += runtime_findings(rt)
    smoke = None
    if run_args is not None:
        smoke, output = run_smoke(path, run_args, timeout_s)
        findings += diagnose_smoke(smoke, output)
    if info.scan_note:
        findings.append(Finding(id="arch.scan-limit", severity="info", title="device code searched in part",
                                detail=f"{info.scan_note}: its data sections claim more", fix="if the code list looks "
                                "short, list it with `cuobjdump --list-elf --list-ptx FILE`",
                                rule="cuda-no-kernel-image"))
    findings.sort(key=lambda f: _ORDER[f.severity])
    return Report(path=visible(path, one_line=True), kind=info.kind, machine=info.machine, code_source=info.code_source,
                  sass=arch_list(info.images, "sass"), ptx=arch_list(info.images, "ptx"), target=target,
                  runs_via=runs_via, libraries=libraries, libraries_note=note, runtime=rt, findings=findings,
                  smoke=smoke)
