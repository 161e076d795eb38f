"""The CUDA device: the GPU behind ``engine.backends.device.Device``, in the engine process.

NVRTC compiles for the device's own architecture (sm_90a on Hopper) straight to a cubin, so there
is no PTX for the driver to fall back on; the loaded function's binary version is checked against
the device. Times come from CUDA events around each launch after the warm-up. The stages' work, the
timer, the observers and the peers live in the ``cuda_*`` modules beside this one; the order of the
stages is the job's (``engine.backends.stages``)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import cupy as cp
import numpy as np
from cupy.cuda import runtime
from cupy_backends.cuda.libs import nvrtc

from engine.backends import pdl
from engine.backends.base import Emitter, RunFailure, fair_rest_s
from engine.backends.collect import base_fingerprint
from engine.backends.compile_pool import CompilePool
from engine.backends.cuda_ceilings import measure_ceilings
from engine.backends.cuda_convert import BITS, STORAGE, to_f64
from engine.backends.cuda_observers import (
    NvmlSampler,
    clock_text,
    fold,
    measure_energy,
    nvml_index,
    sampled_validity,
    telemetry,
)
from engine.backends.cuda_peers import heater, regime_peers, time_peers
from engine.backends.cuda_stages import (
    CUDA_ERRORS,
    bind_launches,
    compare_outputs,
    compile_cubin,
    compile_inputs,
    device_limits,
    load_build,
    make_inputs,
    rotating_outs,
)
from engine.backends.cuda_support import FAULT_MODES, NAN_BITS, POISON_BITS, needs_hold
from engine.backends.cuda_timer import QueuedTimer, back_to_back, queued_timer, rest, settle
from engine.backends.device import Bound, Compiled, Inputs, Loaded, Probe, Progress, Purpose
from engine.profiles import Profile
from engine.result import Correctness, Fingerprint, PeerResult
from engine.task import TaskSpec
from kernels import get_spec
from kernels.spec import Build

__all__ = ["CudaDevice", "compile_cubin", "compile_inputs", "device_limits"]

OOM = cp.cuda.memory.OutOfMemoryError
BATCH_S = 0.25
"""A soak's GPU time per timed batch; a longer window is several batches, each followed by an NVML sample."""
MAX_BATCH = 20_000
"""At most this many launches (each between its own pair of events) per batch of a soak."""


