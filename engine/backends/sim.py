"""The simulated device: for machines without a GPU, rehearsals and tests. Never evidence of GPU
behaviour: every result says ``simulated: true`` and is labelled SIMULATED wherever shown.

Timings are deterministic for a task (seeded), derived from the profile's roofline and the
kernel spec's efficiency model for the knobs, so changing a knob changes the result plausibly.
Verification runs for real on a slice of the output computed on the CPU, so the verification
code path (tolerances, NaN/Inf, poison) is the same one the CUDA device uses. Faults can be
injected through the task's ``fault`` field, and a soak's (corrupt, throttle, ecc) through its
options. A tune's trials draw from their own seeded stream and model their outputs; a soak's
windows follow a plausible warm-up of the card (``SOL_SIM_SOAK_SPEED`` runs it faster)."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from engine.backends.base import Emitter, RunFailure
from engine.backends.collect import base_fingerprint
from engine.backends.device import Bound, Compiled, Inputs, Loaded, Probe, Progress, Purpose
from engine.multi_device import sim_slow_factor
from engine.profiles import Profile
from engine.result import Correctness, Fingerprint, PeerResult
from engine.sol import t_sol_ms
from engine.task import TaskSpec
from engine.timing import timing_stats
from engine.verify import compare, merge
from kernels import get_spec
from kernels.spec import Build, DeviceLimits

SIM_ROWS = 64
"""Rows of the output the simulated device actually computes and verifies on the CPU."""

SIM_MAX_BYTES = 512 * 2**20
"""Host memory the CPU slice may take. SIM_ROWS rows of a wide GEMM still read every weight (m =
8192, n = 65536, k = 2560: 167 M elements, ~6 GB at the peak below), so past this the slice also
halves its largest other dimension until it fits; the roofline timings keep the full shape."""

SIM_BYTES_PER_ELEMENT = 36
"""Peak host bytes per element of the slice's buffers: the fp32 inputs, bf16 rounding's 64-bit
temporaries and the float64 reference copies (tracemalloc measured ~34 on the bf16 seed slice)."""

PEER_EFFICIENCY = {"baseline": 0.48, "other": 0.67}

SIM_LAUNCH_MS = 0.005
"""The fixed cost of one kernel launch the simulated timings add to the roofline time over the
efficiency (prologue, pipeline fill, epilogue drain, the launch itself), as an H200 shows it at
small sizes (ADR-0005): without it a small shape reads closer to SOL SIMULATED than on the GPU. The
framework baseline (matmul, then add) launches twice."""


def _stage_delay() -> float:
    try:
        return float(os.environ.get("SOL_SIM_DELAY", "0.05"))
    except ValueError:
        return 0.05


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to ``dtype`` and return them widened to float32 again."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":  # round to nearest even on the bits; the carry out of bit 31 is masked off
        u = x.view(np.uint32)
        rounded = u >> np.uint32(16)
        rounded &= np.uint32(1)
        rounded += np.uint32(0x7FFF)
        rounded += u
        rounded &= np.uint32(0xFFFF0000)
        return rounded.view(np.float32)
    return x


def host_bytes(spec, task, shape: dict[str, int]) -> int:
    """Peak host memory the CPU computation of ``shape`` takes (exact integers: no overflow)."""
    n = 0
    for buf in spec.buffers(task.model_copy(update={"shape": shape})):
        size = 1
        for d in buf.shape:
            size *= int(d)
        n += size
    return n * SIM_BYTES_PER_ELEMENT


def sim_slice(spec, task, shape: dict[str, int]) -> dict[str, int]:
    """The shape the CPU computes: SIM_ROWS rows of the first dimension, and, where those rows
    would take more than SIM_MAX_BYTES, the largest other dimension halved until they fit."""
    small = dict(shape)
    small[spec.dims[0]] = min(shape.get("m", shape[spec.dims[0]]), SIM_ROWS)
    while host_bytes(spec, task, small) > SIM_MAX_BYTES:
        others = [d for d in spec.dims[1:] if small[d] > 1]
        if not others:
            break
        widest = max(others, key=lambda d: small[d])
        small[widest] = (small[widest] + 1) // 2
    return small


def task_seed(task) -> int:
    skip = {"iterations", "warmup", "timeout_s", "peers", "verify", "energy_s", "rest_s"}
    if not task.schedule:  # the planner's schedule: the same seed as a task written before the field
        skip.add("schedule")
    key = task.model_dump_json(exclude=skip)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") ^ task.seed


SM_CLOCK_MHZ = 1980.0
THROTTLED_MHZ = 1590.0
MEM_CLOCK_MHZ = 2619.0
SLOWDOWN_C = 87.0


MAX_TIMED_S = 60.0
"""The most simulated launch time a run's timed stage waits out: 50 000 launches of 0.156 ms take
their 7.8 s, as on the GPU, but ten million do not take five hours."""


def _speed(name: str, example: int, env: Mapping[str, str] | None) -> float:
    """The number the variable ``name`` holds (default 1), from 0.001 to 1e6; InputError naming it
    else."""
    from engine.errors import InputError

    text = (os.environ if env is None else env).get(name, "").strip() or "1"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1e-3 <= value <= 1e6:
        raise InputError(f"{name}={text!r}: expected a number from 0.001 to 1000000",
                         fix=f"export {name}={example} (simulated seconds per second), or unset it")
    return value


def run_speed(env: Mapping[str, str] | None = None) -> float:
    """``SOL_SIM_SPEED`` (default 1): how many times faster than the wall clock a simulated run's
    launches pass (their count times the modelled time, up to ``MAX_TIMED_S``), so that long runs
    can be rehearsed and watched and tests stay fast."""
    return _speed("SOL_SIM_SPEED", 100, env)


def soak_speed(env: Mapping[str, str] | None = None) -> float:
    """``SOL_SIM_SOAK_SPEED`` (default 1): how many times faster than the wall clock a simulated soak
    runs, so rehearsals and tests of long soaks take seconds."""
    return _speed("SOL_SIM_SOAK_SPEED", 60, env)


class SimFault(Exception):
    """An injected fault of the simulated device: what the GPU's CUDA error would have said."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class SimDevice:
    """The simulated device (``engine.backends.device.Device``). ``regime``: a tune's (sustained: the
    board at its power cap runs everything ~12 % slower; the ranking is the model's either way): a
    tune's trials model their outputs too (correct, unless the fault is ``nan``) instead of computing
    a CPU slice for each. ``sim_fault`` from ``fault_at_s``: a soak's injected fault (corrupt,
    throttle, ecc)."""

    name = "sim"
    simulated = True
    errors: tuple[type[BaseException], ...] = (SimFault,)

    def __init__(self, task: TaskSpec, profile: Profile | None, regime: str | None = None, sim_fault: str = "none",
                 fault_at_s: float = 0.0) -> None:
        if profile is None:
            raise RunFailure("invalid", "the simulated device needs a profile to model", "profile")
        self.task, self.profile = task, profile
        self.spec = get_spec(task.kernel)
        self.limits = DeviceLimits.from_profile(profile)
        self.dtype = task.dtype.value
        self.shape = self.spec.normalize_shape(task.shape)
        self.rng = np.random.default_rng(task_seed(task) % 2**63)
        self.delay = _stage_delay()
        self.hot = 1.12 if regime == "sustained" else 1.0
        self.modelled = regime is not None
        self.slow = sim_slow_factor(task.device)
        self.sim_fault, self.fault_at_s = sim_fault, fault_at_s
        self.t = 0.0
        """Seconds soaked (simulated time)."""
        self._outputs: dict[str, tuple[Any, Any]] = {}
        self._speed: float | None = None

    def failure(self, exc: BaseException) -> tuple[str, str]:
        return str(exc), getattr(exc, "kind", type(exc).__name__)

    def t_sol_ms(self, peak: float | None = None) -> float:
        """The task's SOL time on the profile (``peak``: another FLOP/s ceiling than the SOL one)."""
        peak = self.profile.sol_peak_flops(self.dtype) if peak is None else peak
        return t_sol_ms(self.spec.flops(self.shape), self.spec.bytes_moved(self.shape, self.dtype), peak,
                        self.profile.bandwidth_bytes_per_s)

    # --- compile, load, inputs -------------------------------------------------------------------
    def compile_title(self) -> str:
        return f"SIMULATED: rendering {self.spec.name} for {self.limits.arch}"

    def compile(self, build: Build, fault: str) -> Compiled:
        time.sleep(self.delay)
        if fault == "compile_error":
            raise RunFailure("compile_error",
                             f"{self.spec.name}.cu(1): error: identifier \"SOL_INJECTED_FAULT\" is undefined\n"
                             "1 error detected in the compilation of \"gemm_residual.cu\".\n"
                             "NVRTC_ERROR_COMPILATION (6) [SIMULATED fault injection]", "nvrtc_compile")
        return Compiled(build, None, "", False, f"SIMULATED {build.info.get('path', '')}")

    def load(self, compiled: Compiled) -> Loaded:
        if not self.modelled:
            time.sleep(self.delay / 2)
        build = compiled.build
        return Loaded(build, {}, [ln.grid for ln in build.launches], {})

    def load_detail(self, loaded: Loaded) -> str:
        return f"{len(loaded.build.launches)} launch(es)"

    def inputs(self, rotate: bool) -> Inputs:
        """N(0,1) inputs of a CPU slice of the output (``sim_slice``), from the task's seed."""
        spec, task, shape = self.spec, self.task, self.shape
        if self.modelled:
            return Inputs([], {}, [], 0, "SIMULATED: outputs modelled", note="SIMULATED")
        small = sim_slice(spec, task, shape)
        m = small[spec.dims[0]]
        rows = f"{m} rows computed on the CPU"
        if any(small[d] != shape[d] for d in spec.dims[1:]):  # a slice of the rows too, to fit in memory
            rows += (f" at {'x'.join(str(small[d]) for d in spec.dims)} (the full rows would take "
                     f"{host_bytes(spec, task, {**shape, spec.dims[0]: m}) / 1e9:.1f} GB of host memory)")
        host = {}
        for buf in spec.buffers(task.model_copy(update={"shape": small})):
            if buf.role == "input":
                host[buf.name] = round_to(self.rng.standard_normal(buf.shape, dtype=np.float32), self.dtype)
        time.sleep(self.delay / 2)
        return Inputs([host], {}, [{}], 0, f"SIMULATED N(0,1), {rows}", note=f"SIMULATED: {rows}")

    # --- bind, warm, time ------------------------------------------------------------------------
    def bind(self, loaded: Loaded, inputs: Inputs, purpose: Purpose, em: Emitter,
             task: TaskSpec | None = None) -> Bound:
        """The model's time per launch for ``task`` (the device's own by default): the roofline time
        over the kernel's efficiency for its knobs, plus the launches' fixed cost. A trial draws from
        its own stream (seeded by its knobs); a run and a soak from the device's."""
        task = task or self.task
        eff = max(1e-3, min(0.99, self.spec.sim_efficiency(task, self.limits)))
        t_model = self.t_sol_ms() / eff + SIM_LAUNCH_MS * max(1, len(loaded.build.launches))
        if purpose == "trial":
            rng = np.random.default_rng(task_seed(task) % 2**63)
            return Bound(loaded, _no_launch, purpose, model_ms=t_model * self.hot, rng=rng)
        if self.slow != 1.0:  # a sick neighbour for every-GPU rehearsals
            em.info(f"SIMULATED GPU {task.device} runs {self.slow:g}x slow (SOL_COCKPIT_SIM_SLOW_DEVICES)", "warning")
        if purpose == "soak" and self.sim_fault != "none":
            em.info(f"SIMULATED fault {self.sim_fault} from {self.fault_at_s:g} s", "warning")
        return Bound(loaded, _no_launch, purpose, model_ms=t_model * self.slow, rng=self.rng)

    def inject(self, bound: Bound, fault: str, em: Emitter) -> None:
        if fault == "hang":
            em.info("SIMULATED fault: the kernel never returns (hang)", "warning")
            while True:
                time.sleep(1.0)
        if fault == "launch_failure":
            raise SimFault("cudaErrorLaunchFailure: unspecified launch failure [SIMULATED fault injection]", fault)
        if fault == "illegal_address":
            raise SimFault("cudaErrorIllegalAddress: an illegal memory access was encountered "
                           "[SIMULATED fault injection]", fault)

    def rest(self, seconds: float, em: Emitter, what: str) -> None:
        """No card to rest."""

    def watch(self, bound: Bound) -> None:
        """No clocks to sample."""

    def unwatch(self, bound: Bound) -> None:
        """No clocks to sample."""

    def warm(self, bound: Bound, n: int, n_probe: int, every: int = 0, progress: Progress | None = None) -> Probe:
        """(A trial's stage delay is its compile's, as a tune on a GPU mostly compiles.)"""
        for i in range(n):
            if every and (i + 1) % every == 0 and progress is not None:
                progress(i + 1)
        if bound.purpose != "trial":
            time.sleep(self.delay / 2)
        return None, 0.0

    def holds(self, probed: Probe) -> bool:
        return False

    def time(self, name: str, bound: Bound, n: int, probed: Probe, chunk: int,
             progress: Progress | None = None) -> list[float]:
        """The model's time with noise: a run's from its stream (with occasional slow launches), a
        trial's from its own (at least 5 launches)."""
        if bound.purpose == "trial":
            return list(bound.model_ms * bound.rng.lognormal(0.0, 0.015, size=max(5, n)))
        samples = bound.model_ms * bound.rng.lognormal(0.0, 0.015, size=n)
        samples[bound.rng.random(n) < 0.03] *= 1.12  # occasional slow launches
        # the launches take their time: n times the modelled time (capped), at SOL_SIM_SPEED
        per_launch_s = min(MAX_TIMED_S, float(samples.sum()) / 1e3) / run_speed() / max(1, n)
        done = 0
        for i in range(n):
            if (i + 1) % chunk == 0 or i + 1 == n:
                if progress is not None:
                    progress(i + 1)
                time.sleep(self.delay / 20 + per_launch_s * (i + 1 - done))
                done = i + 1
        return list(samples)

    def energy(self, bound: Bound, median_ms: float, em: Emitter) -> dict[str, Any]:
        return {"note": "SIMULATED: no power or energy is measured"}

    def clock(self) -> str:
        return "SIMULATED"

    # --- verify, peers, collect ------------------------------------------------------------------
    def _kernel_outputs(self, inputs: Inputs) -> dict[str, tuple[Any, Any]]:
        """(output, float64 reference) per output: the "kernel" is the reference in fp32 rounded
        once to the dtype, what a correct kernel produces. Computed once for the device's inputs."""
        if not self._outputs:
            host = inputs.sets[0]
            outs = self.spec.reference_outputs(np, host)
            refs = self.spec.reference_outputs(np, {k: v.astype(np.float64) for k, v in host.items()})
            self._outputs = {name: (round_to(out.astype(np.float32), self.dtype).astype(np.float64), refs[name])
                             for name, out in outs.items()}
        return self._outputs

    def verify(self, bound: Bound, inputs: Inputs, fault: str) -> Correctness:
        """The check against float64 is the same code the GPU path runs. Faults: ``nan`` (NaN in the
        output), a soak's ``corrupt`` (a few elements far off, from ``fault_at_s``)."""
        if self.modelled:
            nan = 1 if fault == "nan" else 0
            return Correctness(correct=not nan, max_abs_err=0.0, max_rel_err=0.0, normwise_rel_err=0.0,
                               nan_count=nan, rtol=self.spec.rtol(self.dtype), checked_elements=0,
                               note="SIMULATED: NaN in the output (fault injection)" if nan else "SIMULATED")
        parts = {}
        for name, (out, ref) in self._kernel_outputs(inputs).items():
            if fault == "nan":
                out = out.copy()
                out.flat[:: max(1, out.size // 7)] = np.nan
            if self._faulty("corrupt"):
                out = out.copy()
                out.flat[:: max(1, out.size // 5)] += 8.0
            parts[name] = compare(np, out, ref, self.spec.rtol(self.dtype), note=inputs.note or "")
        return merge(parts)

    def peers(self, inputs: Inputs, bound: Bound, em: Emitter) -> list[PeerResult]:
        """The library peers compute fp32 on FFMA (cuBLAS has no 3xTF32 on Hopper): their ceiling is
        the datasheet peak, not the fp32 SOL ceiling (tf32 / 3) our 3xTF32 path is held to."""
        t_sol_peer = self.t_sol_ms(self.profile.peak_flops(self.dtype))
        peers = []
        for p in self.spec.peers(self.task):
            if self.dtype not in p.dtypes:
                continue
            if p.needs and importlib.util.find_spec(p.needs) is None:  # as on the GPU: listed, not timed
                peers.append(PeerResult(name=p.name, label=p.label + " [SIMULATED]", baseline=p.baseline,
                                        error=f"{p.needs} is not installed here"))
                continue
            pe = PEER_EFFICIENCY["baseline" if p.baseline else "other"]
            t_peer = t_sol_peer / pe + SIM_LAUNCH_MS * (2 if p.baseline else 1)
            ps = t_peer * bound.rng.lognormal(0.0, 0.015, size=max(5, self.task.iterations // 2))
            peers.append(PeerResult(name=p.name, label=p.label + " [SIMULATED]", timing=timing_stats(ps),
                                    baseline=p.baseline, correct=True if p.verify else None))
        return peers

    def fingerprint(self, build: Build | None) -> Fingerprint:
        fp = base_fingerprint(self.profile, "sim", build.source_sha256 if build else None)
        fp.gpu_name = f"SIMULATED {self.profile.display_name}"
        fp.compute_capability = self.profile.compute_capability
        fp.arch = self.limits.arch
        return fp

    def collect(self, loaded: Loaded, inputs: Inputs, bound: Bound,
                em: Emitter) -> tuple[Fingerprint, dict[str, Any], dict[str, Any]]:
        build = loaded.build
        launch = {"functions": list(build.functions), "info": build.info, "arch": self.limits.arch,
                  "launches": [{"function": ln.function, "grid": ln.grid, "block": ln.block,
                                "shared_mem_bytes": ln.shared_mem_bytes} for ln in build.launches]}
        return (self.fingerprint(build), launch,
                {"note": "SIMULATED: no clocks, throttling or other processes"})

    # --- a soak: a plausible series, its faults injectable ---------------------------------------
    def now(self) -> float:
        return self.t

    def window(self, bound: Bound, seconds: float, probed: Probe) -> dict[str, Any]:
        """``seconds`` of simulated soak (``SOL_SIM_SOAK_SPEED`` times faster than the wall clock):
        the card warms up over a couple of minutes, power settles below the limit, the launch time
        wanders by a fraction of a percent around the model's; ``throttle`` drops the clocks."""
        if self._speed is None:
            self._speed = soak_speed()
        time.sleep(seconds / self._speed)
        self.t += seconds
        heat = 1.0 - math.exp(-self.t / 120.0)
        throttled = self._faulty("throttle")
        clock = THROTTLED_MHZ if throttled else SM_CLOCK_MHZ
        ms = bound.model_ms * (SM_CLOCK_MHZ / clock) * float(bound.rng.lognormal(0.0, 0.004))
        limit = float(getattr(self.profile, "power_w", None) or 700.0)
        power = limit * (0.70 + 0.04 * heat) + 4.0 * math.sin(self.t / 7.0)
        return {"ms": ms, "launches": max(1, int(seconds * 1e3 / ms)), "sm_clock_mhz": clock,
                "sm_clock_max_mhz": SM_CLOCK_MHZ, "mem_clock_mhz": MEM_CLOCK_MHZ, "power_w": round(power, 1),
                "power_limit_w": limit,
                "temperature_c": SLOWDOWN_C + 1.0 if throttled else round(34.0 + 28.0 * heat, 1),
                "temperature_slowdown_c": SLOWDOWN_C, "throttle_mask": 0x60 if throttled else 0x0}

    def info(self) -> dict[str, Any]:
        return {"gpu_name": f"SIMULATED {self.profile.display_name}", "nvml_index": None, "pci_bus_id": None,
                "simulated": True}

    def counters(self, with_xid: bool = True) -> dict[str, Any]:
        """The counters a soak reads; ``ecc`` raises the uncorrectable ECC count."""
        n = 2 if self._faulty("ecc") else 0
        return {"ecc_enabled": True, "ecc_volatile_uncorrected": n, "ecc_aggregate_uncorrected": n,
                "remapped_rows_uncorrectable": 0, "xid_events": 0 if with_xid else None, "xid_last": None}

    def identify(self, fp: Fingerprint) -> Fingerprint:
        """No UUID or driver to add."""
        return fp

    # --- a tune: the regime, compiling ahead, the peers ------------------------------------------
    def regime(self, inputs: Inputs, regime: str, rest_s: float) -> list[str]:
        return [f"SIMULATED tune on {self.profile.name} ({regime}): times come from the roofline model"]

    def settle(self, bound: Bound, regime: str, rest_s: float, busy_s: float) -> None:
        """No card to heat or rest: the regime is the model's factor (``hot``)."""

    def prefetch(self, builds: Iterable[tuple[str, Build]]) -> None:
        """Nothing to compile ahead."""

    def prefetched(self, key: str) -> None:
        """Nothing compiled ahead."""

    def tune_peers(self, inputs: Inputs, skip: set[str], time_fn: Any) -> list[dict[str, Any]]:
        """Each peer's time from the model (its efficiency, its launches), in the regime."""
        t_peer = self.t_sol_ms(self.profile.peak_flops(self.dtype))
        out = []
        for p in self.spec.peers(self.task):
            if self.dtype not in p.dtypes or p.name in skip:
                continue
            if p.needs and importlib.util.find_spec(p.needs) is None:  # not timed on the GPU either
                continue
            eff = PEER_EFFICIENCY["baseline" if p.baseline else "other"]
            ms = (t_peer / eff + SIM_LAUNCH_MS * (2 if p.baseline else 1)) * self.hot
            out.append({"name": p.name, "label": p.label + " [SIMULATED]", "median_ms": ms, "baseline": p.baseline})
        return out

    def _faulty(self, kind: str) -> bool:
        return self.sim_fault == kind and self.t >= self.fault_at_s

    def close(self) -> None:
        """Nothing to release."""


def _no_launch(i: int) -> None:
    """The simulated device launches nothing."""
