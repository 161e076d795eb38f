"""Speed-of-Light arithmetic: one small module, pure functions, no I/O.

T_SOL = max(FLOPs / peak FLOP/s, bytes / peak bandwidth), with bytes counted as each input read
once and each output written once. SOL % = T_SOL / T_measured. The bound follows Nsight Compute's
convention: whichever of compute or memory utilisation is higher, unless both are under 60 % of
peak, which is latency-bound. The SOL-ExecBench score is S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from engine.run_records import SolRecord

LATENCY_THRESHOLD = 0.60


@dataclass(frozen=True)
class SolFigures:
    """SOL figures for one measured time. Units are in the names."""

    flops: int
    bytes: int
    t_sol_ms: float
    t_compute_ms: float
    t_memory_ms: float
    sol_bound: str
    """Which term sets T_SOL: 'compute' or 'memory' (the roofline's prediction)."""
    time_ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    compute_util_pct: float | None = None
    bandwidth_util_pct: float | None = None
    sol_pct: float | None = None
    bound: str | None = None
    """Measured bound: 'compute', 'memory' or 'latency' (both under 60 % of peak)."""

    def to_dict(self) -> dict:
        return asdict(self)

    def record(self) -> SolRecord:
        """The figures as a run records them (``RunResult.sol``)."""
        return SolRecord.model_validate(asdict(self))


def t_sol_ms(flops: float, nbytes: float, peak_flops: float, peak_bytes_per_s: float) -> float:
    return max(flops / peak_flops, nbytes / peak_bytes_per_s) * 1e3


def classify_bound(compute_util: float, bandwidth_util: float) -> str:
    """Nsight Compute's reading: both under 60 % of peak -> latency-bound."""
    if compute_util < LATENCY_THRESHOLD and bandwidth_util < LATENCY_THRESHOLD:
        return "latency"
    return "compute" if compute_util >= bandwidth_util else "memory"


def sol_figures(
    flops: int, nbytes: int, peak_flops: float, peak_bytes_per_s: float, time_ms: float | None = None
) -> SolFigures:
    """All SOL figures for a kernel's FLOPs and bytes against peaks, optionally at a measured time."""
    tc = flops / peak_flops * 1e3
    tm = nbytes / peak_bytes_per_s * 1e3
    base = SolFigures(flops=int(flops), bytes=int(nbytes), t_sol_ms=max(tc, tm), t_compute_ms=tc,
                      t_memory_ms=tm, sol_bound="compute" if tc >= tm else "memory")
    if time_ms is None or time_ms <= 0:
        return base
    seconds = time_ms * 1e-3
    cu = flops / seconds / peak_flops
    bu = nbytes / seconds / peak_bytes_per_s
    return replace(
        base,
        time_ms=time_ms,
        tflops=flops / seconds / 1e12,
        gbps=nbytes / seconds / 1e9,
        compute_util_pct=100.0 * cu,
        bandwidth_util_pct=100.0 * bu,
        sol_pct=100.0 * base.t_sol_ms / time_ms,
        bound=classify_bound(cu, bu),
    )


def solexec_score(t_kernel_ms: float, t_baseline_ms: float, t_sol: float) -> float | None:
    """SOL-ExecBench score S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)).

    0.5 = as fast as the baseline, 1.0 = at the speed of light, -> 0 when far slower. None when the
    baseline is at or under T_SOL (the score is undefined there)."""
    if t_baseline_ms <= t_sol:
        return None
    return 1.0 / (1.0 + (t_kernel_ms - t_sol) / (t_baseline_ms - t_sol))


BOUND_WORDS = {"compute": "compute", "memory": "bandwidth", "latency": "latency"}


def _ms(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 1000 else f"{ms:.4g}" if ms >= 0.001 else f"{ms:.6f}".rstrip("0")


def describe_bounds(sol: SolRecord | None) -> str:
    """T_SOL and both bounds in one sentence that does not contradict itself: the roofline's (which
    ceiling sets T_SOL) and the run's (what held it back, Nsight Compute's reading, ``bound``)."""
    if sol is None:
        return "T_SOL -"
    roof, run = sol.sol_bound, sol.bound
    head = f"T_SOL {_ms(sol.t_sol_ms)} ms, set by the {BOUND_WORDS.get(roof, roof)} ceiling"
    if run is None or run == roof:
        return head + (f" (the run is {BOUND_WORDS.get(run, run)}-bound too)" if run else "")
    if run == "latency":
        return head + "; the run reached under 60 % of both peaks (latency-bound: launch and occupancy, not a ceiling)"
    return head + f"; the run is held by {BOUND_WORDS.get(run, run)} instead"