class CudaDevice:
    """One GPU opened for a job (``engine.backends.device.Device``): RunFailure 'device' where it
    cannot be opened."""

    name = "cuda"
    simulated = False
    errors: tuple[type[BaseException], ...] = (*CUDA_ERRORS, OOM)

    def __init__(self, task: TaskSpec, profile: Profile | None) -> None:
        self.task, self.profile = task, profile
        self.spec = get_spec(task.kernel)
        self.dtype = task.dtype.value
        try:
            cp.cuda.Device(task.device).use()
            self.limits, self.props = device_limits(task.device, profile.name if profile else "")
        except CUDA_ERRORS as exc:
            raise RunFailure("launch_error", f"cannot open GPU {task.device}: {exc}", "device") from None
        self._timer: QueuedTimer | None = None
        self._pool: CompilePool | None = None
        self._nvml: int | None = None
        self._t0: float | None = None
        self._launched = 0

    def failure(self, exc: BaseException) -> tuple[str, str]:
        if isinstance(exc, OOM):
            return f"cupy.cuda.memory.OutOfMemoryError: {exc}", "out_of_memory"
        return f"{type(exc).__name__}: {exc}", "cuda_error"

    def gpu_name(self) -> str:
        name = self.props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    # --- compile, load, inputs -------------------------------------------------------------------
    def compile_title(self) -> str:
        return f"NVRTC for {self.limits.arch}"

    def compile(self, build: Build, fault: str) -> Compiled:
        cubin, log, cached = compile_cubin(*compile_inputs(build, self.limits, fault))
        return Compiled(build, cubin, log, cached, ("cached cubin" if cached else "compiled") + f" for {self.limits.arch}")

    def load(self, compiled: Compiled) -> Loaded:
        build = compiled.build
        funcs, grids, loaded = load_build(build, compiled.binary, self.limits)
        dependent = pdl.enabled(self.limits.compute_capability) and any(ln.pdl for ln in build.launches)
        return Loaded(build, funcs, grids, loaded, dependent)

    def load_detail(self, loaded: Loaded) -> str:
        return (", ".join(f"{n}: {loaded.resources[n].get('registers')} regs" for n in loaded.build.functions)
                + ("; programmatic dependent launch" if loaded.dependent else ""))

    def inputs(self, rotate: bool) -> Inputs:
        """The rotating input sets (``make_inputs``) and their outputs: one output dict per set
        (``rotating_outs``) with ``rotate``, else one for every set."""
        assert self.profile is not None, "a job with inputs is planned against a profile"
        l2 = int(self.props.get("l2CacheSize", 0)) or int(self.profile.l2_mb * 2**20)
        sets, outs, in_bytes = make_inputs(self.spec, self.task, self.dtype, l2)
        out_sets = rotating_outs(outs, len(sets), self.spec.outputs) if rotate else [outs] * len(sets)
        cp.cuda.Device().synchronize()
        return Inputs(sets, outs, out_sets, in_bytes,
                      f"N(0,1), {len(sets)} rotating set(s) of {in_bytes / 2**20:.1f} MiB (L2 {l2 / 2**20:.0f} MiB)")

    # --- bind, warm, time ------------------------------------------------------------------------
    def bind(self, loaded: Loaded, inputs: Inputs, purpose: Purpose, em: Emitter,
             task: TaskSpec | None = None) -> Bound:
        """``run(i)``: the build's launches on input set ``i`` with every argument prepared once; the
        build's scratch buffers shared by every set. A trial is timed by one timer for the whole tune
        (``queued_timer``), a run or a soak by its module's own hold kernel."""
        build = loaded.build
        scratch = {b.name: cp.empty(b.shape, dtype=STORAGE[b.dtype]) for b in build.scratch}
        outs = [{**o, **scratch} for o in inputs.out_sets]
        run = bind_launches(build, loaded.funcs, loaded.grids, inputs.sets, outs, self.dtype,
                            pdl.enabled(self.limits.compute_capability))
        if purpose == "trial":
            timer = self._trial_timer()
        else:
            timer = QueuedTimer(loaded.funcs["sol_hold_kernel"])
        return Bound(loaded, run, purpose, timer=timer)

    def _trial_timer(self) -> QueuedTimer:
        """One timer for every trial and peer of a tune (its hold kernel through CuPy)."""
        self._timer = self._timer or queued_timer()
        return self._timer

    def inject(self, bound: Bound, fault: str, em: Emitter) -> None:
        if fault in FAULT_MODES:
            em.info(f"injecting fault {fault} (task fault field)", "warning")
            flag = cp.zeros(1, dtype=cp.int32)
            assert bound.loaded is not None
            bound.loaded.funcs["sol_fault_kernel"]((1,), (1,), (flag, np.int32(FAULT_MODES[fault])))
            cp.cuda.Device().synchronize()

    def rest(self, seconds: float, em: Emitter, what: str) -> None:
        rest(seconds, em, what)

    def watch(self, bound: Bound) -> None:
        """NVML sampled in a thread while a run warms up and is timed (``NvmlSampler``)."""
        sampler = NvmlSampler(runtime.deviceGetPCIBusId(self.task.device))
        sampler.start()
        bound.sampler = sampler

    def unwatch(self, bound: Bound) -> None:
        bound.sampler.stop.set()

    def _snap(self, bound: Bound) -> None:
        if bound.sampler is not None:
            bound.sampler.snap()

    def warm(self, bound: Bound, n: int, n_probe: int, every: int = 0, progress: Progress | None = None) -> Probe:
        """``QueuedTimer.warm``; a run and a soak then wait for the GPU (a trial goes on to its timed
        launches at once)."""
        probed = bound.timer.warm(bound.run, n, n_probe, every, progress)
        if bound.purpose != "trial":
            cp.cuda.Device().synchronize()
        self._snap(bound)
        return probed

    def holds(self, probed: Probe) -> bool:
        return needs_hold(*probed)

    def time(self, name: str, bound: Bound, n: int, probed: Probe, chunk: int,
             progress: Progress | None = None) -> list[float]:
        times = bound.timer.run(name, bound.run, n, probed, chunk, progress)
        self._snap(bound)  # the clock and throttle reasons at the end of the timed runs
        return times

    def energy(self, bound: Bound, median_ms: float, em: Emitter) -> dict[str, Any]:
        return measure_energy(self.task, bound.run, median_ms, em)

    # --- verify, peers, collect ------------------------------------------------------------------
    def verify(self, bound: Bound, inputs: Inputs, fault: str) -> Correctness:
        """Outputs poisoned, one launch on set 0 (``nan``: NaN written over it), every output against
        the float64 reference of set 0 (computed once)."""
        bits = BITS[self.dtype]
        for name in self.spec.outputs:
            inputs.outs[name].view(bits).fill(POISON_BITS[self.dtype])
        bound.run(0)
        if fault == "nan":
            inputs.outs[self.spec.output].view(bits)[..., ::97] = NAN_BITS[self.dtype]
        cp.cuda.Device().synchronize()
        c = compare_outputs(self.spec, inputs.outs, self.dtype, self._refs(inputs))
        if bound.purpose == "soak":
            _changed_bits(c, inputs.outs, self.spec.outputs, bits, bound.first_bits)
        return c

    def _refs(self, inputs: Inputs) -> dict[str, Any]:
        """The float64 reference of input set 0, computed once."""
        if inputs.refs is None:
            inputs.refs = self.spec.reference_outputs(cp, {k: to_f64(v, self.dtype) for k, v in inputs.sets[0].items()})
        return inputs.refs

    def peers(self, inputs: Inputs, bound: Bound, em: Emitter) -> list[PeerResult]:
        return time_peers(self.task, self.spec, inputs.sets, inputs.out_sets, self.dtype, em, bound.timer)

    def fingerprint(self, build: Build | None) -> Fingerprint:
        fp = base_fingerprint(self.profile, "cuda", build.source_sha256 if build else None)
        fp.gpu_name = self.gpu_name()
        fp.compute_capability = f"{self.limits.compute_capability[0]}.{self.limits.compute_capability[1]}"
        fp.arch = self.limits.arch
        return fp

    def collect(self, loaded: Loaded, inputs: Inputs, bound: Bound,
                em: Emitter) -> tuple[Fingerprint, dict[str, Any], dict[str, Any]]:
        """The fingerprint (GPU, driver, runtime, NVRTC, CuPy), the launch record (functions,
        resources, grids as launched) and the run's validity (clocks sampled, the hold's queueing)."""
        task, build, timer = self.task, loaded.build, bound.timer
        fp = self.fingerprint(build)
        dv, rv = runtime.driverGetVersion(), runtime.runtimeGetVersion()
        fp.cuda_driver_version = f"{dv // 1000}.{(dv % 1000) // 10}"
        fp.cuda_runtime_version = f"{rv // 1000}.{(rv % 1000) // 10}"
        nv = nvrtc.getVersion()
        fp.nvrtc_version = f"{nv[0]}.{nv[1]}"
        fp.cupy_version = cp.__version__
        validity = sampled_validity(bound.sampler, fp)
        validity["queue_hold"] = dict(timer.stats)
        validity["rest_applied_s"] = fair_rest_s(task)
        validity["launches_each"] = {"warmup": task.warmup, "timed": task.iterations}
        if timer.stats["expired_chunks"]:
            em.info(f"{timer.stats['expired_chunks']} of {timer.stats['held_chunks']} held chunks ran out of "
                    "hold before the host had queued them: those launch times include launch gaps", "warning")
        launch = {"functions": list(build.functions), "info": build.info, "arch": self.limits.arch,
                  "resources": loaded.resources, "input_sets": len(inputs.sets),
                  "launches": [{"function": ln.function, "grid": g, "block": ln.block,
                                "shared_mem_bytes": ln.shared_mem_bytes, "cluster": ln.cluster,
                                "pdl": loaded.dependent and ln.pdl}
                               for ln, g in zip(build.launches, loaded.grids, strict=True)]}
        return fp, launch, validity

    # --- a soak: windows of back-to-back launches, the counters --------------------------------
    def now(self) -> float:
        """Seconds soaked: since the first call."""
        if self._t0 is None:
            self._t0 = time.monotonic()
        return time.monotonic() - self._t0

    def window(self, bound: Bound, seconds: float, probed: Probe) -> dict[str, Any]:
        """Back-to-back batches (``BATCH_S`` of GPU time each, at most ``MAX_BATCH`` launches, each
        between its own pair of events) for ``seconds`` of wall time: the mean launch time over
        them, and the NVML samples taken after each batch folded (``fold``)."""
        self.now()
        gpu_s, host_s = probed
        per_launch_s = max(gpu_s or 0.0, host_s, 1e-6)
        end = time.monotonic() + seconds
        times: list[float] = []
        samples: list[dict[str, Any]] = []
        while True:
            n = max(1, min(MAX_BATCH, int(min(BATCH_S, seconds) / per_launch_s)))
            base = self._launched

            def launch(i: int, base: int = base) -> None:
                bound.run(base + i)

            times += bound.timer.run("soak", launch, n, probed, n)
            self._launched += n
            samples.append(telemetry(self.nvml_index()))
            if time.monotonic() >= end:
                break
        return {"ms": sum(times) / len(times), "launches": len(times), **fold(samples)}

    def nvml_index(self) -> int | None:
        if self._nvml is None:
            self._nvml = nvml_index(self.task.device)
        return self._nvml

    def info(self) -> dict[str, Any]:
        return {"gpu_name": self.gpu_name(), "nvml_index": self.nvml_index(),
                "pci_bus_id": runtime.deviceGetPCIBusId(self.task.device), "simulated": False}

    def counters(self, with_xid: bool = True) -> dict[str, Any]:
        """ECC, retired rows and (``with_xid``) the kernel log's Xid events (``soak_health``)."""
        from engine.soak_health import read_counters

        return read_counters(self.nvml_index(), runtime.deviceGetPCIBusId(self.task.device), with_xid)

    def identify(self, fp: Fingerprint) -> Fingerprint:
        """The GPU's UUID and the driver's version added (a soak's fingerprint)."""
        try:
            from engine import nvml

            index = self.nvml_index()
            info = nvml.device_info(index) if index is not None else None
            fp.gpu_uuid = info.uuid if info else None
            fp.driver_version = nvml.driver_version()
        except Exception:
            pass
        return fp

    # --- calibrate ------------------------------------------------------------------------------
    def ceilings(self, log: Any, copy_bytes: int) -> dict[str, Any]:
        """This GPU's measured ceilings (``measure_ceilings``): copy bandwidth, GEMM rates per dtype."""
        return measure_ceilings(self.task.device, log, copy_bytes)

    # --- a tune: the regime, compiling ahead, the peers ------------------------------------------
    def regime(self, inputs: Inputs, regime: str, rest_s: float) -> list[str]:
        """How candidates are timed (notes for the tune); sustained: the board heated first, by
        back-to-back launches of the cuBLAS peer for ``SUSTAIN_HEAT_S``."""
        from engine.tune_types import SUSTAIN_HEAT_S

        notes = [f"{len(inputs.sets)} rotating input set(s) of {inputs.in_bytes / 2**20:.1f} MiB, N(0,1); "
                 f"{self.task.warmup} warm-ups and {self.task.iterations} timed launches per candidate"]
        if regime == "sustained":
            heat = heater(self.spec, self.task, self.dtype, inputs.sets, inputs.out_sets)
            if heat is not None:
                back_to_back(heat, SUSTAIN_HEAT_S)
            notes.append(f"sustained: {SUSTAIN_HEAT_S:g} s of back-to-back launches first "
                         f"({self.clock() or 'no NVML clock reading'})")
        else:
            notes.append(f"burst: {rest_s:g} s of rest before each candidate and peer")
        return notes

    def settle(self, bound: Bound, regime: str, rest_s: float, busy_s: float) -> None:
        settle(bound.run, regime, rest_s, busy_s)

    def clock(self) -> str:
        return clock_text(self.nvml_index())

    def prefetch(self, builds: Iterable[tuple[str, Build]]) -> None:
        """Compile these builds in a pool of processes (``CompilePool``) while the GPU times the ones
        before them: the cubins land in the kernel cache, where ``compile`` finds them."""
        self._pool = self._pool or CompilePool()
        for key, build in builds:
            self._pool.submit(key, _precompile, *compile_inputs(build, self.limits))

    def prefetched(self, key: str) -> None:
        """Wait for ``key``'s compile ahead, if one was submitted."""
        if self._pool is not None:
            self._pool.wait(key)

    def tune_peers(self, inputs: Inputs, skip: set[str], time_fn: Any) -> list[dict[str, Any]]:
        """Each peer timed as the candidates are (``time_fn(name, bound)``), then verified."""
        def timed(name: str, launch: Any) -> Any:
            return time_fn(name, Bound(None, launch, "trial", timer=self._trial_timer()))

        return regime_peers(self.spec, self.task, self.dtype, inputs.sets, inputs.out_sets, self._refs(inputs),
                            timed, self.clock, skip)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        try:
            cp.cuda.Device().synchronize()
        except Exception:
            pass


def _changed_bits(c: Correctness, outs: dict[str, Any], names: Any, bits: Any, first: dict[str, Any]) -> None:
    """A soak's re-verification: the elements that differ bit for bit from the first verification's
    output, said in the correctness' note (advisory: a kernel with atomics may differ)."""
    changed = 0
    for name in names:
        if name not in first:
            first[name] = outs[name].view(bits).copy()
        else:
            changed += int((outs[name].view(bits) != first[name]).sum())
    if changed:
        c.note = (c.note + "; " if c.note else "") + f"{changed} element(s) differ bit for bit from the first output"


def _precompile(source: str, arch: str, options: list[str]) -> bool:
    """A pool worker: compile into the kernel cache (an error is reported when the trial compiles)."""
    try:
        compile_cubin(source, arch, options)
    except RunFailure:
        return False
    return True
