"""The CUDA backend: the only engine module that imports cupy. Runs inside the engine process.

NVRTC compiles for the device's own architecture (sm_90a on Hopper) straight to a cubin, so there
is no PTX for the driver to fall back on; the loaded function's binary version is checked against
the device. Times come from CUDA events around each launch after the warm-up."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import cupy as cp
import numpy as np
from cupy.cuda import cublas, driver, runtime
from cupy_backends.cuda.libs import nvrtc

from engine.backends import clusters
from engine.backends.base import RunContext, RunFailure, progress_every
from engine.backends.collect import base_fingerprint, finish, mismatch_text, now_iso
from engine.backends.cuda_support import (
    COMPILE_ERROR_LINE,
    FAULT_MODES,
    FAULT_SOURCE,
    HOLD_SOURCE,
    NAN_BITS,
    POISON_BITS,
    cache_key,
    cache_load,
    cache_store,
    held_chunk,
    hold_ns,
    input_sets,
    needs_hold,
)
from engine.result import PeerResult, RunResult
from engine.timing import timing_stats
from engine.verify import compare, merge
from kernels import nvrtc_check
from kernels.spec import DeviceLimits, TensorMapArg

_CUDA_ERRORS: tuple[type[BaseException], ...] = (runtime.CUDARuntimeError, driver.CUDADriverError)

try:  # a real bfloat16 dtype lets CuPy's own matmul run as a peer
    import ml_dtypes  # type: ignore[import-not-found,unused-ignore]  # optional; absent here, typed where present

    _BF16: Any = np.dtype(ml_dtypes.bfloat16)
    cp.zeros(1, dtype=_BF16)
except Exception:
    _BF16 = None

_STORAGE = {"bf16": np.uint16, "fp16": np.float16, "fp32": np.float32, "tf32": np.float32}
_BITS = {"bf16": np.uint16, "fp16": np.uint16, "fp32": np.uint32, "tf32": np.uint32}

_f32_to_bf16 = cp.ElementwiseKernel(
    "float32 x", "uint16 y",
    "unsigned int u = __float_as_uint(x); u += 0x7FFFu + ((u >> 16) & 1u); y = (unsigned short)(u >> 16);",
    "sol_f32_to_bf16")
_bf16_to_f64 = cp.ElementwiseKernel(
    "uint16 b", "float64 y", "y = (double)__uint_as_float(((unsigned int)b) << 16);", "sol_bf16_to_f64")


def device_limits(index: int, profile_name: str) -> tuple[DeviceLimits, dict[str, Any]]:
    p = runtime.getDeviceProperties(index)
    lim = DeviceLimits(
        compute_capability=(int(p["major"]), int(p["minor"])), sm_count=int(p["multiProcessorCount"]),
        shared_memory_per_block_bytes=int(p["sharedMemPerBlockOptin"]),
        shared_memory_per_sm_bytes=int(p["sharedMemPerMultiprocessor"]),
        registers_per_sm=int(p["regsPerMultiprocessor"]), max_threads_per_block=int(p["maxThreadsPerBlock"]),
        profile=profile_name)
    return lim, p


def to_storage(x32: Any, dtype: str) -> Any:
    if dtype == "bf16":
        return _f32_to_bf16(x32)
    return x32.astype(_STORAGE[dtype])


def to_f64(x: Any, dtype: str) -> Any:
    return _bf16_to_f64(x) if dtype == "bf16" else x.astype(cp.float64)


def native_view(x: Any, dtype: str) -> Any:
    """The array as CuPy's own dtype (for peers); None when CuPy has no bfloat16 here."""
    if dtype != "bf16":
        return x
    return None if _BF16 is None else x.view(_BF16)


class Blas:
    """cuBLAS through CuPy's bindings: c[M,N] = alpha * a[M,K] @ w[N,K]^T + beta * c, fp32 compute."""

    _TYPES = {"bf16": runtime.CUDA_R_16BF, "fp16": runtime.CUDA_R_16F, "fp32": runtime.CUDA_R_32F,
              "tf32": runtime.CUDA_R_32F}

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def gemm_nt(self, a: Any, w: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> None:
        m, k = a.shape
        n = w.shape[0]
        handle = cp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        al, be = np.array(alpha, np.float32), np.array(beta, np.float32)
        t = self._TYPES[self.dtype]
        # Row-major C = A W^T is column-major C^T = W A^T: op(W)=T (ld K), op(A)=N (ld K), ldc N.
        cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k, al.ctypes.data,
                      w.data.ptr, t, k, a.data.ptr, t, k, be.ctypes.data, c.data.ptr, t, n,
                      cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if self.dtype == "tf32" else cublas.CUBLAS_COMPUTE_32F,
                      cublas.CUBLAS_GEMM_DEFAULT)


