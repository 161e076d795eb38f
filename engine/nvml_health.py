"""Device health from NVML: persistence, ECC, retired pages and remapped rows, the PCIe link, MIG and
the compute mode; what the environment checks (``engine.checks``) and a soak's counters
(``engine.soak_health``) judge. Each query returns None when the GPU, the driver or this pynvml does
not support it, so a check can say "skip: not supported" instead of guessing."""

from __future__ import annotations

from engine.nvml import _q, handle, init

COMPUTE_MODES = {0: "default", 1: "exclusive thread", 2: "prohibited", 3: "exclusive process"}
"""nvmlComputeMode_t values, in words."""


def persistence_mode(index: int) -> bool | None:
    """True when persistence mode is on (the driver stays loaded between clients)."""
    h = handle(index)
    if h is None:
        return None
    v = _q("nvmlDeviceGetPersistenceMode", h)
    return None if v is None else bool(v)


def ecc_uncorrectable(index: int) -> dict[str, int | bool] | None:
    """ECC state and uncorrectable error counts: {enabled, volatile, aggregate}; None when the GPU
    has no ECC."""
    h = handle(index)
    if h is None:
        return None
    mod = init()
    modes = _q("nvmlDeviceGetEccMode", h)
    if modes is None:
        return None
    enabled = bool(modes[0]) if isinstance(modes, (list, tuple)) else bool(modes)
    err = getattr(mod, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    vol = _q("nvmlDeviceGetTotalEccErrors", h, err, getattr(mod, "NVML_VOLATILE_ECC", 0))
    agg = _q("nvmlDeviceGetTotalEccErrors", h, err, getattr(mod, "NVML_AGGREGATE_ECC", 1))
    return {"enabled": enabled, "volatile": int(vol or 0), "aggregate": int(agg or 0)}


def retired_pages(index: int) -> dict[str, int | bool] | None:
    """Page retirement (pre-Ampere): {single_bit, double_bit, pending}; None when unsupported."""
    h = handle(index)
    if h is None:
        return None
    mod = init()
    pending = _q("nvmlDeviceGetRetiredPagesPendingStatus", h)
    if pending is None:
        return None
    out: dict[str, int | bool] = {"pending": bool(pending)}
    for key, cause in (("single_bit", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS"),
                       ("double_bit", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR")):
        pages = _q("nvmlDeviceGetRetiredPages", h, getattr(mod, cause, 0 if key == "single_bit" else 1))
        out[key] = len(pages) if pages is not None else 0
    return out


def remapped_rows(index: int) -> dict[str, int | bool] | None:
    """Row remapping (Ampere and later): {correctable, uncorrectable, pending, failure}."""
    h = handle(index)
    if h is None:
        return None
    v = _q("nvmlDeviceGetRemappedRows", h)
    if v is None:
        return None
    corr, unc, pending, failure = v
    return {"correctable": int(corr), "uncorrectable": int(unc), "pending": bool(pending),
            "failure": bool(failure)}


def pcie_link(index: int) -> dict[str, int] | None:
    """PCIe link now and at most: {gen, max_gen, width, max_width}; None when unknown."""
    h = handle(index)
    if h is None:
        return None
    vals = {
        "gen": _q("nvmlDeviceGetCurrPcieLinkGeneration", h),
        "max_gen": _q("nvmlDeviceGetGpuMaxPcieLinkGeneration", h) or _q("nvmlDeviceGetMaxPcieLinkGeneration", h),
        "width": _q("nvmlDeviceGetCurrPcieLinkWidth", h),
        "max_width": _q("nvmlDeviceGetMaxPcieLinkWidth", h),
    }
    if vals["gen"] is None and vals["width"] is None:
        return None
    return {k: int(v) for k, v in vals.items() if v is not None}


def mig_mode(index: int) -> dict[str, bool] | None:
    """{current, pending}: MIG enabled now / after the next reset; None when the GPU has no MIG."""
    h = handle(index)
    if h is None:
        return None
    v = _q("nvmlDeviceGetMigMode", h)
    if v is None:
        return None
    return {"current": bool(v[0]), "pending": bool(v[1])}


def compute_mode(index: int) -> str | None:
    """'default', 'exclusive process', 'prohibited' (or 'exclusive thread' on old drivers)."""
    h = handle(index)
    if h is None:
        return None
    v = _q("nvmlDeviceGetComputeMode", h)
    return None if v is None else COMPUTE_MODES.get(int(v), f"mode {v}")
