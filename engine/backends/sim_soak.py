"""A soak on the simulated device: a plausible, deterministic series (the card warms up over a couple
of minutes, power settles below the limit, the launch time wanders by a fraction of a percent around
the roofline model's) with the faults a soak exists to find injectable: ``corrupt`` (the output
stops matching the reference: silent data corruption), ``throttle`` (thermal slowdown: clocks drop,
launches slow down) and ``ecc`` (the uncorrectable ECC count goes up). SIMULATED: never evidence of
a GPU's behaviour. Verification runs for real on a CPU slice, as ``SimBackend``'s does.

``SOL_SIM_SOAK_SPEED`` (default 1) runs simulated time that many times faster than the wall clock,
so rehearsals and tests of long soaks take seconds."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.backends.collect import base_fingerprint
from engine.backends.sim import SIM_LAUNCH_MS, _stage_delay, round_to, sim_slice, task_seed
from engine.multi_device import sim_slow_factor
from engine.sol import t_sol_ms
from engine.verify import compare, merge
from kernels import get_spec
from kernels.spec import DeviceLimits, render_task

SM_CLOCK_MHZ = 1980.0
THROTTLED_MHZ = 1590.0
MEM_CLOCK_MHZ = 2619.0
SLOWDOWN_C = 87.0


def soak_speed(env: Mapping[str, str] | None = None) -> float:
    """``SOL_SIM_SOAK_SPEED`` (default 1): a number from 0.001 to 1e6; InputError naming it else."""
    from engine.errors import InputError

    text = (os.environ if env is None else env).get("SOL_SIM_SOAK_SPEED", "").strip() or "1"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1e-3 <= value <= 1e6:
        raise InputError(f"SOL_SIM_SOAK_SPEED={text!r}: expected a number from 0.001 to 1000000",
                         fix="export SOL_SIM_SOAK_SPEED=60 (simulated seconds per second), or unset it")
    return value


class SimSoak:
    """The simulated device's soaker (the interface ``engine.soak_worker`` describes)."""

    def __init__(self, task: Any, profile: Any, opts: Any) -> None:
        self.task, self.profile, self.opts = task, profile, opts
        self.spec = get_spec(task.kernel)
        self.limits = DeviceLimits.from_profile(profile)
        self.dtype = task.dtype.value
        self.slow = sim_slow_factor(task.device)
        self.speed = soak_speed()
        self.rng = np.random.default_rng(task_seed(task) % 2**63)
        self.power_limit_w = float(getattr(profile, "power_w", None) or 700.0)
        self.t = 0.0
        self.build: Any = None

    def _faulty(self, kind: str) -> bool:
        return self.opts.sim_fault == kind and self.t >= self.opts.fault_at_s

    def setup(self, em: Any) -> None:
        delay = _stage_delay()
        em.start("compile", f"SIMULATED: rendering {self.spec.name} for {self.limits.arch}")
        self.build = render_task(self.spec, self.task, self.limits)
        time.sleep(delay)
        em.done("compile", "SIMULATED")
        em.start("inputs")
        shape = self.spec.normalize_shape(self.task.shape)
        small = sim_slice(self.spec, self.task, shape)
        inputs = {b.name: round_to(self.rng.standard_normal(b.shape, dtype=np.float32), self.dtype)
                  for b in self.spec.buffers(self.task.model_copy(update={"shape": small})) if b.role == "input"}
        outs = self.spec.reference_outputs(np, inputs)
        self.outs = {k: round_to(v.astype(np.float32), self.dtype).astype(np.float64) for k, v in outs.items()}
        self.refs = self.spec.reference_outputs(np, {k: v.astype(np.float64) for k, v in inputs.items()})
        self.note = f"SIMULATED: {small[self.spec.dims[0]]} rows computed on the CPU"
        em.done("inputs", self.note)
        eff = max(1e-3, min(0.99, self.spec.sim_efficiency(self.task, self.limits)))
        t_sol = t_sol_ms(self.spec.flops(shape), self.spec.bytes_moved(shape, self.dtype),
                         self.profile.sol_peak_flops(self.dtype), self.profile.bandwidth_bytes_per_s)
        self.t_model = (t_sol / eff + SIM_LAUNCH_MS * max(1, len(self.build.launches))) * self.slow
        em.start("warmup")
        time.sleep(delay / 2)
        em.done("warmup", f"{self.task.warmup} launches (SIMULATED)")
        if self.slow != 1.0:
            em.info(f"SIMULATED GPU {self.task.device} runs {self.slow:g}x slow (SOL_COCKPIT_SIM_SLOW_DEVICES)", "warning")
        if self.opts.sim_fault != "none":
            em.info(f"SIMULATED fault {self.opts.sim_fault} from {self.opts.fault_at_s:g} s", "warning")

    def info(self) -> dict[str, Any]:
        return {"gpu_name": f"SIMULATED {self.profile.display_name}", "nvml_index": None, "pci_bus_id": None,
                "simulated": True}

    def counters(self, with_xid: bool = True) -> dict[str, Any]:
        n = 2 if self._faulty("ecc") else 0
        return {"ecc_enabled": True, "ecc_volatile_uncorrected": n, "ecc_aggregate_uncorrected": n,
                "remapped_rows_uncorrectable": 0, "xid_events": 0 if with_xid else None, "xid_last": None}

    def now(self) -> float:
        return self.t

    def window(self, seconds: float) -> dict[str, Any]:
        time.sleep(seconds / self.speed)
        self.t += seconds
        heat = 1.0 - math.exp(-self.t / 120.0)
        throttled = self._faulty("throttle")
        clock = THROTTLED_MHZ if throttled else SM_CLOCK_MHZ
        ms = self.t_model * (SM_CLOCK_MHZ / clock) * float(self.rng.lognormal(0.0, 0.004))
        power = self.power_limit_w * (0.70 + 0.04 * heat) + 4.0 * math.sin(self.t / 7.0)
        return {"ms": ms, "launches": max(1, int(seconds * 1e3 / ms)), "sm_clock_mhz": clock,
                "sm_clock_max_mhz": SM_CLOCK_MHZ, "mem_clock_mhz": MEM_CLOCK_MHZ, "power_w": round(power, 1),
                "power_limit_w": self.power_limit_w,
                "temperature_c": SLOWDOWN_C + 1.0 if throttled else round(34.0 + 28.0 * heat, 1),
                "temperature_slowdown_c": SLOWDOWN_C, "throttle_mask": 0x60 if throttled else 0x0}

    def verify(self) -> Any:
        parts = {}
        for name, out in self.outs.items():
            if self._faulty("corrupt"):
                out = out.copy()
                out.flat[:: max(1, out.size // 5)] += 8.0  # a few elements flipped far off
            parts[name] = compare(np, out, self.refs[name], self.spec.rtol(self.dtype), note=self.note)
        return merge(parts)

    def fingerprint(self) -> dict[str, Any]:
        fp = base_fingerprint(self.profile, "sim", self.build.source_sha256 if self.build else None)
        fp.gpu_name = f"SIMULATED {self.profile.display_name}"
        fp.compute_capability = self.profile.compute_capability
        fp.arch = self.limits.arch
        return fp.model_dump(mode="json")

    def close(self) -> None:
        """Nothing to release."""