def compile_inputs(build: Any, limits: DeviceLimits, fault: str = "none") -> tuple[str, str, list[str]]:
    """(source, arch, options) a build compiles with (also used to pre-fill the cache). The backend
    owns the target: a spec's own arch option would duplicate (or contradict) it."""
    source = build.source + FAULT_SOURCE + HOLD_SOURCE
    if fault == "compile_error":
        source += COMPILE_ERROR_LINE
    extra = [o for o in build.options if not o.startswith(("--gpu-architecture", "-arch"))]
    return source, limits.arch, ["-Xptxas=-v", *extra]


def compile_cubin(source: str, arch: str, options: list[str]) -> tuple[bytes, str, bool]:
    """NVRTC straight to a cubin for the exact arch; cached by source + arch + options + NVRTC version."""
    key = cache_key(source, [arch, *options], nvrtc.getVersion())
    hit = cache_load(key)
    if hit is not None:
        return hit[0], hit[1], True
    report = nvrtc_check.compile_cubin(source, arch, tuple(options))
    if not report.ok:
        raise RunFailure("compile_error", f"NVRTC_ERROR_COMPILATION\n{report.log}".strip(), "nvrtc_compile")
    cache_store(key, report.cubin, report.log)
    return report.cubin, report.log, False


FAIR_REST_S = 1.0
"""The rest before ours and before each peer when a run times peers and the task asks for none: every
implementation then starts from the same rested card (a peer timed right after ours reads slow:
ADR-0004)."""


def fair_rest_s(task: Any) -> float:
    """The rest every timed implementation of this run gets: the task's, or ``FAIR_REST_S`` where it
    times peers and asks for none."""
    return task.rest_s if task.rest_s > 0 or not task.peers else FAIR_REST_S


def rest(seconds: float, em: Any, what: str) -> None:
    """Let the GPU idle ``seconds`` before ``what`` is warmed up and timed (``TaskSpec.rest_s``), so
    ours and every peer start from the same rested card."""
    if seconds > 0:
        em.info(f"resting {seconds:g} s before timing {what}")
        time.sleep(seconds)


def _event_pairs(n: int) -> list[tuple[Any, Any]]:
    return [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(n)]


