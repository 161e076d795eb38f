"""The CUDA backend: a run through its stages on the GPU, in the engine process.

NVRTC compiles for the device's own architecture (sm_90a on Hopper) straight to a cubin, so there
is no PTX for the driver to fall back on; the loaded function's binary version is checked against
the device. Times come from CUDA events around each launch after the warm-up. The stages, the
timer, the observers and the peers live in the ``cuda_*`` modules beside this one."""

from __future__ import annotations

from typing import Any

import cupy as cp
import numpy as np
from cupy.cuda import runtime
from cupy_backends.cuda.libs import nvrtc

from engine.backends import pdl
from engine.backends.base import RunContext, RunFailure, progress_every
from engine.backends.collect import base_fingerprint, finish, mismatch_text, now_iso
from engine.backends.cuda_convert import BITS, STORAGE
from engine.backends.cuda_observers import NvmlSampler, measure_energy, sampled_validity
from engine.backends.cuda_peers import time_peers
from engine.backends.cuda_stages import (
    CUDA_ERRORS,
    bind_launches,
    compile_cubin,
    compile_inputs,
    device_limits,
    load_build,
    make_inputs,
    rotating_outs,
    verify_outputs,
)
from engine.backends.cuda_support import FAULT_MODES, NAN_BITS, POISON_BITS, needs_hold
from engine.backends.cuda_timer import QueuedTimer, fair_rest_s, rest
from engine.result import PeerResult, RunResult
from engine.timing import timing_stats
from kernels import nvrtc_check
from kernels.spec import DeviceLimits

__all__ = ["CudaBackend", "compile_cubin", "compile_inputs", "device_limits"]


