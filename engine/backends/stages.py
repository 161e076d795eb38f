"""The stage skeleton every job composes: compile, load, inputs, warm-up, timed, verify, peers,
collect, each a function of a ``Device`` that says what it does as stage events. A run takes them
all in order (``run_job``); a soak takes compile, load, inputs and warm-up once, then times in
windows and re-verifies (``engine.soak_worker``); a tune's trial takes the same device primitives
for each candidate on one set of inputs, its progress said by trial events instead
(``engine.tune_worker``). ``open_device`` opens the device a job names, in the engine process."""

from __future__ import annotations

from typing import Any

from engine.backends.base import Emitter, RunContext, RunFailure, fair_rest_s, progress_every
from engine.backends.collect import finish, mismatch_text, now_iso
from engine.backends.device import Bound, Compiled, Device, Inputs, Loaded, Probe
from engine.profiles import Profile
from engine.result import Correctness, PeerResult, RunResult
from engine.task import TaskSpec
from engine.timing import Timing, timing_stats
from kernels import nvrtc_check
from kernels.spec import KernelPlan, KernelSpec


def device_failure(dev: Device, em: Emitter, exc: BaseException, default_stage: Any = "load") -> RunFailure:
    """A device fault in the middle of a stage: the stage fails with its text; a launch_error."""
    message, kind = dev.failure(exc)
    em.fail(em.current or default_stage, message)
    return RunFailure("launch_error", message, kind)


def compile_stage(dev: Device, em: Emitter, spec: KernelSpec, plan: KernelPlan,
                  fault: str) -> tuple[Compiled, dict[str, dict[str, Any]]]:
    """Render the plan and compile it; the compiler's resource figures per function (spills are
    warnings in the log)."""
    em.start("compile", dev.compile_title())
    build = spec.render(plan, dev.limits)
    try:
        compiled = dev.compile(build, fault)
    except RunFailure as exc:
        em.fail("compile", exc.message)
        raise
    resources = {name: dict(vars(r)) for name, r in nvrtc_check.parse_ptxas_log(compiled.log).items()}
    for fn, r in resources.items():
        if r["spill_store_bytes"] or r["spill_load_bytes"]:
            em.info(f"{fn}: {r['spill_store_bytes']} B spill stores, {r['spill_load_bytes']} B spill loads",
                    "warning")
    em.done("compile", compiled.detail)
    return compiled, resources


def load_stage(dev: Device, em: Emitter, compiled: Compiled, resources: dict[str, dict[str, Any]]) -> Loaded:
    """Load the compiled build; a grid capped to the clusters the device holds is said in the log."""
    em.start("load")
    try:
        loaded = dev.load(compiled)
    except RunFailure as exc:
        em.fail("load", exc.message)
        raise
    build = compiled.build
    for ln, g in zip(build.launches, loaded.grids, strict=True):
        if g != ln.grid:
            em.info(f"{ln.function}: grid {ln.grid[0]} -> {g[0]} CTAs, the {g[0] // ln.cluster} clusters of "
                    f"{ln.cluster} this device holds at once")
    for name, r in loaded.resources.items():
        resources.setdefault(name, {}).update(r)
    loaded.resources = resources
    em.done("load", dev.load_detail(loaded))
    return loaded


def inputs_stage(dev: Device, em: Emitter, spec: KernelSpec, rotate: bool) -> Inputs:
    em.start("inputs")
    inputs = dev.inputs(rotate)
    em.done("inputs", inputs.detail)
    return inputs


def warmup_stage(dev: Device, em: Emitter, bound: Bound, n: int, fault: str = "none", rest_s: float = 0.0,
                 progress: bool = False) -> Probe:
    """The injected fault (if any), the rest, ``n`` launches (the last 5 probe whether the host
    keeps ahead of the GPU), with ``progress`` reported as they go."""
    em.start("warmup")
    dev.inject(bound, fault, em)
    dev.rest(rest_s, em, "ours")
    every = progress_every(max(n, 1)) if progress else 0
    probed = dev.warm(bound, n, 5, every, (lambda done: em.progress("warmup", done, n)) if progress else None)
    em.done("warmup", f"{n} launches")
    return probed


