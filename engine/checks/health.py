"""GPU health that decides whether a run can be trusted: persistence, ECC, memory retirement, Xid."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from engine.checks.context import CheckContext
from engine.checks.model import NO_DRIVER_SKIP, STATUS_ORDER, Status, ok, skip

Finding = tuple[Status, str] | None
"""One GPU's (status, words), or None when the query is not supported there."""


def per_device(ctx: CheckContext, query: str | Callable[[int], Any], judge: Callable[[Any, Any], Finding],
               fixes: dict[str, str], unsupported: str) -> tuple[Status, str, str]:
    """Run NVML ``query`` (a facade method name, or a function of the index) for every GPU, judge each answer, and fold them into one result."""
    if not ctx.driver_ok():
        return skip(NO_DRIVER_SKIP)
    devs = ctx.devices()
    if not devs:
        return skip("no GPU visible")
    findings = []
    for d in devs:
        get = getattr(ctx.nvml, query) if isinstance(query, str) else query
        value = get(d.index)
        f = judge(d, value) if value is not None else None
        if f is not None:
            findings.append(f)
    if not findings:
        return skip(unsupported)
    worst = min((s for s, _ in findings), key=lambda s: STATUS_ORDER[s])
    return worst, "; ".join(text for _, text in findings), fixes.get(worst, "")


def check_persistence(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, on: bool) -> Finding:
        return ("pass", f"GPU {d.index}: persistence mode on") if on else (
            "warn", f"GPU {d.index}: persistence mode off (the driver tears down and re-initialises between "
                    "clients: slow first launches, clocks reset)")

    return per_device(ctx, "persistence_mode", judge,
                      {"warn": "`sudo nvidia-smi -pm 1`, or better enable nvidia-persistenced "
                               "(`sudo systemctl enable --now nvidia-persistenced`)"},
                      "persistence mode is not reported here (WSL or Windows)")


def check_ecc(ctx: CheckContext) -> tuple[Status, str, str]:
    def judge(d: Any, ecc: dict) -> Finding:
        if not ecc.get("enabled"):
            return "pass", f"GPU {d.index}: ECC disabled"
        if ecc.get("volatile"):
            return "fail", f"GPU {d.index}: {ecc['volatile']} uncorrectable ECC error(s) since the last reset"
        if ecc.get("aggregate"):
            return "warn", f"GPU {d.index}: {ecc['aggregate']} uncorrectable ECC error(s) over its lifetime, none since reset"
        return "pass", f"GPU {d.index}: ECC on, no uncorrectable errors"

    return per_device(ctx, "ecc_uncorrectable", judge, {
        "fail": "results from this GPU are suspect: drain it, reset it (`sudo nvidia-smi -r -i N`) and "
                "run `nvidia-smi -q -d ECC,ROW_REMAPPER`; if errors recur, the GPU needs service",
        "warn": "watch `nvidia-smi -q -d ECC` for new errors; plan a field diagnostic (dcgmi diag -r 3)"},
        "this GPU has no ECC")


def check_retirement(ctx: CheckContext) -> tuple[Status, str, str]:
    def both(i: int) -> dict | None:
        rows, pages = ctx.nvml.remapped_rows(i), ctx.nvml.retired_pages(i)
        if rows is None and pages is None:
            return None
        return {"rows": rows, "pages": pages}

    def judge(d: Any, v: dict) -> Finding:
        rows, pages = v["rows"] or {}, v["pages"] or {}
        if rows.get("failure"):
            return "fail", f"GPU {d.index}: row remapping FAILED (no spare rows left)"
        if rows.get("pending") or pages.get("pending"):
            return "warn", f"GPU {d.index}: a memory row remap / page retirement is pending until the GPU is reset"
        bits = []
        if rows:
            bits.append(f"{rows.get('uncorrectable', 0)} uncorrectable / {rows.get('correctable', 0)} "
                        "correctable rows remapped")
        if pages:
            bits.append(f"{pages.get('double_bit', 0)} double-bit / {pages.get('single_bit', 0)} single-bit "
                        "pages retired")
        return "pass", f"GPU {d.index}: " + ", ".join(bits) + ", nothing pending"

    return per_device(ctx, both, judge, {
        "fail": "the GPU needs service (RMA); take it out of scheduling",
        "warn": "reset the GPU when idle (`sudo nvidia-smi -r -i N`) or reboot, so the remap takes effect"},
        "neither row remapping nor page retirement is reported here")


CRITICAL_XIDS = {48: "double-bit ECC error", 63: "row remap recorded", 64: "row remap failed",
                 74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC rate",
                 94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout",
                 120: "GSP error", 140: "unrecovered ECC error"}
"""Xids that mean the hardware or the driver is in trouble: isolate the node."""
APP_XIDS = {13: "graphics engine exception (often a kernel's out-of-bounds access)",
            31: "GPU memory page fault (illegal address)", 43: "a CUDA application was stopped",
            45: "preemptive cleanup after an earlier error"}

XID_RE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def read_kernel_log(ctx: CheckContext) -> str | None:
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]):
        out = ctx.run(argv, 10)
        if out is not None and out[0] == 0 and out[1].strip():
            return out[1]
    return None


def check_xid(ctx: CheckContext) -> tuple[Status, str, str]:
    log = read_kernel_log(ctx)
    if log is None:
        return skip("the kernel log is not readable by this user (kernel.dmesg_restrict); "
                    "read it with `sudo dmesg | grep -i xid`")
    events = [(m.group(1), int(m.group(2))) for m in XID_RE.finditer(log)]
    if not events:
        return ok("no Xid events in the kernel log since boot")
    crit = [(pci, x) for pci, x in events if x in CRITICAL_XIDS]
    words = "; ".join(f"Xid {x} on {pci}: {CRITICAL_XIDS.get(x) or APP_XIDS.get(x, 'see NVIDIA Xid catalog')}"
                      for pci, x in dict.fromkeys(events))
    if crit:
        return "fail", f"{len(events)} Xid event(s) since boot, {len(crit)} critical: {words}", (
            "isolate the node (drain it), reset the GPU (`sudo nvidia-smi -r`) or reboot, run `dcgmi diag -r 3`; "
            "if it recurs the GPU needs service")
    return "warn", f"{len(events)} Xid event(s) since boot, none critical: {words}", (
        "application faults (often a kernel's out-of-bounds access): run the kernel under "
        "`compute-sanitizer --tool memcheck`")