def _queue(launch: Any, first: int, evs: list[tuple[Any, Any]]) -> None:
    """Launches ``first``, ``first + 1``, ... each between its event pair: the per-launch host work
    that ``QueuedTimer.probe`` measures and ``QueuedTimer.run`` times, the same in both."""
    for i, (e0, e1) in enumerate(evs):
        e0.record()
        launch(first + i)
        e1.record()


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No garbage collection while launches are queued (as timeit does): a collection pause there
    would be a launch gap in a held chunk."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class QueuedTimer:
    """Times launches queued back to back between CUDA events (one pair per launch). Where the GPU
    finishes a launch faster than the host queues the next (small kernels, peers called through
    Python), each event pair would time the host's launch rate; then a chunk of launches is queued
    behind ``sol_hold_kernel`` (``cuda_support.hold_ns``), so they run back to back on the GPU.
    Counts what it did for ``validity["queue_hold"]``."""

    def __init__(self, hold_fn: Any) -> None:
        self.hold_fn = hold_fn
        self.stats: dict[str, Any] = {"held": [], "not_held": [], "held_chunks": 0, "expired_chunks": 0,
                                      "expired": []}

    @staticmethod
    def probe(launch: Any, first: int, n: int) -> tuple[float | None, float]:
        """Launches ``first`` .. ``first + n - 1`` queued between two events, each between its own
        event pair as ``run`` times them (so the host time counts the same per-launch work): (GPU s
        per launch, host s per launch); (None, 20 us) without launches. A starved GPU reads the
        host's rate."""
        if n <= 0:
            return None, 20e-6
        cp.cuda.Device().synchronize()
        evs = _event_pairs(n)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        with _no_gc():
            e0.record()
            t0 = time.perf_counter()
            _queue(launch, first, evs)
            host = (time.perf_counter() - t0) / n
            e1.record()
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1) / 1e3 / n, host

    def warm(self, launch: Any, warmups: int, n_probe: int, every: int = 0,
             on_progress: Any = None) -> tuple[float | None, float]:
        """``warmups`` launches, the last ``n_probe`` of them queued as ``probe``; its result. With
        ``every``, the device is synchronised after every ``every``-th of the launches before the
        probe and ``on_progress(done)`` called, so progress reports follow the GPU, not the queue."""
        n_probe = min(n_probe, warmups)
        for i in range(warmups - n_probe):
            launch(i)
            if every and (i + 1) % every == 0:
                cp.cuda.Device().synchronize()
                if on_progress is not None:
                    on_progress(i + 1)
        return self.probe(launch, warmups - n_probe, n_probe)

    def run(self, name: str, launch: Any, iters: int, probed: tuple[float | None, float], chunk: int,
            on_chunk: Any = None) -> list[float]:
        """``iters`` timed launches (``launch(i)``) of ``name``, in chunks of ``chunk`` (one chunk
        under a hold, as long as the hold can cover it); ms per launch."""
        gpu_s, host_s = probed
        held = needs_hold(gpu_s, host_s)
        self.stats["held" if held else "not_held"].append(name)
        if held:
            chunk = held_chunk(host_s, iters)
        times: list[float] = []
        for start in range(0, iters, chunk):
            n = min(chunk, iters - start)
            evs = _event_pairs(n)  # created before the hold: its window covers only the queueing
            with _no_gc():
                if held:
                    self.hold_fn((1,), (1,), (np.uint64(hold_ns(gpu_s, host_s, n)),))
                    hold_done = cp.cuda.Event(block=False, disable_timing=True)
                    hold_done.record()
                    t0 = time.perf_counter()
                _queue(launch, start, evs)
                if held:
                    self.stats["held_chunks"] += 1
                    if hold_done.done:  # the hold ran out before the last launch was queued
                        self.stats["expired_chunks"] += 1
                        if name not in self.stats["expired"]:
                            self.stats["expired"].append(name)
                    host_s = max(host_s, (time.perf_counter() - t0) / n)
            evs[-1][1].synchronize()
            times += [cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]
            if on_chunk is not None:
                on_chunk(start + n)
        return times


def queued_timer() -> QueuedTimer:
    """A QueuedTimer outside an engine run (bench scripts): the hold kernel through CuPy's
    RawKernel, launched on CuPy's current stream (the legacy default stream, which torch's default
    stream also is)."""
    return QueuedTimer(cp.RawKernel(HOLD_SOURCE, "sol_hold_kernel"))


def time_queued(timer: QueuedTimer, name: str, launch: Any, iters: int) -> list[float]:
    """Bench scripts: 10 warm-ups (the last 3 probe whether the host keeps ahead), then ``iters``
    launches ``launch(i)`` timed by ``timer`` in one chunk, as the engine times ours; ms per launch."""
    return timer.run(name, launch, iters, timer.warm(launch, 10, 3), iters)


class _Sampler(threading.Thread):
    """Samples NVML every 50 ms while the kernel runs: clocks and throttle reasons seen. A timed
    phase can be shorter than that (the seed GEMM's 100 launches take ~15 ms), so the backend also
    takes one sample itself at the end of the warm-up and of the timed runs (``snap``): the clock
    the card had come down to by then."""

    def __init__(self, pci_bus_id: str) -> None:
        super().__init__(daemon=True)
        self.pci = pci_bus_id
        self.stop = threading.Event()
        self.samples: list[dict[str, Any]] = []

    def _take(self) -> bool:
        from engine import nvml

        idx = nvml.index_for_pci_bus_id(self.pci)
        if idx is None:
            return False
        s = nvml.sample(idx)
        self.samples.append({"sm_clock_mhz": s.sm_clock_mhz, "mem_clock_mhz": s.mem_clock_mhz,
                             "throttle_mask": s.throttle_mask, "temperature_c": s.temperature_c,
                             "power_w": s.power_w})
        return True

    def snap(self) -> None:
        """One sample now, from the caller's thread; telemetry is advisory, so never raises."""
        try:
            self._take()
        except Exception:
            return

    def run(self) -> None:
        try:
            while not self.stop.is_set() and self._take():
                self.stop.wait(0.05)
        except Exception:  # telemetry is advisory: never fail a run for it
            return