def timed_stage(dev: Device, em: Emitter, task: TaskSpec, bound: Bound,
                probed: Probe) -> tuple[Timing, dict[str, Any] | None]:
    """``task.iterations`` timed launches; then the energy per launch where the task asks for it."""
    em.start("timed")
    if dev.holds(probed):
        em.info("the GPU finishes a launch faster than the host queues the next: timed launches "
                "are queued behind a hold kernel, so they run back to back")
    times = dev.time("ours", bound, task.iterations, probed, progress_every(task.iterations),
                     lambda done: em.progress("timed", done, task.iterations))
    timing = timing_stats(times)
    energy = dev.energy(bound, timing.median_ms, em) if task.energy_s > 0 else None
    dev.unwatch(bound)
    em.done("timed", f"median {timing.median_ms:.4f} ms over {timing.samples}"
            + (" (SIMULATED)" if dev.simulated else ""))
    return timing, energy


def verify_stage(dev: Device, em: Emitter, spec: KernelSpec, task: TaskSpec, bound: Bound,
                 inputs: Inputs) -> Correctness | None:
    if not task.verify:
        em.skip("verify", "verification off")
        return None
    em.start("verify")
    correctness = dev.verify(bound, inputs, task.fault.value)
    if correctness.correct:
        em.done("verify", "ok")
    else:
        em.fail("verify", mismatch_text(correctness))
    return correctness


def peers_stage(dev: Device, em: Emitter, spec: KernelSpec, task: TaskSpec, bound: Bound,
                inputs: Inputs) -> list[PeerResult]:
    if not task.peers:
        em.skip("peers", "peers off")
        return []
    em.start("peers")
    peers = dev.peers(inputs, bound, em)
    em.done("peers", f"{len(peers)} peer(s)")
    return peers


def open_device(backend: str, task: TaskSpec, profile: Profile | None, **sim: Any) -> Device:
    """The device ``backend`` names, opened for ``task`` (RunFailure where the GPU cannot be
    opened). ``sim``: the simulated device's injected faults (a soak's). The CUDA module is
    imported here, in the engine process, never by a caller."""
    if backend == "cuda":
        from engine.backends.cuda import CudaDevice

        return CudaDevice(task, profile)
    from engine.backends.sim import SimDevice

    return SimDevice(task, profile, **sim)


def run_on(backend: str, ctx: RunContext) -> RunResult:
    """A run of ``ctx`` on the device ``backend`` names, in this process (tests and tools; the
    product runs it in the engine process, ``engine.worker``)."""
    return run_job(open_device(backend, ctx.task, ctx.profile), ctx)


def run_job(dev: Device, ctx: RunContext) -> RunResult:
    """A run: every stage in order on ``dev``. A fault of the device becomes a launch_error naming
    the stage it happened in; a wrong output is a result (status ``incorrect``), not a failure."""
    started = now_iso()
    try:
        return _run_stages(dev, ctx, started)
    except dev.errors as exc:
        raise device_failure(dev, ctx.emit, exc) from None


def _run_stages(dev: Device, ctx: RunContext, started: str) -> RunResult:
    task, spec, em = ctx.task, ctx.spec, ctx.emit
    compiled, resources = compile_stage(dev, em, spec, ctx.device_plan(dev.limits), task.fault.value)
    loaded = load_stage(dev, em, compiled, resources)
    inputs = inputs_stage(dev, em, spec, rotate=True)
    bound = dev.bind(loaded, inputs, "run", em)
    dev.watch(bound)
    probed = warmup_stage(dev, em, bound, task.warmup, task.fault.value, fair_rest_s(task), progress=True)
    timing, energy = timed_stage(dev, em, task, bound, probed)
    correctness = verify_stage(dev, em, spec, task, bound, inputs)
    peers = peers_stage(dev, em, spec, task, bound, inputs)
    em.start("collect")
    fp, launch, validity = dev.collect(loaded, inputs, bound, em)
    res = finish(task=task, profile=ctx.profile, spec=spec, simulated=dev.simulated, timing=timing,
                 correctness=correctness, peers=peers, launch=launch, validity=validity,
                 fingerprint=fp, log=em.log, started_at=started, energy=energy)
    em.done("collect")
    return res

