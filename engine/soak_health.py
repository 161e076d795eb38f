"""A GPU's error counters, read before and after a soak (and at each re-verification): uncorrectable
ECC errors (volatile and aggregate), remapped rows, and the Xid events the kernel log holds for this
GPU. Each is None where the GPU, the driver or this user cannot read it (no ECC, dmesg restricted),
never a guess. Reads NVML only through ``engine.nvml``."""

from __future__ import annotations

import re
from typing import Any

COUNTERS = ("ecc_volatile_uncorrected", "ecc_aggregate_uncorrected", "remapped_rows_uncorrectable", "xid_events")
"""Counters whose increase during a soak is an error."""

ERROR_TEXT = {
    "ecc_volatile_uncorrected": "uncorrectable ECC error encountered during the soak (volatile count {a} -> {b})",
    "ecc_aggregate_uncorrected": "uncorrectable ECC error encountered during the soak (aggregate count {a} -> {b})",
    "remapped_rows_uncorrectable": "uncorrectable ECC error encountered during the soak: rows remapped "
                                   "for uncorrectable errors {a} -> {b}",
    "xid_events": "Xid event(s) in the kernel log during the soak ({a} -> {b}): {last}",
}


def empty() -> dict[str, Any]:
    return {k: None for k in (*COUNTERS, "ecc_enabled", "xid_last")}


def _bus(pci: str | None) -> str | None:
    """'00000000:3B:00.0' or 'PCI:0000:3b:00' -> '3b:00' (bus and device, as dmesg and NVML both say)."""
    if not pci:
        return None
    m = re.search(r"([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\s*$", pci.strip())
    return f"{m.group(1)}:{m.group(2)}".lower() if m else None


def xid_events(pci_bus_id: str | None, run: Any = None) -> tuple[int | None, str | None]:
    """(Xid lines in the kernel log for this GPU, the last of them); (None, None) when the log is not
    readable (``kernel.dmesg_restrict``) or the GPU's PCI address is unknown."""
    from engine.checks.context import run_command
    from engine.checks.health import XID_RE

    want = _bus(pci_bus_id)
    if want is None:
        return None, None
    run = run or run_command
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]):
        out = run(argv, 10)
        if out is not None and out[0] == 0 and out[1].strip():
            lines = [out[1][m.start():].split("\n", 1)[0][:300] for m in XID_RE.finditer(out[1])
                     if _bus(m.group(1)) == want]
            return len(lines), (lines[-1] if lines else None)
    return None, None


def read_counters(nvml_index: int | None, pci_bus_id: str | None, with_xid: bool = True) -> dict[str, Any]:
    """The counters of GPU ``nvml_index`` now (``COUNTERS``, ``ecc_enabled``, ``xid_last``)."""
    out = empty()
    if nvml_index is not None:
        try:
            from engine import nvml_health as nvml

            ecc = nvml.ecc_uncorrectable(nvml_index)
            if ecc is not None:
                out["ecc_enabled"] = bool(ecc.get("enabled"))
                if ecc.get("enabled"):
                    out["ecc_volatile_uncorrected"] = int(ecc.get("volatile") or 0)
                    out["ecc_aggregate_uncorrected"] = int(ecc.get("aggregate") or 0)
            rows = nvml.remapped_rows(nvml_index)
            if rows is not None:
                out["remapped_rows_uncorrectable"] = int(rows.get("uncorrectable") or 0)
        except Exception:  # counters are evidence, never a reason to fail the soak themselves
            pass
    if with_xid:
        out["xid_events"], out["xid_last"] = xid_events(pci_bus_id)
    return out


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int | None]:
    """after - before for each counter; None where either is unknown."""
    return {k: (after[k] - before[k]) if isinstance(before.get(k), int) and isinstance(after.get(k), int) else None
            for k in COUNTERS}


def new_errors(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """The text of the first counter that went up (matched by the troubleshooting rules), or None."""
    for key, d in delta(before, after).items():
        if d is not None and d > 0:
            return ERROR_TEXT[key].format(a=before[key], b=after[key], last=after.get("xid_last") or "")
    return None