def make_inputs(spec: Any, task: Any, dtype: str, l2_bytes: int) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    """(input sets, output buffers, input bytes of one set): N(0,1) inputs from the task's seed, as
    many rotating sets as keep the inputs from living in the L2 between launches (``input_sets``)."""
    rng = cp.random.default_rng(task.seed)
    buffers = spec.buffers(task)
    in_bytes = sum(int(np.prod(b.shape)) * np.dtype(_STORAGE[dtype]).itemsize for b in buffers if b.role == "input")
    sets: list[dict[str, Any]] = []
    for _ in range(input_sets(in_bytes, l2_bytes)):
        sets.append({b.name: to_storage(rng.standard_normal(b.shape, dtype=cp.float32), dtype)
                     for b in buffers if b.role == "input"})
    outs = {b.name: cp.empty(b.shape, dtype=_STORAGE[dtype]) for b in buffers if b.role != "input"}
    return sets, outs, in_bytes


def load_build(build: Any, cubin: bytes, limits: DeviceLimits) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """Load a compiled build: (functions by name, with the fault and hold kernels; the grid of each
    launch, capped for persistent clusters; registers and local memory per function). Refuses a
    binary that is not the device's own architecture (no silent PTX fallback); RunFailure names why."""
    module = cp.cuda.function.Module()
    module.load(cubin)
    funcs = {name: module.get_function(name)
             for name in (*build.functions, "sol_fault_kernel", "sol_hold_kernel")}
    funcs["__module__"] = module  # keeps the module loaded as long as its functions are used
    want = limits.compute_capability[0] * 10 + limits.compute_capability[1]
    for name in build.functions:
        got = driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_BINARY_VERSION, funcs[name].ptr)
        if got != want:
            raise RunFailure("compile_error", f"{name}: loaded binary is sm_{got}, device is sm_{want} "
                             "(refusing a silent fallback)", "arch_fallback")
    for ln in build.launches:
        # the 48 KB a launch gets without asking counts static and dynamic shared memory
        # together: ask for any dynamic amount (add_rmsnorm's ring of 3 x 16 KB plus its
        # static barriers failed with "invalid argument" before)
        if ln.shared_mem_bytes > 0:
            driver.funcSetAttribute(funcs[ln.function].ptr,
                                    driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    ln.shared_mem_bytes)
    # a persistent grid of clusters holds no more clusters than the device runs at once
    try:
        grids = [clusters.fit_grid(funcs[ln.function].ptr, ln.grid, ln.block, ln.shared_mem_bytes, ln.cluster)
                 for ln in build.launches]
    except RuntimeError as exc:
        raise RunFailure("launch_error", f"thread-block clusters: {exc}", "cluster") from None
    resources = {name: {"registers": driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_NUM_REGS, funcs[name].ptr),
                        "local_bytes": driver.funcGetAttribute(driver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                                               funcs[name].ptr)}
                 for name in build.functions}
    return funcs, grids, resources


