"""The device a job runs on, behind one small interface: the CUDA GPU (``engine.backends.cuda``)
and the simulated device (``engine.backends.sim``) implement ``Device``, and every job (run, tune,
soak, calibrate) composes the same primitives in its own order (``engine.backends.stages``): one
device module per device, none per device and job.

A device is opened for one job in the engine process (``open_device``); the values its primitives
hand back (``Compiled``, ``Loaded``, ``Inputs``, ``Bound``) are the device's own handles, passed
back to it by the job and never looked into except for the fields named here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from engine.backends.base import Emitter
from engine.profiles import Profile
from engine.result import Correctness, Fingerprint, PeerResult
from engine.task import TaskSpec
from kernels.spec import Build, DeviceLimits, KernelSpec

Purpose = Literal["run", "trial", "soak"]
"""What a bound build is for: a run (outputs rotate with the inputs, the run's own random stream on
the simulated device), a tune's trial (rotating outputs, the trial's own stream, the regime's heat)
or a soak (one output set, launched back to back for as long as the soak lasts)."""

Probe = tuple[float | None, float]
"""What the warm-up learnt: (GPU seconds per launch or None, host seconds per launch)."""

Progress = Callable[[int], None]


@dataclass
class Compiled:
    """A build compiled for the device: its binary (None on the simulated device), the compiler's
    log (ptxas' resource lines on a GPU) and whether it came from the kernel cache."""

    build: Build
    binary: Any
    log: str
    cached: bool
    detail: str


@dataclass
class Loaded:
    """A compiled build loaded: its functions, each launch's grid (capped where the device holds
    fewer clusters), registers and local memory per function, whether launches may overlap (PDL)."""

    build: Build
    funcs: dict[str, Any]
    grids: list[Any]
    resources: dict[str, dict[str, Any]]
    dependent: bool = False


@dataclass
class Inputs:
    """The job's input sets (N(0,1) from the task's seed), their outputs (``outs`` is set 0's, what
    verification reads), one output dict per set where outputs rotate, and the float64 reference of
    set 0 once computed (``refs``)."""

    sets: list[dict[str, Any]]
    outs: dict[str, Any]
    out_sets: list[dict[str, Any]]
    in_bytes: int
    detail: str
    refs: dict[str, Any] | None = None
    note: str | None = None


@dataclass
class Bound:
    """A loaded build bound to the inputs: ``run(i)`` launches it on input set ``i``."""

    loaded: Loaded | None
    """None for a launch that is not a build's (a peer's)."""
    run: Callable[[int], None]
    purpose: Purpose
    timer: Any = None
    """The GPU's timer for it (``QueuedTimer``)."""
    sampler: Any = None
    """The GPU's NVML sampler while a run warms up and is timed (``Device.watch``)."""
    first_bits: dict[str, Any] = field(default_factory=dict)
    """A soak's first verified output, bit for bit, per output name."""
    model_ms: float = 0.0
    """The simulated device's time per launch."""
    rng: Any = None
    """The simulated device's random stream for it."""


@runtime_checkable
class Device(Protocol):
    """One GPU (or the simulated one) opened for a job. Primitives, in the order a run uses them:
    compile, load, inputs, bind, watch, inject, rest, warm, time, energy, verify, peers, collect.
    A primitive does the device's work; which stage it belongs to, what the stage says and in what
    order the stages run is the job's (``engine.backends.stages``). A job that needs more of a
    device declares it beside its body as a protocol of its own (a tune's ``TuneDevice``, a soak's
    ``SoakDevice``, calibrate's ``Ceilings``), which the devices that can implement."""

    name: str
    """``cuda`` or ``sim``."""
    simulated: bool
    task: TaskSpec
    @property
    def profile(self) -> Profile | None:
        """The profile the job was planned against (None: a GPU measured, not planned for)."""
        ...

    spec: KernelSpec
    limits: DeviceLimits
    errors: tuple[type[BaseException], ...]
    """What a fault of the device raises (a CUDA error, out of memory, an injected simulated fault)."""

    def failure(self, exc: BaseException) -> tuple[str, str]:
        """(message, error_kind) of one of ``errors``."""
        ...

    def compile_title(self) -> str: ...

    def compile(self, build: Build, fault: str) -> Compiled:
        """The build compiled (RunFailure 'compile_error' naming the compiler's complaint)."""
        ...

    def load(self, compiled: Compiled) -> Loaded:
        """The compiled build loaded (RunFailure where the binary is not the device's own)."""
        ...

    def load_detail(self, loaded: Loaded) -> str: ...

    def inputs(self, rotate: bool) -> Inputs:
        """The task's input sets and outputs; ``rotate``: one output dict per input set."""
        ...

    def bind(self, loaded: Loaded, inputs: Inputs, purpose: Purpose, em: Emitter,
             task: TaskSpec | None = None) -> Bound:
        """``loaded`` bound to ``inputs`` for ``purpose``; ``task``: the knobs it was built for
        (a trial's candidate), the device's own task by default."""
        ...

    def watch(self, bound: Bound) -> None:
        """Start sampling the clocks (a run's validity)."""
        ...

    def unwatch(self, bound: Bound) -> None: ...

    def inject(self, bound: Bound, fault: str, em: Emitter) -> None:
        """Launch the injected fault (hang, launch failure, illegal address), if ``fault`` is one."""
        ...

    def rest(self, seconds: float, em: Emitter, what: str) -> None: ...

    def warm(self, bound: Bound, n: int, n_probe: int, every: int = 0, progress: Progress | None = None) -> Probe:
        """``n`` warm-up launches, the last ``n_probe`` of them probing the launch rate."""
        ...

    def holds(self, probed: Probe) -> bool:
        """Whether timed launches queue behind a hold kernel (the GPU outruns the host)."""
        ...

    def time(self, name: str, bound: Bound, n: int, probed: Probe, chunk: int,
             progress: Progress | None = None) -> list[float]:
        """``n`` timed launches: ms per launch."""
        ...

    def energy(self, bound: Bound, median_ms: float, em: Emitter) -> dict[str, Any]: ...

    def verify(self, bound: Bound, inputs: Inputs, fault: str) -> Correctness:
        """Outputs poisoned, one launch on set 0, every output against the float64 reference."""
        ...

    def peers(self, inputs: Inputs, bound: Bound, em: Emitter) -> list[PeerResult]: ...

    def fingerprint(self, build: Build | None) -> Fingerprint: ...

    def collect(self, loaded: Loaded, inputs: Inputs, bound: Bound,
                em: Emitter) -> tuple[Fingerprint, dict[str, Any], dict[str, Any]]:
        """(fingerprint, launch record, validity record) of a run."""
        ...

    def close(self) -> None: ...
