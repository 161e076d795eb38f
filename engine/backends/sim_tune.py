"""A tune on the simulated device: each candidate's time from the kernel's efficiency model for its
knobs (as ``SimBackend`` times a run), so the whole tuning flow (search order, pruning, budget,
cache, cockpit) is testable without a GPU. SIMULATED: it ranks the model, never a GPU."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine.backends.sim import PEER_EFFICIENCY, SIM_LAUNCH_MS, _stage_delay, task_seed
from engine.sol import t_sol_ms
from kernels import get_spec
from kernels.spec import DeviceLimits, plan_or_raise


class SimTrials:
    """Times candidates from the model. Faults (the task's ``fault`` on one candidate) behave as on
    a GPU: ``hang`` never returns, ``illegal_address`` leaves the process unusable, ``nan`` makes
    the output wrong, ``compile_error`` fails the compile."""

    broken = False

    def __init__(self, task: Any, profile: Any, regime: str) -> None:
        self.task, self.profile, self.regime = task, profile, regime
        self.spec = get_spec(task.kernel)
        self.limits = DeviceLimits.from_profile(profile)
        self.sm_count = profile.sm_count
        self.dtype = task.dtype.value
        shape = self.spec.normalize_shape(task.shape)
        self.t_sol = t_sol_ms(self.spec.flops(shape), self.spec.bytes_moved(shape, self.dtype),
                              profile.sol_peak_flops(self.dtype), profile.bandwidth_bytes_per_s)
        self.hot = 1.12 if regime == "sustained" else 1.0
        """Sustained: the board at its power cap runs everything ~12 % slower (the H200's seed GEMM
        went 0.144 -> 0.171 ms); the ranking is the model's either way."""

    def prefetch(self, cands: list[Any]) -> None:
        """Nothing to compile ahead on the simulated device."""

    def close(self) -> None:
        """Nothing to release."""

    def setup(self) -> list[str]:
        return [f"SIMULATED tune on {self.profile.name} ({self.regime}): times come from the roofline model"]

    def peers(self, skip: set[str]) -> list[dict[str, Any]]:
        out = []
        shape = self.spec.normalize_shape(self.task.shape)
        t_peer = t_sol_ms(self.spec.flops(shape), self.spec.bytes_moved(shape, self.dtype),
                          self.profile.peak_flops(self.dtype), self.profile.bandwidth_bytes_per_s)
        for p in self.spec.peers(self.task):
            if self.dtype not in p.dtypes or p.name in skip:
                continue
            eff = PEER_EFFICIENCY["baseline" if p.baseline else "other"]
            ms = (t_peer / eff + SIM_LAUNCH_MS * (2 if p.baseline else 1)) * self.hot
            out.append({"name": p.name, "label": p.label + " [SIMULATED]", "median_ms": ms, "baseline": p.baseline})
        return out

    def trial(self, cand: Any, start: Any, fault: str, iters: int | None = None) -> Any:
        from dataclasses import replace

        time.sleep(_stage_delay())
        task = cand.task(self.task)
        if fault == "hang":
            while True:
                time.sleep(1.0)
        if fault == "compile_error":
            return replace(start, status="compile_error", reason="NVRTC_ERROR_COMPILATION [SIMULATED fault injection]")
        if fault in ("illegal_address", "launch_failure"):
            self.broken = True
            return replace(start, status="launch_error",
                           reason="cudaErrorIllegalAddress: an illegal memory access was encountered "
                                  "[SIMULATED fault injection]")
        try:
            kp = plan_or_raise(self.spec, task, self.limits)
            build = self.spec.render(kp, self.limits)
            eff = max(1e-3, min(0.99, self.spec.sim_efficiency(task, self.limits)))
        except ValueError as exc:
            return replace(start, status="compile_error", reason=str(exc))
        rng = np.random.default_rng(task_seed(task) % 2**63)
        t_model = (self.t_sol / eff + SIM_LAUNCH_MS * max(1, len(build.launches))) * self.hot
        samples = t_model * rng.lognormal(0.0, 0.015, size=max(5, iters or self.task.iterations))
        med, p10, p90 = (float(np.percentile(samples, q)) for q in (50, 10, 90))
        status = "incorrect" if fault == "nan" else "ok"
        return replace(start, status=status, median_ms=med, p10_ms=p10, p90_ms=p90,
                       sol_pct=100.0 * self.t_sol / med, resolved=dict(kp.schedule),
                       reason="SIMULATED: NaN in the output (fault injection)" if fault == "nan" else "SIMULATED")
