"""The telemetry sampler with fake sample functions: ring buffer, states, no overlap, GPM spacing."""

from __future__ import annotations

import threading
import time

import pytest

from engine.nvml import Sample
from engine.telemetry import (
    MIN_GPM_INTERVAL_S,
    SimulatedSource,
    TelemetrySampler,
    nvml_sampler,
    simulated_sampler,
)


def fake(values: dict[int, float]):
    calls = {"n": 0}

    def sample(index: int) -> Sample:
        calls["n"] += 1
        return Sample(index=index, t=float(calls["n"]), gpu_util_pct=values[index], power_w=100.0 + index)

    return sample, calls


def test_ring_buffer_keeps_the_last_samples_per_gpu():
    fn, _ = fake({0: 10.0, 1: 90.0})
    s = TelemetrySampler(fn, [0, 1], interval_s=0.1, history_s=0.3)
    assert s.maxlen == 3
    for _ in range(5):
        s._poll_gpu(0)
        s._poll_gpu(1)
    assert len(s.history("gpu_util_pct", 0)) == 3
    assert s.history("gpu_util_pct", 1) == [90.0, 90.0, 90.0]
    snap = s.latest()
    assert [g.state for g in snap.gpus] == ["ok", "ok"]
    assert snap.gpus[1].sample.power_w == 101.0
    assert not snap.simulated


def test_latest_before_any_poll_is_waiting():
    fn, _ = fake({0: 1.0})
    snap = TelemetrySampler(fn, [0]).latest()
    assert snap.gpus[0].state == "waiting" and snap.gpus[0].sample is None


def test_a_gpu_that_stops_answering_is_a_state_not_an_exception():
    state = {"fail": False}

    def fn(index: int) -> Sample:
        if state["fail"]:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return Sample(index=index, t=0.0, gpu_util_pct=50.0)

    s = TelemetrySampler(fn, [0])
    s.poll_once()
    state["fail"] = True
    s._poll_gpu(0)
    g = s.latest().gpus[0]
    assert g.state == "not answering"
    assert "GPU_IS_LOST" in g.error
    assert g.sample.gpu_util_pct == 50.0  # the last good sample stays visible
    assert g.failures == 1
    state["fail"] = False
    s._poll_gpu(0)
    assert s.latest().gpus[0].state == "ok"


def test_sample_error_field_counts_as_not_answering():
    s = TelemetrySampler(lambda i: Sample(index=i, t=0.0, error="GPU not answering NVML"), [0])
    s.poll_once()
    assert s.latest().gpus[0].state == "not answering"


def test_polls_never_overlap_and_are_spaced_for_gpm():
    active = {"now": 0, "max": 0}
    starts: list[float] = []
    lock = threading.Lock()

    def slow(index: int) -> Sample:
        with lock:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
        starts.append(time.monotonic())
        time.sleep(0.02)
        with lock:
            active["now"] -= 1
        return Sample(index=index, t=0.0, gpu_util_pct=1.0)

    s = TelemetrySampler(slow, [0], interval_s=0.01)  # clamped to the GPM minimum
    assert s.interval_s == MIN_GPM_INTERVAL_S
    s.start()
    t = threading.Thread(target=s.poll_once)  # a concurrent caller must wait its turn
    t.start()
    time.sleep(0.45)
    s.stop()
    t.join()
    assert not s.running
    assert active["max"] == 1
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(starts) >= 2
    assert min(gaps) >= MIN_GPM_INTERVAL_S - 0.005


def test_history_rejects_unknown_metric():
    fn, _ = fake({0: 1.0})
    with pytest.raises(KeyError):
        TelemetrySampler(fn, [0]).history("bogus")


def test_simulated_source_follows_run_activity_and_is_labelled():
    s = simulated_sampler(SimulatedSource())
    s.poll_once()
    idle = s.latest().gpus[0].sample
    s.set_run_active(True)
    s._poll_gpu(0)
    busy = s.latest().gpus[0].sample
    assert s.latest().simulated and s.latest().gpus[0].simulated
    assert idle.gpu_util_pct < 10 < 90 < busy.gpu_util_pct
    assert busy.power_w > idle.power_w
    assert busy.tensor_activity_pct > 0 and idle.throttle_reasons == ["GPU idle"]


def test_simulated_source_is_deterministic():
    a, b = SimulatedSource(), SimulatedSource()
    assert [a(0) for _ in range(4)] == [b(0) for _ in range(4)]


def test_nvml_sampler_without_a_driver_reports_the_problem(monkeypatch):
    from engine import nvml

    monkeypatch.setattr(nvml, "probe", lambda: (False, "no NVIDIA driver found", "install the driver"))
    s = nvml_sampler()
    snap = s.latest()
    assert snap.gpus == () and "no NVIDIA driver" in snap.problem
    s.start()  # nothing to poll: a no-op, not an error
    assert not s.running


def test_simulated_gauges_follow_the_profile_and_the_kernel():
    """The simulated card has the profile's memory and power limit, and a memory-bound kernel shows
    DRAM busy and the tensor cores idle where a GEMM shows the opposite (so the telemetry rules and
    their knob fixes can be rehearsed on it)."""
    from engine.profiles import load_profiles
    from engine.task import TaskSpec
    from engine.telemetry import SimulatedSource, simulated_sampler

    h200 = load_profiles().get("h200")
    sampler = simulated_sampler(SimulatedSource(), profile=h200)
    idle = sampler.sim_source(0)
    assert abs(idle.mem_total_mib * 2**20 / 1e9 - 141) < 0.5 and idle.power_limit_w == 700
    sampler.set_run_active(True, TaskSpec(backend="sim"), h200)
    gemm = sampler.sim_source(0)
    sampler.set_run_active(True, TaskSpec(backend="sim", kernel="add_rmsnorm"), h200)
    norm = sampler.sim_source(0)
    assert gemm.tensor_activity_pct > 50 and gemm.tensor_activity_pct > 2 * gemm.dram_bw_util_pct
    assert norm.tensor_activity_pct == 0 and norm.dram_bw_util_pct > 50
    assert norm.mem_used_mib > 1000  # its buffers: [32768, 4096] x 4 tensors
    sampler.set_run_active(False)
    assert sampler.sim_source(0).tensor_activity_pct == 0


def test_gpu_processes_adds_user_command_and_parent(monkeypatch):
    """The Live screen's process list: NVML's rows with the user, command and parent filled in."""
    import os

    from engine import nvml, telemetry

    monkeypatch.setattr(nvml, "gpu_processes", lambda i: [{"pid": os.getpid(), "name": "python",
                                                          "kind": "compute", "used_mib": 512.0}])
    rows = telemetry.gpu_processes(0)
    assert rows and rows[0]["pid"] == os.getpid() and rows[0]["used_mib"] == 512.0
    assert rows[0]["ppid"] == os.getppid() and rows[0]["command"] and rows[0]["user"]
    monkeypatch.setattr(nvml, "gpu_processes", lambda i: None)
    assert telemetry.gpu_processes(0) is None
