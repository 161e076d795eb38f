"""The simulated device's rehearsal variables, checked together where a run is prepared (InputError,
exit 2), so that a malformed one never reaches the engine process as a crash: the GPU count and the
slow GPUs (``engine.multi_device``), the run's and the soak's speeds (``engine.backends.sim``). Apart from
both, which read them, so that neither imports the other."""

from __future__ import annotations

from collections.abc import Mapping

from engine.backends.sim import run_speed, soak_speed
from engine.multi_device import sim_device_count, sim_slow_factors


def check_sim_env(env: Mapping[str, str] | None = None) -> None:
    """Read every rehearsal variable once; the first malformed one raises InputError naming it."""
    sim_device_count(env)
    sim_slow_factors(env)
    soak_speed(env)
    run_speed(env)
