"""What the caller hands the engine process: one typed request per job, whatever the job.

The caller plans (``engine.plan``: the kernel's ``KernelPlan``, checked against the profile) and
sends the plan itself; the engine process renders that plan and runs it, deciding nothing again,
except where the real device's limits differ from the profile's: then it plans against the
device's own limits and says so (``REPLANNED``).

A job kind is a name and its options (frozen, typed): ``run`` times and verifies one task (bench),
``tune`` searches a task's knobs, ``soak`` runs it back to back for a duration, ``calibrate``
measures the GPU's ceilings. One engine-process entry (``engine.worker.child_main``) dispatches on
the kind. Adding a kind: its options here, its line in ``engine.worker.JOBS``, its module (the
caller and the engine-process body), and the device primitive it needs, if any (ADR-0013)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine.profiles import Profile
from engine.soak_options import SoakOptions
from engine.task import TaskSpec
from engine.tune_types import Candidate, Trial
from kernels.spec import KernelPlan

REPLANNED = "re-planned on this device:"
"""How a run's log starts the line saying the engine process planned again (its device's limits
differ from the profile's); ``knobs_from`` then says so."""



def knobs_from(source: str | None, log: list[str]) -> str | None:
    """Where a job's knobs came from: the plan's ``source`` label, and the engine process's
    ``REPLANNED`` line where it planned again on its device."""
    replanned = next((line for line in log if line.startswith(REPLANNED)), None)
    if source is None or replanned is None:
        return source
    return f"{source}; {replanned}"


JobKind = Literal["run", "tune", "soak", "calibrate"]
Backend = Literal["cuda", "sim"]


@dataclass(frozen=True)
class RunOptions:
    """A run takes everything from its task."""


@dataclass(frozen=True)
class TuneOptions:
    """One engine process's share of a tune: the candidates in search order, the trials already
    done (a restarted process skips them), the budget left."""

    regime: Literal["burst", "sustained"]
    budget_s: float
    candidates: tuple[Candidate, ...]
    default_key: str
    done: tuple[Trial, ...] = ()
    peers_done: tuple[str, ...] = ()
    """Peers timed by an earlier process of the same tune."""
    fault: str = "none"
    fault_key: str | None = None
    """The candidate the task's fault is injected into (the second, so the default still times)."""


@dataclass(frozen=True)
class CalibrateOptions:
    """Measure the device's ceilings (the task's ``device``): a device-to-device copy of
    ``copy_bytes`` and large GEMMs per dtype."""

    copy_bytes: int = 2**30


JobOptions = RunOptions | TuneOptions | SoakOptions | CalibrateOptions
OPTIONS: dict[str, type] = {"run": RunOptions, "tune": TuneOptions, "soak": SoakOptions,
                            "calibrate": CalibrateOptions}
"""Each kind's options type: a request whose options are another kind's is refused."""


@dataclass(frozen=True)
class JobRequest:
    """One job for the engine process. ``plan`` is the kernel's plan of ``task`` against
    ``profile``, which the engine process renders; a job that builds no kernel (calibrate: its task
    names the GPU) has none, and on a GPU no profile either (the device is measured, not planned for)."""

    kind: JobKind
    task: TaskSpec
    """The task as planned: shape normalised, knobs resolved."""
    profile: Profile | None
    """The profile the plan was checked against."""
    backend: Backend
    plan: KernelPlan | None
    options: JobOptions = field(default_factory=RunOptions)

    def __post_init__(self) -> None:
        want = OPTIONS[self.kind]
        if not isinstance(self.options, want):
            raise TypeError(f"a {self.kind} job takes {want.__name__}, not {type(self.options).__name__}")
        if self.kind != "calibrate" and (self.profile is None or self.plan is None):
            raise TypeError(f"a {self.kind} job needs its profile and plan")
