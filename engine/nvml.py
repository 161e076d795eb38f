"""The one module that talks to NVML (through nvidia-ml-py's ``pynvml``).

NVML is initialised lazily; every query returns ``None`` when the GPU or driver does not support it
(a missing function is logged once); a missing library or driver becomes one BackendUnavailable
with a fix. NVML never creates a CUDA context, so the cockpit process may use this freely.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.errors import BackendUnavailable

log = logging.getLogger(__name__)

_lock = threading.Lock()
_state: dict[str, Any] = {"init": False, "error": None}
_warned: set[str] = set()

THROTTLE_REASONS = {
    0x1: "GPU idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
"""clocks_event_reasons bits (nvmlClocksEventReason*), in words."""

HARMFUL_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""Reasons that slow a running kernel (idle and app-clock settings do not)."""


def decode_throttle(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [text for bit, text in THROTTLE_REASONS.items() if mask & bit]


def _pynvml():
    try:
        import pynvml
    except ImportError:
        raise BackendUnavailable(
            "NVML bindings are not installed (module pynvml from nvidia-ml-py)",
            fix="pip install nvidia-ml-py (not the deprecated 'pynvml' distribution)",
        ) from None
    return pynvml


def _explain(exc: Exception) -> BackendUnavailable:
    text = str(exc)
    low = text.lower()
    if "library not found" in low or "libnvidia-ml" in low:
        return BackendUnavailable(
            f"no NVIDIA driver found: NVML library libnvidia-ml.so.1 could not be loaded ({text})",
            fix="install the NVIDIA driver on the host; in a container run with --gpus all "
                "(NVIDIA Container Toolkit) or --device nvidia.com/gpu=all (CDI)",
        )
    if "driver not loaded" in low:
        return BackendUnavailable(
            f"the NVIDIA kernel driver is not loaded ({text})",
            fix="load it (sudo modprobe nvidia) or reinstall the driver; check `dmesg | grep -i nvidia`",
        )
    if "mismatch" in low:
        return BackendUnavailable(
            f"NVIDIA driver/library version mismatch ({text})",
            fix="the kernel module and user-space driver differ after an upgrade: reboot, or reload the nvidia modules",
        )
    return BackendUnavailable(f"NVML failed to initialise: {text}",
                              fix="run `nvidia-smi` to see what the driver says")


def init() -> Any:
    """Initialise NVML once; return the pynvml module. Raises BackendUnavailable with a fix."""
    with _lock:
        if _state["init"]:
            return _state["mod"]
        if _state["error"] is not None:
            raise _state["error"]
        try:
            mod = _pynvml()
            mod.nvmlInit()
        except BackendUnavailable as exc:
            _state["error"] = exc
            raise
        except Exception as exc:  # pynvml.NVMLError and OSError from ctypes
            err = _explain(exc)
            _state["error"] = err
            raise err from None
        _state.update(init=True, mod=mod)
        return mod


def reset_for_tests() -> None:
    with _lock:
        _state.update(init=False, error=None)
        _state.pop("mod", None)


def _q(fn_name: str, *args: Any) -> Any:
    """Call pynvml.<fn_name>; None when unsupported or missing (logged once per function)."""
    mod = init()
    fn = getattr(mod, fn_name, None)
    if fn is None:
        if fn_name not in _warned:
            _warned.add(fn_name)
            log.info("NVML function %s is not in this pynvml", fn_name)
        return None
    try:
        return fn(*args)
    except Exception as exc:
        if fn_name not in _warned:
            _warned.add(fn_name)
            log.info("NVML %s: %s", fn_name, exc)
        return None


def _s(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def probe() -> tuple[bool, str | None, str | None]:
    """(usable, problem, fix): does NVML answer and see at least one GPU?"""
    try:
        init()
    except BackendUnavailable as exc:
        return False, exc.message, exc.fix
    n = _q("nvmlDeviceGetCount") or 0
    if n == 0:
        return False, "the NVIDIA driver answers but sees no GPU", (
            "check CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES and the container's GPU mapping")
    return True, None, None


def device_count() -> int:
    return _q("nvmlDeviceGetCount") or 0


def driver_version() -> str | None:
    return _s(_q("nvmlSystemGetDriverVersion"))


def cuda_driver_version() -> str | None:
    """The CUDA version the driver supports, e.g. '13.0'."""
    v = _q("nvmlSystemGetCudaDriverVersion_v2") or _q("nvmlSystemGetCudaDriverVersion")
    if not v:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def handle(index: int) -> Any:
    return _q("nvmlDeviceGetHandleByIndex", index)


@dataclass
class DeviceInfo:
    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: float | None = None
    compute_capability: str | None = None
    power_limit_w: float | None = None
    sm_count: int | None = None
    """Multiprocessors, where NVML's device attributes answer (None: not reported)."""


def device_info(index: int) -> DeviceInfo | None:
    h = handle(index)
    if h is None:
        return None
    mem = _q("nvmlDeviceGetMemoryInfo", h)
    cc = _q("nvmlDeviceGetCudaComputeCapability", h)
    pci = _q("nvmlDeviceGetPciInfo", h)
    pl = _q("nvmlDeviceGetEnforcedPowerLimit", h)
    attrs = _q("nvmlDeviceGetAttributes_v2", h) or _q("nvmlDeviceGetAttributes", h)
    sm = getattr(attrs, "multiprocessorCount", None)
    return DeviceInfo(
        index=index,
        name=_s(_q("nvmlDeviceGetName", h)) or f"GPU {index}",
        uuid=_s(_q("nvmlDeviceGetUUID", h)),
        pci_bus_id=_s(getattr(pci, "busId", None)) if pci is not None else None,
        memory_total_mib=mem.total / 2**20 if mem is not None else None,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        power_limit_w=pl / 1000.0 if pl else None,
        sm_count=sm if isinstance(sm, int) and sm > 0 else None,
    )


def devices() -> list[DeviceInfo]:
    return [d for d in (device_info(i) for i in range(device_count())) if d is not None]


@dataclass
class Sample:
    """One telemetry snapshot of one GPU. None = not supported / not available."""

    index: int
    t: float
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    temperature_slowdown_c: float | None = None
    throttle_mask: int | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    pcie_tx_kbps: float | None = None
    pcie_rx_kbps: float | None = None
    # GPM (Hopper and later), percentages over the interval since the previous sample
    sm_activity_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_activity_pct: float | None = None
    dram_bw_util_pct: float | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class GpmTracker:
    """Keeps the previous GPM sample per device; metrics need two samples >= 100 ms apart."""

    MIN_INTERVAL_S = 0.1

    def __init__(self) -> None:
        self._prev: dict[int, tuple[float, Any]] = {}
        self._supported: dict[int, bool] = {}

    def supported(self, index: int, h: Any) -> bool:
        if index not in self._supported:
            sup = _q("nvmlGpmQueryDeviceSupport", h)
            self._supported[index] = bool(getattr(sup, "isSupportedDevice", 0)) if sup is not None else False
        return self._supported[index]

    def metrics(self, index: int, h: Any) -> dict[str, float] | None:
        if not self.supported(index, h):
            return None
        mod = init()
        now = time.monotonic()
        prev = self._prev.get(index)
        if prev is not None and now - prev[0] < self.MIN_INTERVAL_S:
            return None
        try:
            sample = mod.nvmlGpmSampleAlloc()
            mod.nvmlGpmSampleGet(h, sample)
        except Exception as exc:
            log.info("GPM sample failed: %s", exc)
            self._supported[index] = False
            return None
        self._prev[index] = (now, sample)
        if prev is None:
            return None
        ids = {
            "sm_activity_pct": mod.NVML_GPM_METRIC_SM_UTIL,
            "sm_occupancy_pct": mod.NVML_GPM_METRIC_SM_OCCUPANCY,
            "tensor_activity_pct": mod.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "dram_bw_util_pct": mod.NVML_GPM_METRIC_DRAM_BW_UTIL,
        }
        try:
            mg = mod.c_nvmlGpmMetricsGet_t()
            mg.version = mod.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(ids)
            mg.sample1 = prev[1]
            mg.sample2 = sample
            for i, mid in enumerate(ids.values()):
                mg.metrics[i].metricId = mid
            mod.nvmlGpmMetricsGet(mg)
        except Exception as exc:
            log.info("GPM metrics failed: %s", exc)
            return None
        finally:
            try:
                mod.nvmlGpmSampleFree(prev[1])
            except Exception:
                pass
        return {key: float(mg.metrics[i].value) for i, key in enumerate(ids)}


def sample(index: int, gpm: GpmTracker | None = None) -> Sample:
    """A telemetry snapshot of GPU ``index`` (about 20 us of NVML calls, more with GPM)."""
    mod = init()
    now = time.time()
    h = handle(index)
    if h is None:
        return Sample(index=index, t=now, error="GPU not answering NVML")
    s = Sample(index=index, t=now)
    util = _q("nvmlDeviceGetUtilizationRates", h)
    if util is not None:
        s.gpu_util_pct, s.mem_util_pct = float(util.gpu), float(util.memory)
    mem = _q("nvmlDeviceGetMemoryInfo", h)
    if mem is not None:
        s.mem_used_mib, s.mem_total_mib = mem.used / 2**20, mem.total / 2**20
    s.sm_clock_mhz = _q("nvmlDeviceGetClockInfo", h, mod.NVML_CLOCK_SM)
    s.mem_clock_mhz = _q("nvmlDeviceGetClockInfo", h, mod.NVML_CLOCK_MEM)
    s.sm_clock_max_mhz = _q("nvmlDeviceGetMaxClockInfo", h, mod.NVML_CLOCK_SM)
    p = _q("nvmlDeviceGetPowerUsage", h)
    s.power_w = p / 1000.0 if p is not None else None
    pl = _q("nvmlDeviceGetEnforcedPowerLimit", h)
    s.power_limit_w = pl / 1000.0 if pl is not None else None
    s.temperature_c = _q("nvmlDeviceGetTemperature", h, mod.NVML_TEMPERATURE_GPU)
    s.temperature_slowdown_c = _q("nvmlDeviceGetTemperatureThreshold", h,
                                  mod.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
    mask = _q("nvmlDeviceGetCurrentClocksEventReasons", h)
    if mask is None:
        mask = _q("nvmlDeviceGetCurrentClocksThrottleReasons", h)
    s.throttle_mask = mask
    s.throttle_reasons = decode_throttle(mask)
    s.pcie_tx_kbps = _q("nvmlDeviceGetPcieThroughput", h, mod.NVML_PCIE_UTIL_TX_BYTES)
    s.pcie_rx_kbps = _q("nvmlDeviceGetPcieThroughput", h, mod.NVML_PCIE_UTIL_RX_BYTES)
    if gpm is not None:
        m = gpm.metrics(index, h)
        if m:
            for k, v in m.items():
                setattr(s, k, v)
    return s


def energy_mj(index: int) -> int | None:
    """The board's total energy counter (GPU and memory) in mJ since the driver loaded; None where
    NVML does not keep one (before Volta, some virtual GPUs). It advances in coarse steps: compare
    two reads taken where it changed (``engine.energy``)."""
    h = handle(index)
    if h is None:
        return None
    v = _q("nvmlDeviceGetTotalEnergyConsumption", h)
    return int(v) if v is not None else None


def sm_clock_mhz(index: int) -> float | None:
    """The current SM clock of GPU ``index`` in MHz; None where NVML does not answer."""
    mod = init()
    h = handle(index)
    return None if h is None else _q("nvmlDeviceGetClockInfo", h, mod.NVML_CLOCK_SM)


def power_instant_w(index: int) -> float | None:
    """Instantaneous board power in W (field NVML_FI_DEV_POWER_INSTANT); None where the driver
    does not report it. ``nvmlDeviceGetPowerUsage`` is a 1-second average on Ampere and later."""
    mod = init()
    h = handle(index)
    fid = getattr(mod, "NVML_FI_DEV_POWER_INSTANT", None)
    if h is None or fid is None:
        return None
    vals = _q("nvmlDeviceGetFieldValues", h, [fid])
    if not vals or getattr(vals[0], "nvmlReturn", 1) != 0:
        return None
    return vals[0].value.uiVal / 1000.0


def compute_processes(index: int) -> list[dict[str, Any]]:
    """Processes holding a compute context on GPU ``index`` (pid, used MiB); [] when unknown."""
    h = handle(index)
    if h is None:
        return []
    procs = _q("nvmlDeviceGetComputeRunningProcesses", h) or []
    out = []
    for p in procs:
        used = getattr(p, "usedGpuMemory", None)
        out.append({"pid": int(p.pid), "used_mib": used / 2**20 if isinstance(used, int) else None})
    return out


def index_for_pci_bus_id(bus_id: str) -> int | None:
    """NVML's index for a CUDA device's PCI bus id (CUDA and NVML order can differ)."""
    mod = init()
    try:
        h = mod.nvmlDeviceGetHandleByPciBusId(bus_id.encode() if isinstance(bus_id, str) else bus_id)
    except Exception:
        return None
    return _q("nvmlDeviceGetIndex", h)


# --- state queries for the checks, the soak and the live screen ------------------------------------
# Each returns None when the GPU, the driver or this pynvml does not support the query, so a check
# can say "skip: not supported" instead of guessing. The device's health counters (ECC, retirement,
# PCIe link, MIG, compute mode) are in engine.nvml_health.


def clocks_event_mask(index: int) -> int | None:
    """The current clock event (throttle) reasons bit mask; decode with decode_throttle()."""
    h = handle(index)
    if h is None:
        return None
    mask = _q("nvmlDeviceGetCurrentClocksEventReasons", h)
    return mask if mask is not None else _q("nvmlDeviceGetCurrentClocksThrottleReasons", h)


def power_limits(index: int) -> dict[str, float] | None:
    """{enforced_w, default_w, min_w, max_w}: the power limit in force, the board's default and the
    range an administrator may set (keys absent when unknown); None when none is reported."""
    h = handle(index)
    if h is None:
        return None
    out: dict[str, float] = {}
    for key, fn in (("enforced_w", "nvmlDeviceGetEnforcedPowerLimit"),
                    ("default_w", "nvmlDeviceGetPowerManagementDefaultLimit")):
        v = _q(fn, h)
        if v:
            out[key] = v / 1000.0
    cons = _q("nvmlDeviceGetPowerManagementLimitConstraints", h)
    if cons and len(cons) == 2 and cons[1]:
        out["min_w"], out["max_w"] = cons[0] / 1000.0, cons[1] / 1000.0
    return out or None


def temperatures(index: int) -> dict[str, float] | None:
    """{current_c, slowdown_c, shutdown_c, max_operating_c} (keys absent when unknown)."""
    h = handle(index)
    if h is None:
        return None
    mod = init()
    out: dict[str, float] = {}
    cur = _q("nvmlDeviceGetTemperature", h, getattr(mod, "NVML_TEMPERATURE_GPU", 0))
    if cur is not None:
        out["current_c"] = float(cur)
    for key, const in (("slowdown_c", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN"),
                       ("shutdown_c", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"),
                       ("max_operating_c", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX")):
        if hasattr(mod, const):
            v = _q("nvmlDeviceGetTemperatureThreshold", h, getattr(mod, const))
            if v:
                out[key] = float(v)
    return out or None


def gpu_processes(index: int) -> list[dict[str, Any]] | None:
    """Compute and graphics processes on GPU ``index``: pid, name, used MiB, kind; None when unknown."""
    h = handle(index)
    if h is None:
        return None
    found = False
    out: list[dict[str, Any]] = []
    for kind, fn in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                     ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
        procs = _q(fn, h)
        if procs is None:
            continue
        found = True
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            name = _s(_q("nvmlSystemGetProcessName", int(p.pid)))
            out.append({"pid": int(p.pid), "name": name, "kind": kind,
                        "used_mib": used / 2**20 if isinstance(used, int) else None})
    return out if found else None


def nvml_library_version() -> str | None:
    """The NVML library's own version (it comes with the user-space driver)."""
    return _s(_q("nvmlSystemGetNVMLVersion"))
