"""What the caller hands the engine process: one typed request per job.

The caller plans (``engine.plan``: the kernel's ``KernelPlan``, checked against the profile) and
sends the plan itself; the engine process renders that plan and runs it, deciding nothing again,
except where the real device's limits differ from the profile's: then it plans against the
device's own limits and says so (``REPLANNED``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.profiles import Profile
from engine.task import TaskSpec
from kernels.spec import KernelPlan

REPLANNED = "re-planned on this device:"
"""How a run's log starts the line saying the engine process planned again (its device's limits
differ from the profile's); ``knobs_from`` then says so."""


@dataclass(frozen=True)
class JobRequest:
    """One job for the engine process."""

    kind: Literal["run"]
    """Which job: ``run`` times and verifies one task (bench)."""
    task: TaskSpec
    """The task as planned: shape normalised, knobs resolved."""
    profile: Profile
    """The profile the plan was checked against."""
    backend: Literal["cuda", "sim"]
    plan: KernelPlan
    """The kernel's plan of ``task``, which the engine process renders."""
