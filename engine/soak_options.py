"""What a soak is asked to do: the options the caller (``engine.soak``) validates and the engine
process (``engine.soak_worker``) runs by, in their own module so that neither imports the other."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

WINDOW_S = 0.25
"""The shortest window: the engine process reports the launches of each this often."""
MAX_POINTS = 4000
"""A long soak's windows grow so that its series keeps at most this many points."""
MAX_SOAK_S = 7 * 86400.0
"""The longest soak the options take: a week."""

SimFault = Literal["none", "corrupt", "throttle", "ecc"]


class SoakOptions(BaseModel):
    """How long to soak and what fails it."""

    duration_s: float = Field(gt=0, le=MAX_SOAK_S)
    """Seconds of back-to-back launches (not counting compile, warm-up and verifications)."""
    verify_every_s: float = Field(default=10.0, gt=0)
    """Re-verify the output against the reference (and re-read ECC) this often."""
    max_drift_pct: float = Field(default=5.0, ge=0)
    """Fail when the last minute's median launch time is this many percent above the first's."""
    sim_fault: SimFault = "none"
    """Simulated device only: corrupt the output, throttle the clocks, or raise the ECC count."""
    sim_fault_after_s: float | None = Field(default=None, ge=0)
    """When the simulated fault starts (default: half-way)."""

    @property
    def window_s(self) -> float:
        """Seconds per reported window: ``WINDOW_S``, longer where the series would pass ``MAX_POINTS``."""
        return max(WINDOW_S, self.duration_s / MAX_POINTS)

    @property
    def fault_at_s(self) -> float:
        """When the simulated fault starts: ``sim_fault_after_s``, else half-way."""
        return self.duration_s / 2 if self.sim_fault_after_s is None else self.sim_fault_after_s
