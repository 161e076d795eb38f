"""The GPU's state right now, which distorts measurements: clock throttling, PCIe link, temperature,
MIG, compute mode, and other processes on the GPU."""

from __future__ import annotations

from typing import Any

from engine.checks.context import CheckContext
from engine.checks.health import Finding, per_device
from engine.checks.model import Status
from engine.nvml import decode_throttle

HW_SLOWDOWN_MASK = 0x8 | 0x40 | 0x80
"""Hardware slowdown, hardware thermal slowdown, power brake: the board protects itself."""
SW_SLOWDOWN_MASK = 0x4 | 0x20
"""Software power cap and software thermal slowdown."""


def check_throttle(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, mask: int) -> Finding:
        words = ", ".join(decode_throttle(mask)) or "none"
        if mask & HW_SLOWDOWN_MASK:
            return "fail", f"GPU {d.index}: clocks throttled by the hardware ({words})"
        if mask & SW_SLOWDOWN_MASK:
            return "warn", f"GPU {d.index}: clocks throttled ({words})"
        return "pass", f"GPU {d.index}: no harmful throttling (reasons: {words})"

    return per_device(ctx, "clocks_event_mask", judge, {
        "fail": "check cooling (fans, airflow, inlet temperature) and the power supply/cabling: "
                "`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`",
        "warn": "at the power cap or near the thermal limit: check `nvidia-smi -q -d PERFORMANCE,POWER`, "
                "the power limit (`nvidia-smi -pl`) and cooling"},
        "throttle reasons are not reported here")


POWER_LIMIT_LOWERED = 0.98
"""A power limit under this fraction of the board's default counts as lowered."""


def check_power_limit(ctx: CheckContext) -> tuple[Status, str, str]:
    """Dense tensor-core kernels run at the board's power cap (on the H200 the seed GEMM holds the
    "software power cap" reason within a second), so their speed follows the limit in force: a
    lowered limit makes every result slower and incomparable with the profile's peaks."""
    def judge(d: Any, pl: dict) -> Finding:
        enf, dflt = pl.get("enforced_w"), pl.get("default_w")
        if enf is None:
            return None
        rng = (f"; settable {pl['min_w']:.0f}-{pl['max_w']:.0f} W"
               if pl.get("min_w") is not None and pl.get("max_w") is not None else "")
        if dflt is None:
            return "pass", f"GPU {d.index}: power limit {enf:.0f} W (no default reported{rng})"
        text = f"GPU {d.index}: power limit {enf:.0f} W, the board's default {dflt:.0f} W{rng}"
        if enf < POWER_LIMIT_LOWERED * dflt:
            return "warn", (text + f" (lowered to {enf / dflt:.0%}: kernels that run at the power cap, "
                            "dense GEMMs first, are slower by about as much)")
        return "pass", text

    return per_device(ctx, "power_limits", judge, {
        "warn": "restore it with `sudo nvidia-smi -i <gpu> -pl <default W>` unless a site policy set it "
                "on purpose; compare results only between runs under the same limit"},
        "the power limit is not reported here")


def check_pcie(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, link: dict) -> Finding:
        gen, mgen, w, mw = (link.get(k) for k in ("gen", "max_gen", "width", "max_width"))
        text = f"GPU {d.index}: PCIe gen {gen or '?'}/{mgen or '?'} x{w or '?'}/x{mw or '?'}"
        if w and mw and w < mw:
            return "warn", text + " (link trained narrower than it can)"
        if gen and mgen and gen < mgen:
            return "pass", text + " (a lower generation at idle is normal power saving)"
        return "pass", text

    return per_device(ctx, "pcie_link", judge, {
        "warn": "reseat the GPU or its riser, check the slot's wiring and BIOS link settings; compare "
                "`sudo lspci -vv | grep -e LnkCap -e LnkSta` under load"},
        "the PCIe link is not reported here")


def check_temperature(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, t: dict) -> Finding:
        cur, slow = t.get("current_c"), t.get("slowdown_c")
        if cur is None:
            return None
        if slow is None:
            return "pass", f"GPU {d.index}: {cur:.0f} C (no slowdown threshold reported)"
        text = f"GPU {d.index}: {cur:.0f} C, slowdown at {slow:.0f} C"
        if cur >= slow:
            return "fail", text + " (at or past the slowdown threshold)"
        if slow - cur <= 10:
            return "warn", text + " (within 10 C of slowdown)"
        return "pass", text

    return per_device(ctx, "temperatures", judge, {
        "fail": "the GPU is slowing itself down: check fans, airflow and inlet temperature before measuring",
        "warn": "measurements will throttle under load: improve cooling, or watch the clocks during runs"},
        "the temperature is not reported here")


def check_mig(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, mig: dict) -> Finding:
        if mig["current"] != mig["pending"]:
            return "warn", (f"GPU {d.index}: MIG {'on' if mig['current'] else 'off'} now, "
                            f"{'on' if mig['pending'] else 'off'} after the next GPU reset")
        if mig["current"]:
            return "warn", (f"GPU {d.index}: MIG enabled: a run gets one slice, and the profile's peaks "
                            "describe the whole GPU")
        return "pass", f"GPU {d.index}: MIG disabled"

    return per_device(ctx, "mig_mode", judge, {
        "warn": "for whole-GPU measurements disable MIG (`sudo nvidia-smi -i N -mig 0`, then reset the GPU); "
                "to use a slice, set CUDA_VISIBLE_DEVICES=MIG-<uuid> and calibrate a profile for it"},
        "this GPU has no MIG")


def check_compute_mode(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, mode: str) -> Finding:
        if mode == "prohibited":
            return "fail", f"GPU {d.index}: compute mode prohibited (no CUDA context can be created)"
        if mode.startswith("exclusive"):
            return "warn", (f"GPU {d.index}: compute mode {mode}: one process at a time, others get "
                            "cudaErrorDevicesUnavailable")
        return "pass", f"GPU {d.index}: compute mode {mode}"

    return per_device(ctx, "compute_mode", judge, {
        "fail": "`sudo nvidia-smi -i N -c DEFAULT`",
        "warn": "make sure nothing else holds the GPU, or set `sudo nvidia-smi -i N -c DEFAULT`"},
        "the compute mode is not reported here")


def check_processes(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, procs: list) -> Finding:
        if not procs:
            return "pass", f"GPU {d.index}: no other processes"
        names = ", ".join(f"pid {p['pid']} {p.get('name') or '?'}"
                          + (f" ({p['used_mib']:.0f} MiB)" if p.get("used_mib") else "") for p in procs[:5])
        return "warn", f"GPU {d.index}: {len(procs)} other process(es): {names}"

    return per_device(ctx, "gpu_processes", judge, {
        "warn": "timings will wander while they run: stop them, or pick an idle GPU with --device N "
                "(see `nvidia-smi`)"},
        "the GPU's processes are not reported here")
