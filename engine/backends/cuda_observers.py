"""What the CUDA backend observes around the timed launches: NVML samples (clocks, throttle reasons,
temperature, power) in a thread, the run's validity from them, and the energy per launch."""

from __future__ import annotations

import os
import threading
from typing import Any

import cupy as cp
from cupy.cuda import runtime


class NvmlSampler(threading.Thread):
    """Samples NVML every ``interval_s`` (50 ms) while the kernel runs: clocks and throttle reasons
    seen. A timed phase can be shorter than that (the seed GEMM's 100 launches take ~15 ms), so the
    backend also takes one sample itself at the end of the warm-up and of the timed runs (``snap``):
    the clock the card had come down to by then. With ``tagged`` (bench scripts timing candidates
    in turn), it samples only while ``tag`` names what runs, and each sample carries that tag."""

    def __init__(self, pci_bus_id: str, interval_s: float = 0.05, tagged: bool = False) -> None:
        super().__init__(daemon=True)
        self.pci = pci_bus_id
        self.interval_s = interval_s
        self.tagged = tagged
        self.tag: str | None = None
        self.stop = threading.Event()
        self.samples: list[dict[str, Any]] = []

    def _take(self) -> bool:
        from engine import nvml

        tag = self.tag
        idx = nvml.index_for_pci_bus_id(self.pci)
        if idx is None:
            return False
        s = nvml.sample(idx)
        self.samples.append({"sm_clock_mhz": s.sm_clock_mhz, "mem_clock_mhz": s.mem_clock_mhz,
                             "throttle_mask": s.throttle_mask, "temperature_c": s.temperature_c,
                             "power_w": s.power_w, "tag": tag})
        return True

    def snap(self) -> None:
        """One sample now, from the caller's thread; telemetry is advisory, so never raises."""
        try:
            self._take()
        except Exception:
            return

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if (not self.tagged or self.tag is not None) and not self._take():
                    return
                self.stop.wait(self.interval_s)
        except Exception:  # telemetry is advisory: never fail a run for it
            return


def sampled_validity(sampler: NvmlSampler, fp: Any) -> dict[str, Any]:
    """The run's validity from the samples (throttle reasons, clocks, temperature, power) and NVML's
    view of the GPU now (other processes, power limit); fills in the fingerprint's GPU UUID and
    driver version."""
    v: dict[str, Any] = {}
    s = sampler.samples
    if s:
        from engine import nvml

        mask = 0
        for x in s:
            mask |= x.get("throttle_mask") or 0
        clocks = [x["sm_clock_mhz"] for x in s if x.get("sm_clock_mhz")]
        v.update(samples=len(s), throttle_reasons_seen=nvml.decode_throttle(mask & ~0x1),
                 harmful_throttle=bool(mask & nvml.HARMFUL_THROTTLE_MASK),
                 sm_clock_mhz_min=min(clocks) if clocks else None,
                 sm_clock_mhz_max=max(clocks) if clocks else None,
                 temperature_c_max=max((x["temperature_c"] or 0) for x in s),
                 power_w_max=max((x["power_w"] or 0) for x in s))
        try:
            idx = nvml.index_for_pci_bus_id(sampler.pci)
            if idx is not None:
                others = [p for p in nvml.compute_processes(idx) if p["pid"] != os.getpid()]
                v["other_processes"] = others
                info = nvml.device_info(idx)
                if info:
                    fp.gpu_uuid = info.uuid
                pl = nvml.power_limits(idx) or {}
                # GEMMs at the power cap scale with it: two results compare only under one limit
                v.update(power_limit_w=pl.get("enforced_w"), power_limit_default_w=pl.get("default_w"))
                fp.driver_version = nvml.driver_version()
        except Exception:
            pass
    return v


def measure_energy(task: Any, run_once: Any, median_ms: float, em: Any) -> dict[str, Any]:
    """Board power and energy per launch over ``task.energy_s`` s of back-to-back launches
    (``engine.energy``), or {"note": why not}."""
    import itertools

    from engine import energy, nvml

    try:
        idx = nvml.index_for_pci_bus_id(runtime.deviceGetPCIBusId(task.device))
    except Exception as exc:  # NVML missing: the run itself is still good
        return {"note": f"NVML unavailable, energy not measured: {exc}"}
    if idx is None:
        return {"note": "NVML does not list this GPU: energy not measured"}
    em.info(f"energy: {task.energy_s:g} s of back-to-back launches, NVML energy counter")
    count = itertools.count()
    batch = energy.batch_for(median_ms)
    load = energy.CupyLoad(cp, lambda: run_once(next(count)), batch=batch)
    try:
        fig = energy.measure(load, energy.NvmlReader(idx), task.energy_s, launches_per_batch=batch)
    finally:
        cp.cuda.Device().synchronize()
    if "note" in fig:
        em.info(fig["note"], "warning")
    else:
        em.info(f"energy: {fig['watts']:.0f} W, {fig['mj_per_launch']:.3g} mJ per launch "
                f"({fig['ms_per_launch']:.4f} ms) over {fig['window_s']:.2f} s")
    return fig


def nvml_index(device: int) -> int | None:
    """NVML's index of CUDA device ``device`` (None where NVML cannot say: telemetry is advisory)."""
    try:
        from engine import nvml

        return nvml.index_for_pci_bus_id(runtime.deviceGetPCIBusId(device))
    except Exception:
        return None


def clock_text(index: int | None) -> str:
    """'SM 1290 MHz, sw power cap': the clock and throttle reasons right now (advisory)."""
    if index is None:
        return ""
    try:
        from engine import nvml

        s = nvml.sample(index)
        reasons = nvml.decode_throttle((s.throttle_mask or 0) & ~0x1)
        return f"SM {s.sm_clock_mhz} MHz" + (f", {', '.join(reasons)}" if reasons else "")
    except Exception:
        return ""


def telemetry(index: int | None) -> dict[str, Any]:
    """One NVML sample of GPU ``index`` as a soak window's fields ({} where NVML cannot say)."""
    if index is None:
        return {}
    try:
        from engine import nvml

        s = nvml.sample(index)
    except Exception:
        return {}
    return {"sm_clock_mhz": s.sm_clock_mhz, "sm_clock_max_mhz": s.sm_clock_max_mhz,
            "mem_clock_mhz": s.mem_clock_mhz, "power_w": s.power_w, "power_limit_w": s.power_limit_w,
            "temperature_c": s.temperature_c, "temperature_slowdown_c": s.temperature_slowdown_c,
            "throttle_mask": s.throttle_mask}


def fold(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One window's telemetry from its batches' samples: the lowest clocks, the highest
    temperature, the mean power, every throttle reason."""
    def vals(key: str) -> list[Any]:
        return [s[key] for s in samples if s.get(key) is not None]

    out: dict[str, Any] = {}
    for key, how in (("sm_clock_mhz", min), ("mem_clock_mhz", min), ("temperature_c", max),
                     ("sm_clock_max_mhz", max), ("power_limit_w", max), ("temperature_slowdown_c", min)):
        v = vals(key)
        out[key] = how(v) if v else None
    p = vals("power_w")
    out["power_w"] = sum(p) / len(p) if p else None
    masks = vals("throttle_mask")
    mask = 0
    for m in masks:
        mask |= int(m)
    out["throttle_mask"] = mask if masks else None
    return out

