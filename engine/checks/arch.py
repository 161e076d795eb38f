"""Does the GPU fit the profile and the kernels, and does NVRTC compile (and the GPU run) for it?"""

from __future__ import annotations

from engine.checks.context import CheckContext
from engine.checks.cuda_stack import cupy_wheels, probe_arch
from engine.checks.model import NO_DRIVER_SKIP, Status, ok, skip
from engine.errors import InputError
from engine.profiles import PROVISIONAL_LABEL, Profile

PORTABLE_MIN_CC = (8, 0)
"""The portable gemm_residual path uses bf16 mma.sync and cp.async: sm_80 and later."""
HOPPER_CC = (9, 0)
"""The wgmma path (gemm_residual_sm90) is built for sm_90a only."""


def _cc(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def device_facts(dev: object) -> dict[str, float | int | None]:
    """What NVML says of a device beside its name, as ``ProfileSet.detect`` takes it (None: unknown)."""
    mib = getattr(dev, "memory_total_mib", None)
    return {"sm_count": getattr(dev, "sm_count", None), "memory_gib": mib / 1024 if mib else None,
            "power_limit_w": getattr(dev, "power_limit_w", None)}


def provisional_note(prof: object) -> str:
    """' (provisional (datasheet, not measured))' for a provisional profile, else ''."""
    return f" ({PROVISIONAL_LABEL})" if getattr(prof, "provisional", False) else ""


def profile_in_use(ctx: CheckContext) -> Profile | None:
    """The profile the checks judge: the one asked for with --profile, else the one GPU 0 is
    detected as; None where neither is known (an unknown name, no GPU, no match)."""
    ps = ctx.profile_set()
    if ctx.profile_name:
        try:
            return ps.get(ctx.profile_name)
        except InputError:
            return None
    devs = ctx.devices()
    return ps.detect(devs[0].name, **device_facts(devs[0])) if devs else None


def check_profile(ctx: CheckContext) -> tuple[Status, str, str]:
    devs = ctx.devices()
    ps = ctx.profile_set()
    prof = None
    if ctx.profile_name:
        try:
            prof = ps.get(ctx.profile_name)
        except InputError as exc:
            return "fail", exc.message, exc.fix or "pick a known profile: `tui profiles`"
    if not devs:
        if prof is not None:
            return skip(f"profile {prof.name} (cc {prof.compute_capability}){provisional_note(prof)} selected; "
                        "no GPU to compare it with")
        return skip(NO_DRIVER_SKIP if not ctx.driver_ok() else "no GPU visible")
    dev = devs[0]
    detected = ps.detect(dev.name, **device_facts(dev))
    if prof is None:
        if detected is None:
            return "warn", f"no built-in profile matches '{dev.name}' (cc {dev.compute_capability})", (
                f"pass --profile NAME ({', '.join(ps.names())}) or measure one: `tui calibrate`")
        return ok(f"GPU 0 '{dev.name}' (cc {dev.compute_capability}) -> profile {detected.name}"
                  f"{provisional_note(detected)}")
    if dev.compute_capability and prof.compute_capability != dev.compute_capability:
        return "fail", (f"profile {prof.name} is for cc {prof.compute_capability}, GPU 0 '{dev.name}' is cc "
                        f"{dev.compute_capability}: kernel limits and SOL figures would be wrong"), (
            f"use --profile {detected.name}" if detected else "drop --profile, or calibrate one: `tui calibrate`")
    if detected is not None and detected.name not in (prof.name, prof.base_profile):
        return "warn", (f"profile {prof.name} does not match GPU 0 '{dev.name}' (detected {detected.name}); "
                        "SOL figures use the chosen profile's peaks"), f"use --profile {detected.name}"
    return ok(f"profile {prof.name}{provisional_note(prof)} fits GPU 0 '{dev.name}' (cc {dev.compute_capability})")


def check_kernel_arch(ctx: CheckContext) -> tuple[Status, str, str]:
    devs = ctx.devices()
    if not devs:
        return skip(NO_DRIVER_SKIP if not ctx.driver_ok() else "no GPU visible")
    parts, worst = [], "pass"
    for d in devs:
        cc = _cc(d.compute_capability)
        if cc is None:
            parts.append(f"GPU {d.index}: compute capability unknown")
            worst = "warn" if worst == "pass" else worst
        elif cc < PORTABLE_MIN_CC:
            parts.append(f"GPU {d.index} '{d.name}' is cc {d.compute_capability}: the kernels need cc >= 8.0 "
                         "(bf16 mma.sync, cp.async)")
            worst = "fail"
        elif cc == HOPPER_CC:
            parts.append(f"GPU {d.index}: cc 9.0, sm_90a: the Hopper wgmma path and the portable path")
        else:
            parts.append(f"GPU {d.index}: cc {d.compute_capability}: the portable path (the wgmma path needs cc 9.0)")
    fix = "run on an Ampere (A100), Ada (L40S) or Hopper (H100/H200) GPU" if worst == "fail" else (
        "check the driver with `nvidia-smi -q`" if worst == "warn" else "")
    return worst, "; ".join(parts), fix  # type: ignore[return-value]


def check_nvrtc_probe(ctx: CheckContext) -> tuple[Status, str, str]:
    if not cupy_wheels(ctx) and ctx.module_origin("cupy") is None:
        return skip("CuPy is not installed (see cuda.cupy)")
    arch = probe_arch(ctx)
    run = bool(ctx.devices())
    facts = ctx.probe(arch, run)
    if not facts or facts.get("error"):
        return "fail", (facts or {}).get("error", "the CuPy probe gave no answer"), (
            f"run `{ctx.python} -c \"import cupy; cupy.show_config()\"` to see what breaks")
    if facts.get("import_error"):
        return "fail", f"CuPy cannot be imported: {facts['import_error']}", (
            "reinstall the CuPy wheel that fits the driver: pip install --force-reinstall 'sol-cockpit[cuda13]' "
            "(or [cuda12])")
    nvrtc = facts.get("nvrtc_version", "?")
    if not facts.get("compiled"):
        err = str(facts.get("compile_error", "")).strip().splitlines()
        return "fail", f"NVRTC {nvrtc} could not compile a small kernel for {arch}: " + " | ".join(err[:3]), (
            f"an NVRTC too old for {arch} (or too new: CUDA 13 dropped cc < 7.5) needs another CuPy/CUDA wheel; "
            "see `tui diagnose` on the message")
    done = f"NVRTC {nvrtc} compiled a small kernel for {arch} ({facts.get('cubin_bytes', 0)} bytes of cubin)"
    if not run:
        return ok(done + "; no GPU here, so it was not launched")
    if facts.get("ran") and facts.get("verified"):
        return ok(done + "; it ran on GPU 0 and its output verified")
    if facts.get("ran"):
        return "fail", done + "; it ran on GPU 0 but its output is WRONG", (
            "the GPU or driver is unhealthy: read `sudo dmesg | grep Xid`, reset the GPU (`sudo nvidia-smi -r`)")
    return "fail", done + f"; launching it failed: {facts.get('run_error', '?')}", (
        "see `tui diagnose` on the message (the driver/runtime fit is the usual cause)")
