"""Telemetry for the cockpit: a sampler thread polls each GPU into a per-GPU ring buffer.

The sampler never overlaps itself (the next poll is scheduled only after the previous one has
finished), keeps GPM samples at least 100 ms apart, and turns a GPU that stops answering into a
state (``GpuTelemetry.state``), never an exception. Readers (the Live screen) pull ``latest()``
and ``history(metric)`` on their own timer; both return copies, so no reader ever shares a
mutable object with the sampler thread.

Without a GPU, ``SimulatedSource`` produces plausible numbers that follow whether a simulated
run is active; everything it produces is marked ``simulated``. Imports pynvml only through
``engine.nvml``; never imports textual.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.nvml import Sample

log = logging.getLogger(__name__)

SampleFn = Callable[[int], Sample]
"""Returns one Sample of GPU ``index``; may raise (the sampler turns that into a state)."""

METRICS = (
    "gpu_util_pct", "mem_util_pct", "mem_used_mib", "sm_clock_mhz", "mem_clock_mhz", "power_w",
    "temperature_c", "pcie_tx_kbps", "pcie_rx_kbps", "sm_activity_pct", "tensor_activity_pct",
    "dram_bw_util_pct",
)
"""Numeric Sample fields kept in the history."""

MIN_GPM_INTERVAL_S = 0.1
"""GPM metrics need two samples at least this far apart."""


@dataclass(frozen=True)
class GpuTelemetry:
    """The latest state of one GPU as the sampler saw it."""

    index: int
    state: str
    """'ok', 'waiting' (no sample yet) or 'not answering' (the last poll failed)."""
    sample: Sample | None
    """The last good sample (kept while the GPU does not answer, so the reader sees how stale)."""
    error: str | None = None
    simulated: bool = False
    polls: int = 0
    failures: int = 0


@dataclass(frozen=True)
class Snapshot:
    """``latest()``: all GPUs at one moment."""

    gpus: tuple[GpuTelemetry, ...]
    simulated: bool
    source: str
    """'nvml', 'simulated', or the name a test gave its fake source."""
    problem: str | None = None
    """Why there is no telemetry at all (e.g. no driver), in words."""


@dataclass
class _Ring:
    samples: deque = field(default_factory=deque)
    state: str = "waiting"
    error: str | None = None
    last_good: Sample | None = None
    polls: int = 0
    failures: int = 0


class TelemetrySampler:
    """Polls ``sample_fn(index)`` for every index in ``indices`` into ring buffers.

    ``interval_s`` is the pause between the end of one poll and the start of the next (so a
    slow NVML call stretches the period instead of stacking polls). ``history_s`` sets the ring
    length. ``poll_once()`` runs one poll synchronously (tests, and the first frame)."""

    def __init__(self, sample_fn: SampleFn, indices: list[int], *, interval_s: float = 0.5,
                 history_s: float = 300.0, simulated: bool = False, source: str = "nvml",
                 problem: str | None = None) -> None:
        self.sample_fn = sample_fn
        self.indices = list(indices)
        self.interval_s = max(interval_s, MIN_GPM_INTERVAL_S)
        self.maxlen = max(2, round(history_s / self.interval_s))
        self.simulated = simulated
        self.source = source
        self.problem = problem
        self._rings = {i: _Ring(samples=deque(maxlen=self.maxlen)) for i in self.indices}
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_poll_start: float | None = None
        self.sim_source: SimulatedSource | None = None
        """The simulated source behind this sampler, when it is one."""

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None or not self.indices:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sol-telemetry", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def set_run_active(self, active: bool, task: Any = None, profile: Any = None) -> None:
        """Tell a simulated source that a simulated run started or ended, and what it runs on which
        profile, so its gauges follow that kernel and card (no-op for NVML)."""
        if self.sim_source is not None:
            if profile is not None:
                self.sim_source.configure(profile)
            self.sim_source.load = run_load(task, profile) if active and task is not None and profile is not None \
                else None
            self.sim_source.active = active

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            if self._stop.wait(self.interval_s):
                break

    # --- polling ---------------------------------------------------------------------------
    def poll_once(self) -> None:
        """Sample every GPU once. Never raises; a failing GPU becomes 'not answering'. Calls are
        serialised, and two polls start at least 100 ms apart (GPM's minimum interval)."""
        with self._poll_lock:
            now = time.monotonic()
            if self._last_poll_start is not None:
                wait = MIN_GPM_INTERVAL_S - (now - self._last_poll_start)
                if wait > 0:
                    time.sleep(wait)
            self._last_poll_start = time.monotonic()
            for index in self.indices:
                self._poll_gpu(index)

    def _poll_gpu(self, index: int) -> None:
        try:
            s = self.sample_fn(index)
            error = s.error
        except Exception as exc:  # a GPU that falls off the bus, a driver that stops answering
            s, error = None, f"{type(exc).__name__}: {exc}"
        with self._lock:
            ring = self._rings[index]
            ring.polls += 1
            if s is None or error:
                ring.failures += 1
                ring.state, ring.error = "not answering", error or "no sample"
                return
            ring.state, ring.error = "ok", None
            ring.last_good = s
            ring.samples.append(s)

    # --- reading ---------------------------------------------------------------------------
    def latest(self) -> Snapshot:
        with self._lock:
            gpus = tuple(
                GpuTelemetry(index=i, state=r.state, sample=replace(r.last_good) if r.last_good else None,
                             error=r.error, simulated=self.simulated, polls=r.polls, failures=r.failures)
                for i, r in self._rings.items()
            )
        return Snapshot(gpus=gpus, simulated=self.simulated, source=self.source, problem=self.problem)

    def recent(self, index: int | None = None, last: int = 60) -> list[Sample]:
        """Copies of the last ``last`` good samples of one GPU, oldest first (for rule matching)."""
        idx = self.indices[0] if index is None and self.indices else index
        with self._lock:
            ring = None if idx is None else self._rings.get(idx)
            return [] if ring is None else [replace(s) for s in list(ring.samples)[-last:]]

    def history(self, metric: str, index: int | None = None) -> list[float | None]:
        """The values of ``metric`` over the ring, oldest first (None where not supported)."""
        if metric not in METRICS:
            raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
        idx = self.indices[0] if index is None and self.indices else index
        with self._lock:
            ring = None if idx is None else self._rings.get(idx)
            if ring is None:
                return []
            return [getattr(s, metric) for s in ring.samples]


class SimulatedSource:
    """Plausible telemetry for the simulated device: idle numbers, rising while a simulated run
    is active. Deterministic: values depend only on the tick count and ``active``, never on
    the clock, so screenshots of it are reproducible."""

    def __init__(self, gpu_count: int = 1, memory_total_mib: float = 81559.0, power_limit_w: float = 700.0,
                 tensor_core: bool = True) -> None:
        self.gpu_count = gpu_count
        self.memory_total_mib = memory_total_mib
        self.power_limit_w = power_limit_w
        self.tensor_core = tensor_core
        self.active = False
        """Set by the cockpit while a simulated run is in flight."""
        self.load: RunLoad | None = None
        """What the run in flight keeps busy (``run_load``); None: a GEMM-like load."""
        self._tick: dict[int, int] = {}

    def configure(self, profile: Any) -> None:
        """Take the card's memory size and power limit from the profile it simulates."""
        self.memory_total_mib = float(profile.memory_gb) * 1e9 / 2**20
        if getattr(profile, "power_w", None):
            self.power_limit_w = float(profile.power_w)

    def __call__(self, index: int) -> Sample:
        tick = self._tick.get(index, 0)
        self._tick[index] = tick + 1
        wobble = math.sin(tick / 3.0 + index)
        busy = 1.0 if self.active else 0.0
        util = 3.0 + 94.0 * busy + 2.0 * wobble * busy
        load = self.load if self.active else None
        tensor = 58.0 if load is None else 100.0 * load.tensor
        dram = 22.0 if load is None else 100.0 * load.dram
        used = 600.0 + (1400.0 if load is None else load.memory_mib) * busy
        return Sample(
            index=index, t=float(tick),
            gpu_util_pct=round(util), mem_util_pct=round(2 + (dram - 2) * 0.9 * busy + wobble),
            mem_used_mib=round(min(used, self.memory_total_mib), 1), mem_total_mib=self.memory_total_mib,
            sm_clock_mhz=345.0 + (1980.0 - 345.0) * busy, mem_clock_mhz=2619.0, sm_clock_max_mhz=1980.0,
            power_w=round(min(self.power_limit_w, 72.0 + (0.74 * self.power_limit_w - 72.0) * busy
                              + 15 * wobble * busy), 1), power_limit_w=self.power_limit_w,
            temperature_c=round(31 + 27 * busy), temperature_slowdown_c=87.0,
            throttle_mask=0x0 if busy else 0x1,
            throttle_reasons=[] if busy else ["GPU idle"],
            pcie_tx_kbps=800.0 + 4000.0 * busy, pcie_rx_kbps=1200.0 + 9000.0 * busy,
            sm_activity_pct=round(1 + 92 * busy, 1) if self.tensor_core else None,
            sm_occupancy_pct=round(1 + 30 * busy, 1) if self.tensor_core else None,
            tensor_activity_pct=round(tensor * busy, 1) if self.tensor_core else None,
            dram_bw_util_pct=round(1 + (dram - 1) * busy, 1) if self.tensor_core else None,
        )


@dataclass(frozen=True)
class RunLoad:
    """What a simulated run keeps busy: the tensor cores' and DRAM's shares of their peaks over the
    run (0..1), and the device memory its buffers take."""

    tensor: float
    dram: float
    memory_mib: float


def run_load(task: Any, profile: Any) -> RunLoad | None:
    """The load a task puts on the card it simulates: its FLOPs and bytes over the time the kernel's
    model gives it (``predict_ms``), as shares of the profile's peaks; None where it cannot be
    planned. A memory-bound kernel shows DRAM busy and the tensor cores idle, as on a GPU."""
    try:
        from engine.planner import plan
        from kernels import get_spec

        p = plan(task, profile)
        if not p.ok:
            return None
        spec = get_spec(p.task.kernel)
        dtype = p.task.dtype.value
        peak = profile.sol_peak_flops(dtype)
        ms = spec.predict_ms(p.task, p.limits, peak, profile.bandwidth_bytes_per_s)
        tensor = p.flops / peak / (ms * 1e-3)
        if "gemm" not in p.task.kernel:  # the row-wise kernels run on the CUDA cores, not the tensor cores
            tensor = 0.0
        dram = p.bytes / profile.bandwidth_bytes_per_s / (ms * 1e-3)
        mib = sum(math.prod(b.shape) * (2 if dtype in ("bf16", "fp16") else 4)
                  for b in spec.buffers(p.task)) / 2**20
        return RunLoad(tensor=max(0.0, min(0.97, tensor)), dram=max(0.0, min(0.97, dram)), memory_mib=mib)
    except Exception:  # the gauges are advisory: a task they cannot read shows the generic load
        return None


def process_info(pid: int) -> dict[str, Any]:
    """The user, command line and parent of ``pid``: from psutil where it is installed, else from
    /proc; None each where unknown (another PID namespace, as in a container; no rights)."""
    out: dict[str, Any] = {"user": None, "command": None, "ppid": None}
    try:
        import psutil  # type: ignore[import-untyped]  # optional; types-psutil is not a dependency
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            p = psutil.Process(pid)
        except Exception:  # gone, or another PID namespace
            return out
        with p.oneshot():
            for key, read in (("ppid", p.ppid), ("user", p.username),
                              ("command", lambda: " ".join(p.cmdline()) or p.name())):
                try:
                    out[key] = read()
                except Exception:  # no rights to this field: the others stay
                    pass
        return out
    proc = Path("/proc") / str(pid)
    try:
        import pwd

        out["user"] = pwd.getpwuid(proc.stat().st_uid).pw_name
    except (ImportError, OSError, KeyError):
        pass
    from engine.errors import InputError
    from engine.safe_files import read_bytes
    from engine.text_safety import visible

    try:  # another user's command line: text to show, never to obey (engine.text_safety)
        raw = read_bytes(proc / "cmdline", "process", 64 * 1024)
        out["command"] = visible(raw.replace(b"\0", b" ").decode(errors="replace").strip(), one_line=True) or None
    except InputError:
        pass
    try:
        stat_text = read_bytes(proc / "stat", "process", 64 * 1024).decode(errors="replace")
        out["ppid"] = int(stat_text.rsplit(")", 1)[1].split()[1])
    except (InputError, IndexError, ValueError):
        pass
    return out


def gpu_processes(index: int) -> list[dict[str, Any]] | None:
    """The processes on GPU ``index`` as nvitop lists them: ``engine.nvml.gpu_processes``' rows
    (pid, name, kind, used_mib) with ``process_info``'s user, command and ppid; None when NVML does
    not say (no driver, or a driver without the query)."""
    from engine import nvml
    from engine.errors import BackendUnavailable

    try:
        rows = nvml.gpu_processes(index)
    except BackendUnavailable:
        return None
    return None if rows is None else [{**r, **process_info(r["pid"])} for r in rows]


def nvml_sampler(interval_s: float = 0.5, history_s: float = 300.0) -> TelemetrySampler:
    """A sampler over every GPU NVML sees. Without a driver it returns a sampler with no GPUs and
    ``problem`` set to what NVML said (a state, not an exception)."""
    from engine import nvml

    ok, problem, fix = nvml.probe()
    if not ok:
        text = problem or "NVML unavailable"
        return TelemetrySampler(lambda i: Sample(index=i, t=0.0, error=text), [], interval_s=interval_s,
                                history_s=history_s, problem=f"{text}. Fix: {fix}" if fix else text)
    gpm = nvml.GpmTracker()
    return TelemetrySampler(lambda i: nvml.sample(i, gpm), list(range(nvml.device_count())),
                            interval_s=interval_s, history_s=history_s, source="nvml")


def simulated_sampler(source: SimulatedSource | None = None, interval_s: float = 0.5,
                      history_s: float = 300.0, profile: Any = None) -> TelemetrySampler:
    """A sampler over the simulated device (labelled simulated), shaped like ``profile``'s card."""
    source = source or SimulatedSource()
    if profile is not None:
        source.configure(profile)
    sampler = TelemetrySampler(source, list(range(source.gpu_count)), interval_s=interval_s,
                               history_s=history_s, simulated=True, source="simulated")
    sampler.sim_source = source
    return sampler
