"""A soak on the GPU: the task's kernel compiled, loaded and warmed up once, then launched back to
back in windows of about a quarter of a second, timed by the engine's own timer (``QueuedTimer``:
CUDA events around each launch, queued behind the hold kernel where the GPU outruns the host), with
one NVML sample per window. Re-verification poisons the outputs, launches once on input set 0 and
compares with the float64 reference computed at the start; it also counts the elements that differ
bit for bit from the first verification's output (advisory: a kernel with atomics may differ).
Runs inside the soak's engine process (``engine.soak_worker``)."""

from __future__ import annotations

import time
from typing import Any

import cupy as cp
from cupy.cuda import runtime

from engine.backends import pdl
from engine.backends.base import RunFailure
from engine.backends.cuda_convert import BITS, STORAGE, to_f64
from engine.backends.cuda_stages import (
    CUDA_ERRORS,
    bind_launches,
    compile_cubin,
    compile_inputs,
    device_limits,
    load_build,
    make_inputs,
)
from engine.backends.cuda_support import POISON_BITS
from engine.backends.cuda_timer import QueuedTimer
from engine.verify import compare, merge
from kernels import get_spec
from kernels.spec import Refusal

BATCH_S = 0.25
"""GPU time per timed batch; a longer window is several batches, each followed by an NVML sample."""
MAX_BATCH = 20_000
"""At most this many launches (each between its own pair of events) per batch."""