def bind_launches(build: Any, funcs: dict[str, Any], grids: list[Any], sets: list[dict[str, Any]],
                  outs: dict[str, Any], dtype: str) -> Any:
    """``run_once(i)``: the build's launches on input set ``i % len(sets)`` and ``outs``, with every
    argument (buffers, tensor maps, int32 scalars) prepared once, so a timed launch does no host work
    beyond the launch itself."""

    def launch_args(ln: Any, bufs: dict[str, Any]) -> tuple[Any, ...]:
        args: list[Any] = []
        for a in ln.args:
            if isinstance(a, str):
                args.append(bufs[a])
            elif isinstance(a, TensorMapArg):
                from engine.backends import tensormap

                desc = tensormap.encode(a, bufs[a.buffer].data.ptr, dtype)
                args.append(tensormap.as_kernel_arg(desc))
            elif isinstance(a, float):  # a user kernel's float32 scalar
                args.append(np.float32(a))
            else:
                args.append(np.int32(a))
        return tuple(args)

    plans = []
    for s in sets:
        bufs = {**s, **outs}
        plans.append([(funcs[ln.function], g, ln.block, launch_args(ln, bufs), ln.shared_mem_bytes)
                      for ln, g in zip(build.launches, grids, strict=True)])
    n_sets = len(sets)

    def run_once(i: int) -> None:
        for fn, grid, block, args, smem in plans[i % n_sets]:
            fn(grid, block, args, shared_mem=smem)

    return run_once


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
        except _CUDA_ERRORS as exc:
            raise RunFailure("launch_error", f"cannot open GPU {task.device}: {exc}", "device") from None
        try:
            return self._run(ctx, limits, props, dtype, started)
        except _CUDA_ERRORS as exc:
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
        violations = spec.check(task, limits)
        if violations:
            raise RunFailure("invalid", "; ".join(str(v) for v in violations) + " (on this device)", "constraint")

        # --- compile -----------------------------------------------------------------------
        em.start("compile", f"NVRTC for {limits.arch}")
        build = spec.build(task, limits)
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
        em.done("load", ", ".join(f"{n}: {resources[n].get('registers')} regs" for n in build.functions))

        # --- inputs ------------------------------------------------------------------------
        em.start("inputs")
        l2 = int(props.get("l2CacheSize", 0)) or int(profile.l2_mb * 2**20)
        sets, outs, in_bytes = make_inputs(spec, task, dtype, l2)
        n_sets = len(sets)
        outs.update({b.name: cp.empty(b.shape, dtype=_STORAGE[b.dtype]) for b in build.scratch})
        flag = cp.zeros(1, dtype=cp.int32)
        cp.cuda.Device().synchronize()
        em.done("inputs", f"N(0,1), {n_sets} rotating set(s) of {in_bytes / 2**20:.1f} MiB (L2 {l2 / 2**20:.0f} MiB)")

        run_once = bind_launches(build, funcs, grids, sets, outs, dtype)

        # --- warm-up -----------------------------------------------------------------------
        sampler = _Sampler(runtime.deviceGetPCIBusId(task.device))
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
        energy = self._energy(task, run_once, timing.median_ms, em) if task.energy_s > 0 else None
        sampler.stop.set()
        em.done("timed", f"median {timing.median_ms:.4f} ms over {timing.samples}")

        # --- verify ------------------------------------------------------------------------
        correctness = None
        bits = _BITS[dtype]
        if task.verify:
            em.start("verify")
            for name in spec.outputs:
                outs[name].view(bits).fill(POISON_BITS[dtype])
            run_once(0)
            if task.fault.value == "nan":
                outs[spec.output].view(bits)[..., ::97] = NAN_BITS[dtype]
            cp.cuda.Device().synchronize()
            correctness = self._verify(spec, sets[0], outs, dtype)
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
            peers = self._peers(task, spec, sets, outs, dtype, em, timer)
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
        validity = self._validity(sampler, fp)
        validity["queue_hold"] = dict(timer.stats)
        validity["rest_applied_s"] = fair_rest_s(task)
        validity["launches_each"] = {"warmup": task.warmup, "timed": task.iterations}
        if timer.stats["expired_chunks"]:
            em.info(f"{timer.stats['expired_chunks']} of {timer.stats['held_chunks']} held chunks ran out of "
                    "hold before the host had queued them: those launch times include launch gaps", "warning")
        launch = {"functions": list(build.functions), "info": build.info, "arch": limits.arch,
                  "resources": resources, "input_sets": n_sets,
                  "launches": [{"function": ln.function, "grid": g, "block": ln.block,
                                "shared_mem_bytes": ln.shared_mem_bytes, "cluster": ln.cluster}
                               for ln, g in zip(build.launches, grids, strict=True)]}
        res = finish(task=task, profile=profile, spec=spec, simulated=False, timing=timing,
                     correctness=correctness, peers=peers, launch=launch, validity=validity,
                     fingerprint=fp, log=em.log, started_at=started, energy=energy)
        em.done("collect")
        return res

    @staticmethod
    def _energy(task: Any, run_once: Any, median_ms: float, em: Any) -> dict[str, Any]:
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

    @staticmethod
    def _verify(spec: Any, inputs: dict[str, Any], outs: dict[str, Any], dtype: str) -> Any:
        """Every output against the float64 reference; poisoned elements count as unwritten."""
        bits = _BITS[dtype]
        refs = spec.reference_outputs(cp, {k: to_f64(v, dtype) for k, v in inputs.items()})
        parts = {}
        for name in spec.outputs:
            out = outs[name]
            unwritten = int((out.view(bits) == POISON_BITS[dtype]).sum())
            parts[name] = compare(cp, to_f64(out, dtype), refs[name], spec.rtol(dtype), unwritten)
        return merge(parts)

    def _peers(self, task: Any, spec: Any, sets: list[dict[str, Any]], outs: dict[str, Any], dtype: str,
               em: Any, timer: QueuedTimer) -> list[PeerResult]:
        """Each peer: ``prepare``, rest, warm-ups, timed launches rotating over the same input sets
        as ours (inputs smaller than the L2 would otherwise stay cached for the peers only), then
        verified on set 0."""
        blas = Blas(dtype)
        inputs = sets[0]
        natives = [{k: native_view(v, dtype) for k, v in st.items()} for st in sets]
        native = natives[0]
        nouts = {k: native_view(v, dtype) for k, v in outs.items()}
        results = []
        iters = task.iterations  # the same launch count as ours: a fair comparison or none
        for p in spec.peers(task):
            if dtype not in p.dtypes:
                continue
            pr = PeerResult(name=p.name, label=p.label, baseline=p.baseline)
            try:
                if any(v is None for v in (*native.values(), *nouts.values())):
                    # cuBLAS works on raw pointers; only CuPy's own ops need its bfloat16 dtype
                    if "cupy" in p.name:
                        raise RuntimeError("CuPy has no bfloat16 dtype here (install ml_dtypes)")
                    rot, o = sets, outs
                else:
                    rot, o = natives, nouts
                ins = rot[0]
                if p.prepare is not None:
                    p.prepare(cp, blas, ins, o)
                rest(fair_rest_s(task), em, p.name)

                def launch(i: int, p: Any = p, rot: Any = rot, o: Any = o) -> None:
                    p.run(cp, blas, rot[i % len(rot)], o)

                probed = timer.warm(launch, max(3, task.warmup), 3)  # ours: task.warmup, at least 3 probes
                # queued back to back between events, as ours are (a sync after every launch would
                # let the GPU idle between them: another regime than ours)
                pr.timing = timing_stats(timer.run(p.name, launch, iters, probed, iters))
                if p.verify and task.verify:
                    for name in spec.outputs:
                        outs[name].view(_BITS[dtype]).fill(POISON_BITS[dtype])
                    if p.prepare is not None:
                        p.prepare(cp, blas, ins, o)
                    p.run(cp, blas, ins, o)
                    cp.cuda.Device().synchronize()
                    pr.correct = self._verify(spec, inputs, outs, dtype).correct
            except Exception as exc:  # a failing peer is reported, never fatal to our run
                pr.error = f"{type(exc).__name__}: {exc}"
                em.info(f"peer {p.name} failed: {pr.error}", "warning")
            results.append(pr)
        return results

    @staticmethod
    def _validity(sampler: _Sampler, fp: Any) -> dict[str, Any]:
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


