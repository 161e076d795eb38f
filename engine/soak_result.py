"""A soak as a stored run: the RunResult the results store and the history keep for it (its
windows' times as the timing, the last verification as the correctness, the summary under
``validity["soak"]``); the series itself goes to the store's soak table, keyed by the run's id."""

from __future__ import annotations

from typing import Any

from engine.recorded_task import RecordedTask
from engine.result import Correctness, Fingerprint, RunResult, RunStatus
from engine.run_records import ValidityRecord

STATUS = {"hang": RunStatus.timeout, "timeout": RunStatus.timeout, "crashed": RunStatus.crashed,
          "sdc": RunStatus.incorrect, "nan": RunStatus.incorrect}


def soak_status(summary: Any) -> RunStatus:
    if summary.status == "cancelled":
        return RunStatus.cancelled
    if summary.error is None:
        return RunStatus.ok
    return STATUS.get(summary.error_kind or "", RunStatus.launch_error)


def soak_run_result(prep: Any, summary: Any, child: dict[str, Any], log: list[str], wall_s: float) -> RunResult:
    """The RunResult of a soak (``engine.soak.run_soak``)."""
    from engine.backends.collect import base_fingerprint, now_iso, peak_flops_for
    from engine.job import knobs_from
    from engine.sol import sol_figures
    from engine.timing import timing_stats
    from kernels import get_spec

    run_log = list(child.get("log") or log)
    ms = [w["ms"] for w in summary.series if w.get("ms")]
    timing = timing_stats(ms) if ms else None
    fp = Fingerprint.model_validate(child["fingerprint"]) if child.get("fingerprint") else \
        base_fingerprint(prep.profile, prep.backend, None)
    correctness = Correctness.model_validate(child["correctness"]) if child.get("correctness") else None
    sol = None
    if timing is not None:
        spec, dtype = get_spec(prep.task.kernel), prep.task.dtype.value
        shape = spec.normalize_shape(prep.task.shape)
        sol = sol_figures(spec.flops(shape), spec.bytes_moved(shape, dtype), peak_flops_for(prep.profile, dtype),
                          prep.profile.bandwidth_bytes_per_s, timing.median_ms).record()
    return RunResult(
        status=soak_status(summary), simulated=prep.simulated, task=RecordedTask.of(prep.task),
        profile=prep.profile.name, error=summary.error, error_kind=summary.error_kind, timing=timing, sol=sol,
        correctness=correctness, validity=ValidityRecord(soak=summary.model_dump(mode="json")), fingerprint=fp,
        log=run_log, matched_rules=[summary.rule] if summary.rule else [],
        started_at=child.get("started_at") or now_iso(), wall_s=wall_s,
        knobs_from=knobs_from(prep.plan.source_label if getattr(prep, "plan", None) is not None else None, run_log))
