"""The result of one run: what happened, how long it took, whether it was right, how close to SOL."""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.recorded_task import RecordedTask
from engine.run_records import EnergyRecord, LaunchRecord, SolRecord, ValidityRecord


class RunStatus(str, enum.Enum):
    ok = "ok"
    incorrect = "incorrect"
    invalid = "invalid"            # rejected by validation before compiling
    compile_error = "compile_error"
    launch_error = "launch_error"  # launch failure, illegal address, other CUDA errors
    timeout = "timeout"
    cancelled = "cancelled"
    crashed = "crashed"            # the engine process died without a result
    unavailable = "unavailable"    # no usable backend


class Timing(BaseModel):
    """CUDA-event times over the timed runs, after the warm-up, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    samples: int


class Correctness(BaseModel):
    """Output checked against a higher-precision reference."""

    correct: bool
    max_abs_err: float
    max_rel_err: float
    """Largest |out - ref| / (|ref| + scale), scale = rms(ref)."""
    normwise_rel_err: float
    """||out - ref|| / ||ref||."""
    nan_count: int = 0
    inf_count: int = 0
    unwritten_count: int = 0
    """Elements still holding the poison value after the run."""
    rtol: float
    checked_elements: int
    note: str = ""


class PeerResult(BaseModel):
    """A peer implementation timed on the same inputs in the same run."""

    name: str
    label: str
    timing: Timing | None = None
    tflops: float | None = None
    gbps: float | None = None
    sol_pct: float | None = None
    correct: bool | None = None
    error: str | None = None
    baseline: bool = False
    """The unfused framework baseline used for the SOL-ExecBench score."""


class Fingerprint(BaseModel):
    """Everything that makes two runs comparable or not."""

    host: str = ""
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_runtime_version: str | None = None
    nvrtc_version: str | None = None
    cupy_version: str | None = None
    compute_capability: str | None = None
    arch: str | None = None
    profile: str = ""
    profile_measured: bool = False
    backend: str = ""
    kernel_source_sha256: str | None = None
    engine_version: str = ""


class RunResult(BaseModel):
    """One run's outcome. ``simulated`` is true for every result of the simulated backend."""

    model_config = ConfigDict(validate_assignment=True)
    """A record assigned as a dict (``result.validity = {...}``) is read as its type."""

    run_id: int | None = None
    status: RunStatus
    simulated: bool
    task: RecordedTask
    """The task as run, written back exactly as it was stored (``engine.recorded_task``)."""
    profile: str
    error: str | None = None
    error_kind: str | None = None
    timing: Timing | None = None
    sol: SolRecord | None = None
    """The SOL figures against the profile's datasheet peaks (``engine.sol.SolFigures``)."""
    sol_measured: SolRecord | None = None
    """The same SOL figures against this machine's measured ceilings (``tui calibrate``)."""
    measured_profile: str | None = None
    """The calibrated profile ``sol_measured`` uses."""
    correctness: Correctness | None = None
    peers: list[PeerResult] = Field(default_factory=list)
    solexec_score: float | None = None
    baseline_ms: float | None = None
    baseline_peer: str | None = None
    """The peer the score is against (``torch_matmul_add``, SOL-ExecBench's baseline, where torch is
    installed; else ``cupy_matmul_add``, whose score is not comparable with SOL-ExecBench's)."""
    energy: EnergyRecord | None = None
    """Board power and energy per launch (``engine.energy``; task.energy_s > 0), or a note saying
    why they were not measured; None when not asked for."""
    launch: LaunchRecord = Field(default_factory=LaunchRecord)
    """The build that ran: functions, the kernel's description, geometry and resources."""
    validity: ValidityRecord = Field(default_factory=ValidityRecord)
    """Conditions during the run: clocks, throttle reasons seen, other processes on the GPU."""
    fingerprint: Fingerprint = Field(default_factory=Fingerprint)
    log: list[str] = Field(default_factory=list)
    matched_rules: list[dict[str, Any]] = Field(default_factory=list)
    """Troubleshooting rules the error matched (id, title, cause, fix)."""
    started_at: str | None = None
    wall_s: float | None = None
    knobs_from: str | None = None
    """Where the knobs that ran came from: the plan's source label ('tuned ...', 'default',
    'default (tuned at ...)', 'task'); None for results stored before it was recorded."""

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.ok

    @property
    def rest_s(self) -> float:
        """The rest before each timed implementation: what the run applied (the task's, or the fair
        rest a run with peers takes), else the task's (0 for results saved before either)."""
        applied = self.validity.rest_applied_s
        return float(applied if applied is not None else (self.task.rest_s or 0))

    @property
    def peers_caveat(self) -> str | None:
        """What a reader of the peer rows must know, for a real run that timed peers: they run right
        after ours, on a card ours has just worked, so they can read slow (ADR-0004)."""
        if self.simulated or not any(p.timing is not None for p in self.peers):
            return None
        if self.rest_s > 0:  # every implementation started rested
            return None
        return ("peers are timed right after ours, on a card ours has just worked, and can read slow "
                "(cuBLAS's seed GEMM on the H200: 0.159-0.179 ms timed so, 0.1415 ms rested); compare "
                "rested runs before concluding (README, troubleshooting)")

    @property
    def timing_note(self) -> str | None:
        """How the times were taken, where that differs from plain back-to-back launches: the rest
        before ours and each peer (``rest_s``; not applied on the simulated device), and which
        implementations were queued behind the hold kernel (``validity["queue_hold"]``), with a
        warning where a hold ran out before the host had queued its launches."""
        parts = []
        rest = self.rest_s
        if rest > 0:
            launches = self.validity.launches_each
            each = (f", {launches.warmup} warm-ups and {launches.timed} timed launches each"
                    if launches else "")
            parts.append(f"rest {rest:g} s not applied: the simulated device has no card to rest" if self.simulated
                         else f"ours and each peer timed after {rest:g} s of rest{each}")
        if self.baseline_peer and self.baseline_peer != "torch_matmul_add":
            parts.append(f"score against {self.baseline_peer}: SOL-ExecBench scores against PyTorch's eager "
                         "matmul + add, so this score is not comparable with SOL-ExecBench's")
        hold = self.validity.queue_hold
        if hold is not None and hold.held:
            parts.append("queued behind a hold kernel, as the GPU ran them faster than the host queues "
                         f"launches: {', '.join(hold.held)}")
        if hold is not None and hold.expired_chunks:
            who = f" ({', '.join(hold.expired)})" if hold.expired else ""
            parts.append(f"{hold.expired_chunks} of {hold.held_chunks} held chunks{who} ran out of hold "
                         "before they were queued: those times include launch gaps")
        return "; ".join(parts) or None

    def summary_json(self) -> dict[str, Any]:
        """The stable JSON shape of ``tui bench --json``."""
        sol, t = self.sol, self.timing
        return {
            "status": self.status.value,
            "simulated": self.simulated,
            "run_id": self.run_id,
            "kernel": self.task.kernel,
            "shape": self.task.shape,
            "dtype": self.task.dtype,
            "knobs": self.task.knobs,
            "profile": self.profile,
            "t_sol_ms": None if sol is None else sol.t_sol_ms,
            "time_ms": None if t is None else {"median": t.median_ms, "p10": t.p10_ms, "p90": t.p90_ms},
            "tflops": None if sol is None else sol.tflops,
            "gbps": None if sol is None else sol.gbps,
            "sol_pct": None if sol is None else sol.sol_pct,
            "compute_util_pct": None if sol is None else sol.compute_util_pct,
            "bandwidth_util_pct": None if sol is None else sol.bandwidth_util_pct,
            "bound": None if sol is None else sol.bound,
            "sol_pct_measured": None if self.sol_measured is None else self.sol_measured.sol_pct,
            "measured_profile": self.measured_profile,
            "flops": None if sol is None else sol.flops,
            "bytes": None if sol is None else sol.bytes,
            "correct": None if self.correctness is None else self.correctness.correct,
            "max_abs_err": None if self.correctness is None else self.correctness.max_abs_err,
            "normwise_rel_err": None if self.correctness is None else self.correctness.normwise_rel_err,
            "solexec_score": self.solexec_score,
            "baseline_ms": self.baseline_ms,
            "baseline_peer": self.baseline_peer,
            "peers": [p.model_dump(mode="json") for p in self.peers],
            "peers_note": self.peers_caveat,
            "rest_s": self.rest_s,
            "timing_note": self.timing_note,
            "error": self.error,
            "error_kind": self.error_kind,
            "matched_rules": self.matched_rules,
            "energy": None if self.energy is None else self.energy.model_dump(),
            "launch": self.launch.model_dump(),
            "validity": self.validity.model_dump(),
            "fingerprint": self.fingerprint.model_dump(mode="json"),
        }