def measure_ceilings(device: int, log: Any = None, copy_bytes: int = 2**30) -> dict[str, Any]:
    """This GPU's ceilings, as METHOD.md asks: a large device-to-device copy (bytes read + written
    over time) and large cuBLAS GEMMs per dtype on N(0,1) data. Medians of CUDA-event timings."""
    cp.cuda.Device(device).use()
    say = log or (lambda msg: None)

    def median_ms(fn: Any, warm: int, reps: int) -> float:
        for _ in range(warm):
            fn()
        cp.cuda.Device().synchronize()
        times = []
        for _ in range(reps):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1))
        return float(np.median(times))

    rng = cp.random.default_rng(0)

    def copy_ms() -> float:
        src = rng.integers(0, 255, size=copy_bytes, dtype=cp.uint8)
        dst = cp.empty_like(src)
        stream = cp.cuda.get_current_stream().ptr
        return median_ms(lambda: runtime.memcpyAsync(dst.data.ptr, src.data.ptr, copy_bytes,
                                                     runtime.memcpyDeviceToDevice, stream), 3, 20)

    def gemm_ms(dtype: str, n: int) -> float:
        a = to_storage(rng.standard_normal((n, n), dtype=cp.float32), dtype)
        w = to_storage(rng.standard_normal((n, n), dtype=cp.float32), dtype)
        c = cp.empty((n, n), dtype=_STORAGE[dtype])
        blas = Blas(dtype)
        return median_ms(lambda: blas.gemm_nt(a, w, c), 3, 10)

    ms = copy_ms()
    copy_gbps = 2 * copy_bytes / (ms * 1e-3) / 1e9
    say(f"device-to-device copy of {copy_bytes / 2**30:.0f} GiB: {ms:.3f} ms, {copy_gbps:.0f} GB/s (read + write)")
    tflops: dict[str, float] = {}
    for dtype, n in (("bf16", 8192), ("fp16", 8192), ("tf32", 8192), ("fp32", 4096)):
        ms = gemm_ms(dtype, n)
        tflops[dtype] = 2 * n**3 / (ms * 1e-3) / 1e12
        say(f"cuBLAS {dtype} GEMM {n}^3: {ms:.3f} ms, {tflops[dtype]:.1f} TFLOP/s")
    props = runtime.getDeviceProperties(device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"copy_gbps": copy_gbps, "tflops": tflops, "gpu_name": name, "copy_bytes": copy_bytes}
