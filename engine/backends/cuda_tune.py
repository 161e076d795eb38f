"""A tune on the GPU: every candidate compiled (NVRTC, cached), loaded, timed with the engine's
timer on one set of inputs and verified against one float64 reference, beside the kernel's peers
timed the same way. Runs inside the tune's engine process (``engine.tune_worker``).

Regimes: ``burst`` rests the card before each candidate and peer (``TaskSpec.rest_s``, or
``engine.tune_types.BURST_REST_S``); ``sustained`` first runs back-to-back launches until the board sits at
its power cap (``SUSTAIN_HEAT_S``), then runs each candidate and peer back to back for
``SUSTAIN_HOLD_S`` right before its timed launches, so all are timed in the state a deployed kernel
lives in, with the same launch count."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import cupy as cp

from engine.backends import pdl
from engine.backends.base import RunFailure
from engine.backends.compile_pool import CompilePool
from engine.backends.cuda_blas import Blas
from engine.backends.cuda_convert import BITS, native_view, to_f64
from engine.backends.cuda_stages import (
    CUDA_ERRORS,
    bind_launches,
    compile_cubin,
    compile_inputs,
    device_limits,
    load_build,
    make_inputs,
    rotating_outs,
)
from engine.backends.cuda_support import FAULT_MODES, NAN_BITS, POISON_BITS
from engine.backends.cuda_timer import queued_timer
from engine.timing import timing_stats
from engine.verify import compare, merge
from kernels import get_spec
from kernels.spec import plan_or_raise, render_task


class CudaTrials:
    """Times candidates on one GPU. ``broken`` turns True after a CUDA error, which can leave the
    context unusable: the tune then goes on in a fresh engine process."""

    broken = False

    def __init__(self, task: Any, profile: Any, regime: str) -> None:
        from engine.tune_types import BURST_REST_S

        cp.cuda.Device(task.device).use()
        self.task, self.profile, self.regime = task, profile, regime
        self.spec = get_spec(task.kernel)
        self.dtype = task.dtype.value
        self.limits, self.props = device_limits(task.device, profile.name)
        self.sm_count = self.limits.sm_count
        self.rest_s = 0.0 if regime == "sustained" else (task.rest_s or BURST_REST_S)
        self.timer = queued_timer()
        self.iters = task.iterations
        self.t_sol = 0.0
        self._nvml: int | None = None
        self._busy_s = 0.0
        self._pool = CompilePool()

    # --- set-up --------------------------------------------------------------------------------
    def setup(self) -> list[str]:
        from engine.sol import t_sol_ms
        from engine.tune_types import SUSTAIN_HEAT_S

        l2 = int(self.props.get("l2CacheSize", 0)) or int(self.profile.l2_mb * 2**20)
        self.sets, self.outs, in_bytes = make_inputs(self.spec, self.task, self.dtype, l2)
        self.out_sets = rotating_outs(self.outs, len(self.sets), self.spec.outputs)
        self.refs = self.spec.reference_outputs(cp, {k: to_f64(v, self.dtype) for k, v in self.sets[0].items()})
        shape = self.spec.normalize_shape(self.task.shape)
        self.t_sol = t_sol_ms(self.spec.flops(shape), self.spec.bytes_moved(shape, self.dtype),
                              self.profile.sol_peak_flops(self.dtype), self.profile.bandwidth_bytes_per_s)
        try:
            from engine import nvml

            self._nvml = nvml.index_for_pci_bus_id(cp.cuda.runtime.deviceGetPCIBusId(self.task.device))
        except Exception:
            self._nvml = None
        notes = [f"{len(self.sets)} rotating input set(s) of {in_bytes / 2**20:.1f} MiB, N(0,1); "
                 f"{self.task.warmup} warm-ups and {self.iters} timed launches per candidate"]
        if self.regime == "sustained":
            heater = self._peer_launches()
            if heater is not None:
                self._back_to_back(heater, SUSTAIN_HEAT_S)
            notes.append(f"sustained: {SUSTAIN_HEAT_S:g} s of back-to-back launches first "
                         f"({self._clock_text() or 'no NVML clock reading'})")
        else:
            notes.append(f"burst: {self.rest_s:g} s of rest before each candidate and peer")
        return notes

    # --- the regime ----------------------------------------------------------------------------
    def _back_to_back(self, launch: Any, seconds: float) -> None:
        """Launch back to back for ``seconds`` (synchronising every ~20 ms so the queue stays short)."""
        end = time.monotonic() + seconds
        i = 0
        while time.monotonic() < end:
            t = time.monotonic()
            while time.monotonic() - t < 0.02:
                launch(i)
                i += 1
            cp.cuda.Device().synchronize()

    def _settle(self, launch: Any) -> None:
        """Sustained: back-to-back launches right before the timing. Burst: rest, as long as
        ``REST_PER_BUSY`` times the last timing's busy time (at least ``REST_MIN_S``, at most the
        rest asked for): 100 launches of a 15 us kernel heat nothing, a seed-sized GEMM's 16 ms
        of work warms the card a little, and the card is rested in the same measure for every
        candidate and peer."""
        from engine.tune_types import REST_MIN_S, REST_PER_BUSY, SUSTAIN_HOLD_S

        if self.regime == "sustained":
            self._back_to_back(launch, SUSTAIN_HOLD_S)
        elif self.rest_s > 0:
            cp.cuda.Device().synchronize()
            time.sleep(min(self.rest_s, max(REST_MIN_S, REST_PER_BUSY * self._busy_s)))

    def _clock_text(self) -> str:
        """'SM 1290 MHz, sw power cap': the clock and throttle reasons right now (advisory)."""
        if self._nvml is None:
            return ""
        try:
            from engine import nvml

            s = nvml.sample(self._nvml)
            reasons = nvml.decode_throttle((s.throttle_mask or 0) & ~0x1)
            return f"SM {s.sm_clock_mhz} MHz" + (f", {', '.join(reasons)}" if reasons else "")
        except Exception:
            return ""

    def _time(self, name: str, launch: Any, iters: int | None = None) -> Any:
        iters = iters or self.iters
        self._settle(launch)
        probed = self.timer.warm(launch, max(3, self.task.warmup), 3)
        timing = timing_stats(self.timer.run(name, launch, iters, probed, iters))
        self._busy_s = timing.median_ms * 1e-3 * (iters + max(3, self.task.warmup))
        return timing

    # --- compiling ahead -------------------------------------------------------------------------
    def prefetch(self, cands: list[Any]) -> None:
        """Compile these candidates' builds in a pool of processes (``CompilePool``) while the GPU
        times the ones before them: the cubins land in the kernel cache, where ``trial`` finds them."""
        for cand in cands:
            try:
                build = render_task(self.spec, cand.task(self.task), self.limits)
            except ValueError:
                continue
            self._pool.submit(cand.key, _precompile, *compile_inputs(build, self.limits))

    def close(self) -> None:
        self._pool.close()

    # --- peers ---------------------------------------------------------------------------------
    def _peer_launches(self) -> Any:
        """cuBLAS with beta = 1 (the peer every comparison names) as a launch function, for heating."""
        peer = next((p for p in self.spec.peers(self.task) if "beta1" in p.name and self.dtype in p.dtypes), None)
        if peer is None:
            return None
        blas = Blas(self.dtype)
        if peer.prepare is not None:
            for st, o in zip(self.sets, self.out_sets, strict=True):
                peer.prepare(cp, blas, st, o)
        n = len(self.sets)
        return lambda i: peer.run(cp, blas, self.sets[i % n], self.out_sets[i % n])

    def peers(self, skip: set[str]) -> list[dict[str, Any]]:
        """Each peer timed as the candidates are, then verified on input set 0 where it computes the
        whole function; a peer that fails is reported with its error, never fatal."""
        blas = Blas(self.dtype)
        natives = [{k: native_view(v, self.dtype) for k, v in s.items()} for s in self.sets]
        nout_sets = [{k: native_view(v, self.dtype) for k, v in o.items()} for o in self.out_sets]
        nouts = nout_sets[0]
        out = []
        for p in self.spec.peers(self.task):
            if self.dtype not in p.dtypes or p.name in skip:
                continue
            row: dict[str, Any] = {"name": p.name, "label": p.label, "baseline": p.baseline, "median_ms": None}
            try:
                use_native = not any(v is None for v in (*natives[0].values(), *nouts.values()))
                if not use_native and "cupy" in p.name:
                    raise RuntimeError("CuPy has no bfloat16 dtype here (install ml_dtypes)")
                rot, o_rot = (natives, nout_sets) if use_native else (self.sets, self.out_sets)
                o = o_rot[0]
                if p.prepare is not None:
                    for st, so in zip(rot, o_rot, strict=True):
                        p.prepare(cp, blas, st, so)
                timing = self._time(p.name, lambda i, p=p, rot=rot, o_rot=o_rot: p.run(
                    cp, blas, rot[i % len(rot)], o_rot[i % len(o_rot)]))
                row.update(median_ms=timing.median_ms, p10_ms=timing.p10_ms, p90_ms=timing.p90_ms,
                           clock=self._clock_text())
                if p.verify:
                    self._poison()
                    if p.prepare is not None:
                        p.prepare(cp, blas, rot[0], o)
                    p.run(cp, blas, rot[0], o)
                    cp.cuda.Device().synchronize()
                    row["correct"] = self._verify(self.outs).correct
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
            out.append(row)
        return out

    # --- one candidate -------------------------------------------------------------------------
    def _poison(self) -> None:
        for name in self.spec.outputs:
            self.outs[name].view(BITS[self.dtype]).fill(POISON_BITS[self.dtype])

    def _verify(self, outs: dict[str, Any]) -> Any:
        bits = BITS[self.dtype]
        parts = {}
        for name in self.spec.outputs:
            out = outs[name]
            unwritten = int((out.view(bits) == POISON_BITS[self.dtype]).sum())
            parts[name] = compare(cp, to_f64(out, self.dtype), self.refs[name], self.spec.rtol(self.dtype), unwritten)
        return merge(parts)

    def trial(self, cand: Any, start: Any, fault: str, iters: int | None = None) -> Any:
        """Compile, load, time and verify one candidate: its Trial (a failure is a result)."""
        task = cand.task(self.task)
        try:
            kp = plan_or_raise(self.spec, task, self.limits)
            build = self.spec.render(kp, self.limits)
        except ValueError as exc:
            return replace(start, status="skipped", reason=str(exc))
        if fault == "none":
            self._pool.wait(cand.key)  # compiled ahead into the cache (or compiled below)
        try:
            cubin, _, _ = compile_cubin(*compile_inputs(build, self.limits, fault))
        except RunFailure as exc:
            return replace(start, status="compile_error", reason=exc.message[:400])
        try:
            funcs, grids, _ = load_build(build, cubin, self.limits)
            scratch = {b.name: cp.empty(b.shape, dtype=_storage(b.dtype)) for b in build.scratch}
            outs = [{**o, **scratch} for o in self.out_sets]
            run_once = bind_launches(build, funcs, grids, self.sets, outs, self.dtype,
                                     pdl.enabled(self.limits.compute_capability))
            if fault in FAULT_MODES:
                funcs["sol_fault_kernel"]((1,), (1,), (cp.zeros(1, dtype=cp.int32), cp.int32(FAULT_MODES[fault])))
                cp.cuda.Device().synchronize()
            timing = self._time(cand.key, run_once, iters or self.iters)
            clock = self._clock_text()
            self._poison()
            run_once(0)
            if fault == "nan":
                self.outs[self.spec.output].view(BITS[self.dtype])[..., ::97] = NAN_BITS[self.dtype]
            cp.cuda.Device().synchronize()
            c = self._verify(self.outs)
        except RunFailure as exc:
            return replace(start, status="launch_error", reason=exc.message[:400])
        except CUDA_ERRORS as exc:
            self.broken = True
            return replace(start, status="launch_error", reason=f"{type(exc).__name__}: {exc}"[:400])
        except cp.cuda.memory.OutOfMemoryError as exc:
            return replace(start, status="launch_error", reason=f"out of memory: {exc}"[:400])
        reason = clock
        if not c.correct:
            reason = (f"max rel err {c.max_rel_err:.3g} (rtol {c.rtol:g}), {c.nan_count} NaN, "
                      f"{c.unwritten_count} unwritten")
        return replace(start, status="ok" if c.correct else "incorrect", median_ms=timing.median_ms,
                       p10_ms=timing.p10_ms, p90_ms=timing.p90_ms, sol_pct=100.0 * self.t_sol / timing.median_ms,
                       resolved=dict(kp.schedule), reason=reason)


def _precompile(source: str, arch: str, options: list[str]) -> bool:
    """A pool worker: compile into the kernel cache (an error is reported when the trial compiles)."""
    try:
        compile_cubin(source, arch, options)
    except RunFailure:
        return False
    return True


def _storage(dtype: str) -> Any:
    from engine.backends.cuda_convert import STORAGE

    return STORAGE[dtype]
