"""Turning a run's raw measurements into a RunResult with SOL figures; shared by all backends."""

from __future__ import annotations

import socket
from datetime import datetime, timezone
from typing import Any

from engine import __version__
from engine.energy import per_work
from engine.recorded_task import RecordedTask
from engine.result import Correctness, Fingerprint, PeerResult, RunResult, RunStatus, Timing
from engine.run_records import EnergyRecord, LaunchRecord, ValidityRecord
from engine.sol import sol_figures, solexec_score
from engine.task import TaskSpec


def peak_flops_for(profile: Any, dtype: str) -> float:
    return profile.sol_peak_flops(dtype)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def base_fingerprint(profile: Any, backend: str, source_sha: str | None) -> Fingerprint:
    return Fingerprint(host=socket.gethostname(), profile=profile.name, profile_measured=profile.measured,
                       backend=backend, kernel_source_sha256=source_sha, engine_version=__version__)


def mismatch_text(c: Any) -> str:
    """Why an output failed verification, naming each criterion that failed and only those: NaN,
    Inf, unwritten elements, the error beyond the tolerance."""
    failed = [f"{n} {what}" for n, what in ((c.nan_count, "NaN"), (c.inf_count, "Inf"),
                                             (c.unwritten_count, "unwritten elements")) if n]
    if c.max_rel_err > c.rtol:
        failed.append(f"max rel err {c.max_rel_err:.3g} > rtol {c.rtol:.3g}")
    text = "output does not match the reference: " + ", ".join(failed or ["verification failed"])
    if c.max_rel_err <= c.rtol and failed:
        text += f" (the finite, written elements are within rtol: max rel err {c.max_rel_err:.3g} <= {c.rtol:.3g})"
    return text


def peer_figures(peer: PeerResult, flops: int, nbytes: int, profile: Any, dtype: str) -> PeerResult:
    if peer.timing is not None:
        f = sol_figures(flops, nbytes, peak_flops_for(profile, dtype), profile.bandwidth_bytes_per_s,
                        peer.timing.median_ms)
        peer.tflops, peer.gbps, peer.sol_pct = f.tflops, f.gbps, f.sol_pct
    return peer


def finish(
    *,
    task: TaskSpec,
    profile: Any,
    spec: Any,
    simulated: bool,
    timing: Timing,
    correctness: Correctness | None,
    peers: list[PeerResult],
    launch: dict[str, Any],
    validity: dict[str, Any],
    fingerprint: Fingerprint,
    energy: dict[str, Any] | None = None,
    log: list[str],
    started_at: str,
) -> RunResult:
    """Compute SOL figures, the SOL-ExecBench score against the baseline peer, and the status."""
    shape = spec.normalize_shape(task.shape)
    dtype = task.dtype.value
    flops, nbytes = spec.flops(shape), spec.bytes_moved(shape, dtype)
    fig = sol_figures(flops, nbytes, peak_flops_for(profile, dtype), profile.bandwidth_bytes_per_s,
                      timing.median_ms)
    peers = [peer_figures(p, flops, nbytes, profile, dtype) for p in peers]
    baseline = next((p for p in peers if p.baseline and p.timing is not None), None)
    for p in peers:  # one baseline: the peer the score is against (the others were fallbacks)
        p.baseline = p is baseline
    status = RunStatus.ok if correctness is None or correctness.correct else RunStatus.incorrect
    baseline_ms = baseline.timing.median_ms if baseline is not None and baseline.timing is not None else None
    score = None
    if baseline_ms is not None and status is RunStatus.ok:  # a wrong output earns no score
        score = solexec_score(timing.median_ms, baseline_ms, fig.t_sol_ms)
    error = None
    if status is RunStatus.incorrect and correctness is not None:
        error = mismatch_text(correctness)
    return RunResult(
        status=status, simulated=simulated, task=RecordedTask.of(task, shape=shape),
        profile=profile.name, error=error, error_kind="incorrect" if error else None, timing=timing,
        sol=fig.record(), correctness=correctness, peers=peers, solexec_score=score,
        baseline_ms=baseline_ms,
        baseline_peer=None if baseline is None else baseline.name, launch=LaunchRecord.model_validate(launch),
        validity=ValidityRecord.model_validate(validity), fingerprint=fingerprint, log=log, started_at=started_at,
        energy=None if energy is None else EnergyRecord.model_validate(per_work(energy, flops, nbytes)),
    )
