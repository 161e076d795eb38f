"""Running a task: validate in the calling process, execute in an engine process.

The calling process (the cockpit or the CLI) never creates a CUDA context. A CUDA fault poisons
only the engine process; a hung kernel is killed at the wall-clock timeout; a cancel kills it too.
Either way the caller gets a RunResult and can start the next run at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.backends.collect import base_fingerprint, now_iso
from engine.backends.select import choose_backend
from engine.errors import CockpitError, InputError
from engine.events import Event
from engine.job import JobRequest, RunOptions, knobs_from
from engine.planner import Plan, PlanError, plan
from engine.process import run_in_engine_process
from engine.profiles import Profile, ProfileSet, load_profiles
from engine.recorded_task import RecordedTask
from engine.result import RunResult, RunStatus
from engine.task import TaskSpec
from engine.user_kernels import require_trusted_reference
from engine.worker import child_main
from kernels import get_spec

DEFAULT_SIM_PROFILE = "h100-sxm"


@dataclass
class PreparedRun:
    """A validated task, its profile and backend: ready to run."""

    task: TaskSpec
    profile: Profile
    backend: str
    notices: list[str] = field(default_factory=list)
    """Things the user must see: fallbacks to the simulated device, profile/device mismatch."""
    device_name: str | None = None
    detected_profile: str | None = None
    plan: Plan | None = None
    """The plan the task was resolved by (knob sources, options, the kernel's build description)."""

    @property
    def simulated(self) -> bool:
        return self.backend == "sim"


def resolve_profile(profiles: ProfileSet, requested: str | None, device_name: str | None,
                    simulated: bool) -> tuple[Profile, str | None, list[str]]:
    """The profile to use, the detected one, and notices (a --profile that disagrees with the
    detected device is a visible warning, not an error: the user may mean it)."""
    notices: list[str] = []
    detected = profiles.detect(device_name) if device_name else None
    if requested:
        prof = profiles.get(requested)
        if detected is not None and prof.name != detected.name and prof.base_profile != detected.name:
            notices.append(f"WARNING: --profile {prof.name} does not match the detected device "
                           f"'{device_name}' (profile {detected.name}); SOL figures use {prof.name}'s peaks")
        elif device_name and detected is None and not simulated:
            notices.append(f"WARNING: no built-in profile matches '{device_name}'; using {prof.name} as asked")
        return prof, detected.name if detected else None, notices
    if detected is not None:
        return detected, detected.name, notices
    if device_name and not simulated:
        raise InputError(f"no profile matches the device '{device_name}'",
                         fix=f"pass --profile NAME (known: {', '.join(profiles.names())}) or run `tui calibrate`")
    return profiles.get(DEFAULT_SIM_PROFILE), None, notices


def prepare(task: TaskSpec, profile_name: str | None = None, profiles: ProfileSet | None = None,
            backend_choice: Any = None, tuned: Any = None, store: Any = None) -> PreparedRun:
    """Validate everything before anything compiles (``engine.plan``). Raises InputError (naming
    the field, the value and the limit) or BackendUnavailable (naming the driver problem and the
    fix). ``tuned``: a tuning cache lookup for ``plan``; with ``store`` and no ``tuned``, the store's
    cache for this GPU (or SIMULATED profile) is looked up. Neither: the kernel's defaults."""
    profiles = profiles or load_profiles()
    try:
        get_spec(task.kernel)
    except KeyError as exc:
        raise InputError(f"kernel={task.kernel!r}: {exc.args[0]}") from None
    require_trusted_reference(task)
    choice = backend_choice or choose_backend(task.backend.value, task.device)
    if choice.name == "sim":
        from engine.sim_env import check_sim_env

        check_sim_env()
    notices = [choice.notice] if choice.notice else []
    profile, detected, more = resolve_profile(profiles, profile_name, choice.device_name, choice.name == "sim")
    notices += more
    notices += [f"skipped user profile: {e}" for e in getattr(profiles, "errors", []) or []]
    if tuned is None and store is not None:
        from engine.tuning_cache import tuned_lookup

        tuned = tuned_lookup(store, choice.device_name, profile, choice.name == "sim")
    try:
        p = plan(task, profile, tuned)
    except PlanError as exc:
        raise InputError(str(exc)) from None
    if not p.ok:
        raise InputError(p.error_text(), fix=p.fix)
    return PreparedRun(task=p.task, profile=profile, backend=choice.name, notices=notices,
                       device_name=choice.device_name, detected_profile=detected, plan=p)


def _failed(prep: PreparedRun, status: RunStatus, error: str, kind: str, started: str, t0: float,
            log: list[str]) -> RunResult:
    return RunResult(status=status, simulated=prep.simulated, task=RecordedTask.of(prep.task),
                     profile=prep.profile.name, error=error, error_kind=kind, log=log, started_at=started,
                     wall_s=time.monotonic() - t0,
                     fingerprint=base_fingerprint(prep.profile, prep.backend, None))


def run_prepared(prep: PreparedRun, on_event: Callable[[Event], None] | None = None,
                 cancel: threading.Event | None = None, store: Any = None) -> RunResult:
    """Run in an engine process; block until it finishes, times out or is cancelled.
    Safe to call from a worker thread. Saves the result in ``store`` when given."""
    if prep.plan is None or prep.plan.kernel is None:
        raise InputError(prep.plan.error_text() if prep.plan is not None else "the task was not planned")
    request = JobRequest(kind="run", task=prep.task, profile=prep.profile, backend=prep.backend,  # type: ignore[arg-type]
                         plan=prep.plan.kernel, options=RunOptions())
    started, t0 = now_iso(), time.monotonic()
    out = run_in_engine_process(child_main, request, prep.task.timeout_s, on_event, cancel)
    if out.status == "ok":
        result = RunResult.model_validate(out.result)
    elif out.status == "cancelled":
        result = _failed(prep, RunStatus.cancelled, f"cancelled by the user during {out.stage}",
                         "cancelled", started, t0, out.log)
    elif out.status == "timeout":
        result = _failed(prep, RunStatus.timeout,
                         f"timed out after {prep.task.timeout_s:g} s during {out.stage}: the engine "
                         "process was killed (a hung kernel, or a run longer than the timeout)",
                         "timeout", started, t0, out.log)
    else:
        result = _failed(prep, RunStatus.crashed,
                         f"the engine process died during {out.stage} (exit code {out.exitcode})",
                         "crashed", started, t0, out.log)
    result.wall_s = out.wall_s
    result.knobs_from = knobs_from(prep.plan.source_label, result.log)
    attach_measured_sol(result, prep.profile)
    if result.error:
        result.matched_rules = match_rules(result.error)
    if store is not None:
        try:
            from engine.troubleshoot import match_slow_knobs

            result.matched_rules += [m.to_dict() for m in match_slow_knobs(result, store)]  # an ok run's finding
            store.save(result)
        except CockpitError as exc:  # the result is still shown; the log says it was not stored
            result.log.append(f"not stored: {exc}")
    return result


def attach_measured_sol(result: RunResult, profile: Profile, profiles: ProfileSet | None = None) -> None:
    """When this machine has been calibrated against ``profile``, add SOL against the measured
    ceilings beside the datasheet figures."""
    from engine.calibrate import measured_for
    from engine.sol import sol_figures

    sol = result.sol
    if result.timing is None or sol is None or not sol.flops:
        return
    measured = measured_for(profiles or load_profiles(), profile)
    if measured is None:
        return
    dtype = result.task.dtype or "bf16"
    fig = sol_figures(sol.flops, sol.bytes, measured.sol_peak_flops(dtype), measured.bandwidth_bytes_per_s,
                      result.timing.median_ms)
    result.sol_measured, result.measured_profile = fig.record(), measured.name


def match_rules(error_text: str) -> list[dict[str, Any]]:
    """Troubleshooting rules matching a run's error text, best first (empty when none match)."""
    try:
        from engine.troubleshoot import match_text
    except ImportError:
        return []
    return [m.to_dict() for m in match_text(error_text)][:5]


def run_task(task: TaskSpec, profile_name: str | None = None, on_event: Callable[[Event], None] | None = None,
             cancel: threading.Event | None = None, store: Any = None) -> tuple[PreparedRun, RunResult]:
    """prepare() then run_prepared(): the whole flow for scripts and tests."""
    prep = prepare(task, profile_name)
    return prep, run_prepared(prep, on_event=on_event, cancel=cancel, store=store)
