"""The simulated device: for machines without a GPU, rehearsals and tests. Never evidence of GPU
behaviour: every result says ``simulated: true`` and is labelled SIMULATED wherever shown.

Timings are deterministic for a task (seeded), derived from the profile's roofline and the
kernel spec's efficiency model for the knobs, so changing a knob changes the result plausibly.
Verification runs for real on a slice of the output computed on the CPU, so the verification
code path (tolerances, NaN/Inf, poison) is the same one the CUDA backend uses. Faults can be
injected through the task's ``fault`` field."""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np

from engine.backends.base import RunContext, RunFailure, progress_every
from engine.backends.collect import base_fingerprint, finish, mismatch_text, now_iso
from engine.multi_device import sim_slow_factor
from engine.result import PeerResult, RunResult
from engine.sol import t_sol_ms
from engine.timing import timing_stats
from engine.verify import compare, merge
from kernels.spec import DeviceLimits

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


class SimBackend:
    name = "sim"
    simulated = True

    def run(self, ctx: RunContext) -> RunResult:
        task, spec, profile, em = ctx.task, ctx.spec, ctx.profile, ctx.emit
        started = now_iso()
        delay = _stage_delay()
        limits = DeviceLimits.from_profile(profile)
        shape = spec.normalize_shape(task.shape)
        dtype = task.dtype.value
        rng = np.random.default_rng(task_seed(task) % 2**63)

        em.start("compile", f"SIMULATED: rendering {spec.name} for {limits.arch}")
        build = spec.render(ctx.device_plan(limits), limits)
        time.sleep(delay)
        if task.fault.value == "compile_error":
            msg = (f"{spec.name}.cu(1): error: identifier \"SOL_INJECTED_FAULT\" is undefined\n"
                   "1 error detected in the compilation of \"gemm_residual.cu\".\n"
                   "NVRTC_ERROR_COMPILATION (6) [SIMULATED fault injection]")
            em.fail("compile", msg)
            raise RunFailure("compile_error", msg, "nvrtc_compile")
        em.done("compile", f"SIMULATED {build.info.get('path', '')}")

        em.start("load")
        time.sleep(delay / 2)
        em.done("load", f"{len(build.launches)} launch(es)")

        em.start("inputs")
        small = sim_slice(spec, task, shape)
        m = small[spec.dims[0]]
        rows = f"{m} rows computed on the CPU"
        if any(small[d] != shape[d] for d in spec.dims[1:]):  # a slice of the rows too, to fit in memory
            rows += (f" at {'x'.join(str(small[d]) for d in spec.dims)} (the full rows would take "
                     f"{host_bytes(spec, task, {**shape, spec.dims[0]: m}) / 1e9:.1f} GB of host memory)")
        host_inputs = {}
        for buf in spec.buffers(task.model_copy(update={"shape": small})):
            if buf.role == "input":
                host_inputs[buf.name] = round_to(rng.standard_normal(buf.shape, dtype=np.float32), dtype)
        time.sleep(delay / 2)
        em.done("inputs", f"SIMULATED N(0,1), {rows}")

        eff = max(1e-3, min(0.99, spec.sim_efficiency(task, limits)))
        t_sol = t_sol_ms(spec.flops(shape), spec.bytes_moved(shape, dtype),
                         profile.sol_peak_flops(dtype), profile.bandwidth_bytes_per_s)
        t_model = t_sol / eff + SIM_LAUNCH_MS * max(1, len(build.launches))
        slow = sim_slow_factor(task.device)
        if slow != 1.0:  # a sick neighbour for every-GPU rehearsals (engine.multi_device)
            t_model *= slow
            em.info(f"SIMULATED GPU {task.device} runs {slow:g}x slow (SOL_COCKPIT_SIM_SLOW_DEVICES)", "warning")
        # the library peers compute fp32 on FFMA (cuBLAS has no 3xTF32 on Hopper): their ceiling is
        # the datasheet peak, not the fp32 SOL ceiling (tf32 / 3) our 3xTF32 path is held to
        t_sol_peer = t_sol_ms(spec.flops(shape), spec.bytes_moved(shape, dtype),
                              profile.peak_flops(dtype), profile.bandwidth_bytes_per_s)

        em.start("warmup")
        if task.fault.value in ("launch_failure", "illegal_address", "hang"):
            self._fault(task.fault.value, em)
        for i in range(task.warmup):
            if (i + 1) % progress_every(task.warmup) == 0:
                em.progress("warmup", i + 1, task.warmup)
        time.sleep(delay / 2)
        em.done("warmup", f"{task.warmup} launches")

        em.start("timed")
        samples = t_model * rng.lognormal(0.0, 0.015, size=task.iterations)
        samples[rng.random(task.iterations) < 0.03] *= 1.12  # occasional slow launches
        step = progress_every(task.iterations)
        for i in range(task.iterations):
            if (i + 1) % step == 0 or i + 1 == task.iterations:
                em.progress("timed", i + 1, task.iterations)
                time.sleep(delay / 20)
        timing = timing_stats(samples)
        em.done("timed", f"median {timing.median_ms:.4f} ms (SIMULATED)")

        correctness = None
        if task.verify:
            em.start("verify")
            # The "kernel" is the reference in fp32, rounded once to the dtype: what a correct
            # kernel produces; the check against float64 is the same code the GPU path runs.
            outs = spec.reference_outputs(np, host_inputs)
            refs = spec.reference_outputs(np, {k: v.astype(np.float64) for k, v in host_inputs.items()})
            parts = {}
            for name, out in outs.items():
                out = round_to(out.astype(np.float32), dtype).astype(np.float64)
                if task.fault.value == "nan":
                    out.flat[:: max(1, out.size // 7)] = np.nan
                parts[name] = compare(np, out, refs[name], spec.rtol(dtype),
                                      note=f"SIMULATED: {rows}")
            correctness = merge(parts)
            if correctness.correct:
                em.done("verify", "ok")
            else:
                em.fail("verify", mismatch_text(correctness))
        else:
            em.skip("verify", "verification off")

        peers: list[PeerResult] = []
        if task.peers:
            em.start("peers")
            for p in spec.peers(task):
                if dtype not in p.dtypes:
                    continue
                pe = PEER_EFFICIENCY["baseline" if p.baseline else "other"]
                t_peer = t_sol_peer / pe + SIM_LAUNCH_MS * (2 if p.baseline else 1)
                ps = t_peer * rng.lognormal(0.0, 0.015, size=max(5, task.iterations // 2))
                peers.append(PeerResult(name=p.name, label=p.label + " [SIMULATED]",
                                        timing=timing_stats(ps), baseline=p.baseline,
                                        correct=True if p.verify else None))
            em.done("peers", f"{len(peers)} peer(s)")
        else:
            em.skip("peers", "peers off")

        em.start("collect")
        launch = {"functions": list(build.functions), "info": build.info, "arch": limits.arch,
                  "launches": [{"function": ln.function, "grid": ln.grid, "block": ln.block,
                                "shared_mem_bytes": ln.shared_mem_bytes} for ln in build.launches]}
        fp = base_fingerprint(profile, "sim", build.source_sha256)
        fp.gpu_name = f"SIMULATED {profile.display_name}"
        fp.compute_capability = profile.compute_capability
        fp.arch = limits.arch
        res = finish(task=task, profile=profile, spec=spec, simulated=True, timing=timing,
                     correctness=correctness, peers=peers, launch=launch,
                     validity={"note": "SIMULATED: no clocks, throttling or other processes"},
                     energy=({"note": "SIMULATED: no power or energy is measured"}
                             if task.energy_s > 0 else None),
                     fingerprint=fp, log=em.log, started_at=started)
        em.done("collect")
        return res

    @staticmethod
    def _fault(kind: str, em) -> None:
        if kind == "hang":
            em.info("SIMULATED fault: the kernel never returns (hang)", "warning")
            while True:
                time.sleep(1.0)
        if kind == "launch_failure":
            msg = "cudaErrorLaunchFailure: unspecified launch failure [SIMULATED fault injection]"
        else:
            msg = "cudaErrorIllegalAddress: an illegal memory access was encountered [SIMULATED fault injection]"
        em.fail("warmup", msg)
        raise RunFailure("launch_error", msg, kind)