class CudaSoak:
    """The GPU's soaker (the interface ``engine.soak_worker`` describes)."""

    def __init__(self, task: Any, profile: Any) -> None:
        self.task, self.profile = task, profile
        self.spec = get_spec(task.kernel)
        self.dtype = task.dtype.value
        try:
            cp.cuda.Device(task.device).use()
            self.limits, self.props = device_limits(task.device, profile.name)
        except CUDA_ERRORS as exc:
            raise RunFailure("launch_error", f"cannot open GPU {task.device}: {exc}", "device") from None
        self.pci = runtime.deviceGetPCIBusId(task.device)
        self.nvml_index: int | None = None
        try:
            from engine import nvml

            self.nvml_index = nvml.index_for_pci_bus_id(self.pci)
        except Exception:  # telemetry is advisory: the soak still times and verifies
            self.nvml_index = None
        self.t0: float | None = None
        self.count = 0
        self.first_bits: dict[str, Any] = {}

    def _cuda(self, stage: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, a CUDA error turned into a RunFailure naming the stage (matched by the rules)."""
        try:
            return fn(*args)
        except CUDA_ERRORS as exc:
            raise RunFailure("launch_error", f"{type(exc).__name__}: {exc} (during the soak's {stage})",
                             "cuda_error") from None
        except cp.cuda.memory.OutOfMemoryError as exc:
            raise RunFailure("launch_error", f"cupy.cuda.memory.OutOfMemoryError: {exc}", "out_of_memory") from None

    def setup(self, em: Any) -> None:
        self._cuda("setup", self._setup, em)

    def _setup(self, em: Any) -> None:
        task, spec, limits = self.task, self.spec, self.limits
        kp = spec.plan(task, limits)
        if isinstance(kp, Refusal):
            raise RunFailure("invalid", f"{kp} (on this device)", "constraint")
        em.start("compile", f"NVRTC for {limits.arch}")
        self.build = build = spec.render(kp, limits)
        try:
            cubin, _, cached = compile_cubin(*compile_inputs(build, limits))
        except RunFailure as exc:
            em.fail("compile", exc.message)
            raise
        em.done("compile", ("cached cubin" if cached else "compiled") + f" for {limits.arch}")
        em.start("load")
        funcs, grids, _ = load_build(build, cubin, limits)
        self.funcs = funcs
        em.done("load")
        em.start("inputs")
        l2 = int(self.props.get("l2CacheSize", 0)) or int(self.profile.l2_mb * 2**20)
        self.sets, self.outs, in_bytes = make_inputs(spec, task, self.dtype, l2)
        self.outs.update({b.name: cp.empty(b.shape, dtype=STORAGE[b.dtype]) for b in build.scratch})
        self.refs = spec.reference_outputs(cp, {k: to_f64(v, self.dtype) for k, v in self.sets[0].items()})
        self.run_once = bind_launches(build, funcs, grids, self.sets, self.outs, self.dtype,
                                      pdl.enabled(limits.compute_capability))
        cp.cuda.Device().synchronize()
        em.done("inputs", f"{len(self.sets)} rotating set(s) of {in_bytes / 2**20:.1f} MiB")
        em.start("warmup")
        self.timer = QueuedTimer(funcs["sol_hold_kernel"])
        self.probed = self.timer.warm(self.run_once, max(5, task.warmup), 5)
        cp.cuda.Device().synchronize()
        em.done("warmup", f"{max(5, task.warmup)} launches")
        gpu_s, host_s = self.probed
        self.per_launch_s = max(gpu_s or 0.0, host_s, 1e-6)

    def info(self) -> dict[str, Any]:
        name = self.props["name"]
        return {"gpu_name": name.decode() if isinstance(name, bytes) else str(name), "nvml_index": self.nvml_index,
                "pci_bus_id": self.pci, "simulated": False}

    def counters(self, with_xid: bool = True) -> dict[str, Any]:
        from engine.soak_health import read_counters

        return read_counters(self.nvml_index, self.pci, with_xid)

    def now(self) -> float:
        if self.t0 is None:
            self.t0 = time.monotonic()
        return time.monotonic() - self.t0

    def _sample(self) -> dict[str, Any]:
        if self.nvml_index is None:
            return {}
        try:
            from engine import nvml

            s = nvml.sample(self.nvml_index)
        except Exception:
            return {}
        return {"sm_clock_mhz": s.sm_clock_mhz, "sm_clock_max_mhz": s.sm_clock_max_mhz,
                "mem_clock_mhz": s.mem_clock_mhz, "power_w": s.power_w, "power_limit_w": s.power_limit_w,
                "temperature_c": s.temperature_c, "temperature_slowdown_c": s.temperature_slowdown_c,
                "throttle_mask": s.throttle_mask}

    def window(self, seconds: float) -> dict[str, Any]:
        """Back-to-back batches for ``seconds`` of wall time: the mean launch time over them, and
        the NVML samples folded (lowest clocks, highest temperature, mean power, every reason)."""
        self.now()
        end = time.monotonic() + seconds
        times: list[float] = []
        samples: list[dict[str, Any]] = []
        while True:
            n = max(1, min(MAX_BATCH, int(min(BATCH_S, seconds) / self.per_launch_s)))
            base = self.count

            def launch(i: int, base: int = base) -> None:
                self.run_once(base + i)

            batch = self._cuda("timed launches", self.timer.run, "soak", launch, n, self.probed, n)
            self.count += n
            times += batch
            samples.append(self._sample())
            if time.monotonic() >= end:
                break
        return {"ms": sum(times) / len(times), "launches": len(times), **_fold(samples)}

    def verify(self) -> Any:
        return self._cuda("verification", self._verify)

    def _verify(self) -> Any:
        bits = BITS[self.dtype]
        for name in self.spec.outputs:
            self.outs[name].view(bits).fill(POISON_BITS[self.dtype])
        self.run_once(0)
        cp.cuda.Device().synchronize()
        parts = {}
        changed = 0
        for name in self.spec.outputs:
            out = self.outs[name]
            unwritten = int((out.view(bits) == POISON_BITS[self.dtype]).sum())
            parts[name] = compare(cp, to_f64(out, self.dtype), self.refs[name], self.spec.rtol(self.dtype), unwritten)
            if name not in self.first_bits:
                self.first_bits[name] = out.view(bits).copy()
            else:
                changed += int((out.view(bits) != self.first_bits[name]).sum())
        c = merge(parts)
        if changed:
            c.note = (c.note + "; " if c.note else "") + f"{changed} element(s) differ bit for bit from the first output"
        return c

    def fingerprint(self) -> dict[str, Any]:
        from engine.backends.collect import base_fingerprint

        fp = base_fingerprint(self.profile, "cuda", self.build.source_sha256)
        fp.gpu_name = self.info()["gpu_name"]
        fp.compute_capability = f"{self.limits.compute_capability[0]}.{self.limits.compute_capability[1]}"
        fp.arch = self.limits.arch
        try:
            from engine import nvml

            info = nvml.device_info(self.nvml_index) if self.nvml_index is not None else None
            fp.gpu_uuid = info.uuid if info else None
            fp.driver_version = nvml.driver_version()
        except Exception:
            pass
        return fp.model_dump(mode="json")

    def close(self) -> None:
        try:
            cp.cuda.Device().synchronize()
        except Exception:
            pass


def _fold(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One window's telemetry from its batches' samples."""
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