class CudaBackend:
    name = "cuda"
    simulated = False

    def run(self, ctx: RunContext) -> RunResult:
        task, _spec, profile, em = ctx.task, ctx.spec, ctx.profile, ctx.emit
        started = now_iso()
        dtype = task.dtype.value
        try:
            cp.cuda.Device(task.device).use()
            limits, props = device_limits(task.device, profile.name)
        except CUDA_ERRORS as exc:
            raise RunFailure("launch_error", f"cannot open GPU {task.device}: {exc}", "device") from None
        try:
            return self._run(ctx, limits, props, dtype, started)
        except CUDA_ERRORS as exc:
            stage = em.current or "load"
            msg = f"{type(exc).__name__}: {exc}"
            em.fail(stage, msg)
            raise RunFailure("launch_error", msg, "cuda_error") from None
        except cp.cuda.memory.OutOfMemoryError as exc:
            em.fail(em.current or "inputs", str(exc))
            raise RunFailure("launch_error", f"cupy.cuda.memory.OutOfMemoryError: {exc}", "out_of_memory") from None

    def _run(self, ctx: RunContext, limits: DeviceLimits, props: dict[str, Any], dtype: str,
             started: str) -> RunResult:
        task, spec, profile, em = ctx.task, ctx.spec, ctx.profile, ctx.emit
        kp = ctx.device_plan(limits)

        # --- compile -----------------------------------------------------------------------
        em.start("compile", f"NVRTC for {limits.arch}")
        build = spec.render(kp, limits)
        try:
            cubin, log, cached = compile_cubin(*compile_inputs(build, limits, task.fault.value))
        except RunFailure as exc:
            em.fail("compile", exc.message)
            raise
        resources = {name: dict(vars(r)) for name, r in nvrtc_check.parse_ptxas_log(log).items()}
        for fn, r in resources.items():
            if r["spill_store_bytes"] or r["spill_load_bytes"]:
                em.info(f"{fn}: {r['spill_store_bytes']} B spill stores, {r['spill_load_bytes']} B spill loads",
                        "warning")
        em.done("compile", ("cached cubin" if cached else "compiled") + f" for {limits.arch}")

        # --- load --------------------------------------------------------------------------
        em.start("load")
        try:
            funcs, grids, loaded = load_build(build, cubin, limits)
        except RunFailure as exc:
            em.fail("load", exc.message)
            raise
        for ln, g in zip(build.launches, grids, strict=True):
            if g != ln.grid:
                em.info(f"{ln.function}: grid {ln.grid[0]} -> {g[0]} CTAs, the {g[0] // ln.cluster} clusters of "
                        f"{ln.cluster} this device holds at once")
        for name, r in loaded.items():
            resources.setdefault(name, {}).update(r)
        dependent = pdl.enabled(limits.compute_capability) and any(ln.pdl for ln in build.launches)
        em.done("load", ", ".join(f"{n}: {resources[n].get('registers')} regs" for n in build.functions)
                + ("; programmatic dependent launch" if dependent else ""))

        # --- inputs ------------------------------------------------------------------------
        em.start("inputs")
        l2 = int(props.get("l2CacheSize", 0)) or int(profile.l2_mb * 2**20)
        sets, outs, in_bytes = make_inputs(spec, task, dtype, l2)
        n_sets = len(sets)
        outs.update({b.name: cp.empty(b.shape, dtype=STORAGE[b.dtype]) for b in build.scratch})
        flag = cp.zeros(1, dtype=cp.int32)
        cp.cuda.Device().synchronize()
        em.done("inputs", f"N(0,1), {n_sets} rotating set(s) of {in_bytes / 2**20:.1f} MiB (L2 {l2 / 2**20:.0f} MiB)")

        out_sets = rotating_outs(outs, n_sets, spec.outputs)
        run_once = bind_launches(build, funcs, grids, sets, out_sets, dtype, dependent)

        # --- warm-up -----------------------------------------------------------------------
        sampler = NvmlSampler(runtime.deviceGetPCIBusId(task.device))
        sampler.start()
        em.start("warmup")
        if task.fault.value in FAULT_MODES:
            em.info(f"injecting fault {task.fault.value} (task fault field)", "warning")
            funcs["sol_fault_kernel"]((1,), (1,), (flag, np.int32(FAULT_MODES[task.fault.value])))
            cp.cuda.Device().synchronize()
        rest(fair_rest_s(task), em, "ours")
        timer = QueuedTimer(funcs["sol_hold_kernel"])
        # the last 5 warm-ups also tell whether the host keeps ahead of the GPU
        probed = timer.warm(run_once, task.warmup, 5, progress_every(max(task.warmup, 1)),
                            lambda done: em.progress("warmup", done, task.warmup))
        cp.cuda.Device().synchronize()
        sampler.snap()
        em.done("warmup", f"{task.warmup} launches")

        # --- timed runs --------------------------------------------------------------------
        em.start("timed")
        if needs_hold(*probed):
            em.info("the GPU finishes a launch faster than the host queues the next: timed launches "
                    "are queued behind a hold kernel, so they run back to back")
        times = timer.run("ours", run_once, task.iterations, probed, progress_every(task.iterations),
                          lambda done: em.progress("timed", done, task.iterations))
        sampler.snap()  # the clock and throttle reasons at the end of the timed runs
        timing = timing_stats(times)
        energy = measure_energy(task, run_once, timing.median_ms, em) if task.energy_s > 0 else None
        sampler.stop.set()
        em.done("timed", f"median {timing.median_ms:.4f} ms over {timing.samples}")

        # --- verify ------------------------------------------------------------------------
        correctness = None
        bits = BITS[dtype]
        if task.verify:
            em.start("verify")
            for name in spec.outputs:
                outs[name].view(bits).fill(POISON_BITS[dtype])
            run_once(0)
            if task.fault.value == "nan":
                outs[spec.output].view(bits)[..., ::97] = NAN_BITS[dtype]
            cp.cuda.Device().synchronize()
            correctness = verify_outputs(spec, sets[0], outs, dtype)
            if correctness.correct:
                em.done("verify", "ok")
            else:
                em.fail("verify", mismatch_text(correctness))
        else:
            em.skip("verify", "verification off")

        # --- peers -------------------------------------------------------------------------
        peers: list[PeerResult] = []
        if task.peers:
            em.start("peers")
            peers = time_peers(task, spec, sets, out_sets, dtype, em, timer)
            em.done("peers", f"{len(peers)} peer(s)")
        else:
            em.skip("peers", "peers off")

        # --- collect -----------------------------------------------------------------------
        em.start("collect")
        fp = base_fingerprint(profile, "cuda", build.source_sha256)
        fp.gpu_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        fp.compute_capability = f"{limits.compute_capability[0]}.{limits.compute_capability[1]}"
        fp.arch = limits.arch
        dv, rv = runtime.driverGetVersion(), runtime.runtimeGetVersion()
        fp.cuda_driver_version = f"{dv // 1000}.{(dv % 1000) // 10}"
        fp.cuda_runtime_version = f"{rv // 1000}.{(rv % 1000) // 10}"
        nv = nvrtc.getVersion()
        fp.nvrtc_version = f"{nv[0]}.{nv[1]}"
        fp.cupy_version = cp.__version__
        validity = sampled_validity(sampler, fp)
        validity["queue_hold"] = dict(timer.stats)
        validity["rest_applied_s"] = fair_rest_s(task)
        validity["launches_each"] = {"warmup": task.warmup, "timed": task.iterations}
        if timer.stats["expired_chunks"]:
            em.info(f"{timer.stats['expired_chunks']} of {timer.stats['held_chunks']} held chunks ran out of "
                    "hold before the host had queued them: those launch times include launch gaps", "warning")
        launch = {"functions": list(build.functions), "info": build.info, "arch": limits.arch,
                  "resources": resources, "input_sets": n_sets,
                  "launches": [{"function": ln.function, "grid": g, "block": ln.block,
                                "shared_mem_bytes": ln.shared_mem_bytes, "cluster": ln.cluster,
                                "pdl": dependent and ln.pdl}
                               for ln, g in zip(build.launches, grids, strict=True)]}
        res = finish(task=task, profile=profile, spec=spec, simulated=False, timing=timing,
                     correctness=correctness, peers=peers, launch=launch, validity=validity,
                     fingerprint=fp, log=em.log, started_at=started, energy=energy)
        em.done("collect")
        return res
