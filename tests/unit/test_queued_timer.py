"""QueuedTimer's order of work, with a fake CuPy that logs it (no GPU needed): the held window
covers only the queueing (events made before the hold), the probe times the same per-launch work as
the timed runs (an event pair around each launch), and no garbage collection runs while launches
are queued."""
from __future__ import annotations

import gc
from typing import Any

import pytest

pytest.importorskip("cupy")


class _Log(list):
    pass


def _fake_cp(log: _Log, done_after_hold: bool = False) -> Any:
    class Event:
        def __init__(self, block: bool = False, disable_timing: bool = False) -> None:
            self.hold = disable_timing
            log.append(("create", gc.isenabled()))

        def record(self) -> None:
            log.append(("record", gc.isenabled()))

        def synchronize(self) -> None:
            log.append(("sync", gc.isenabled()))

        @property
        def done(self) -> bool:
            return done_after_hold

    class Device:
        def synchronize(self) -> None:
            log.append(("device_sync", gc.isenabled()))

    class cuda:  # noqa: N801 (mirrors cupy.cuda)
        pass

    cuda.Event = Event
    cuda.Device = Device
    cuda.get_elapsed_time = staticmethod(lambda a, b: 0.01)

    class FakeCp:
        pass

    FakeCp.cuda = cuda
    return FakeCp


@pytest.fixture
def timer_mod(monkeypatch):
    from engine.backends import cuda_timer as cuda

    log = _Log()
    monkeypatch.setattr(cuda, "cp", _fake_cp(log))
    return cuda, log


def test_probe_records_an_event_pair_around_each_launch_with_gc_off(timer_mod):
    cuda, log = timer_mod
    gpu, host = cuda.QueuedTimer.probe(lambda i: log.append(("launch", gc.isenabled())), 7, 3)
    kinds = [k for k, _ in log]
    assert kinds.count("launch") == 3
    first = kinds.index("launch")
    # created before the outer start event; each launch between its own pair, as run() times them
    assert "create" not in kinds[first:]
    assert kinds[first - 1:first + 2] == ["record", "launch", "record"]
    assert all(not on for k, on in log if k in ("launch", "record"))  # gc off while queueing
    assert gc.isenabled()  # and back on after
    assert gpu == pytest.approx(0.01 / 1e3 / 3) and host >= 0


def test_held_chunk_makes_its_events_before_the_hold(timer_mod):
    cuda, log = timer_mod

    def hold(grid, block, args):
        log.append(("hold", gc.isenabled()))

    t = cuda.QueuedTimer(hold)
    times = t.run("ours", lambda i: log.append(("launch", gc.isenabled())), 4, (5e-6, 20e-6), 4)
    kinds = [k for k, _ in log]
    h = kinds.index("hold")
    assert kinds[:h].count("create") == 8  # 4 event pairs, all made before the hold
    assert kinds[h + 1:].count("create") == 1  # only the hold-done marker after it
    assert all(not on for k, on in log if k in ("hold", "launch", "record"))
    assert gc.isenabled() and len(times) == 4
    assert t.stats["held"] == ["ours"] and t.stats["held_chunks"] == 1
    assert t.stats["expired_chunks"] == 0 and t.stats["expired"] == []


def test_an_expired_hold_is_counted_and_named(monkeypatch):
    from engine.backends import cuda_timer as cuda

    log = _Log()
    monkeypatch.setattr(cuda, "cp", _fake_cp(log, done_after_hold=True))
    t = cuda.QueuedTimer(lambda *a: None)
    t.run("cublas_gemm", lambda i: None, 6, (5e-6, 20e-6), 6)
    t.run("cublas_gemm", lambda i: None, 6, (5e-6, 20e-6), 6)
    assert t.stats["expired_chunks"] == 2 and t.stats["expired"] == ["cublas_gemm"]


def test_a_long_kernel_is_not_held(timer_mod):
    cuda, log = timer_mod
    t = cuda.QueuedTimer(lambda *a: log.append(("hold", True)))
    t.run("ours", lambda i: None, 3, (150e-6, 10e-6), 3)
    assert "hold" not in [k for k, _ in log] and t.stats["not_held"] == ["ours"]


def test_warm_syncs_and_reports_progress_every_step_then_probes_the_last(timer_mod):
    cuda, log = timer_mod
    seen: list[int] = []
    launched: list[int] = []

    def launch(i: int) -> None:
        launched.append(i)
        log.append(("launch", gc.isenabled()))

    def progress(done: int) -> None:
        seen.append(done)
        log.append(("progress", True))

    cuda.QueuedTimer(lambda *a: None).warm(launch, 12, 5, 3, progress)
    assert launched == list(range(12))  # every warm-up once, in order; the last 5 are the probe
    assert seen == [3, 6]  # of the 7 before the probe, after the 3rd and the 6th
    kinds = [k for k, _ in log]
    for p in (i for i, k in enumerate(kinds) if k == "progress"):
        assert kinds[p - 1] == "device_sync"  # progress follows the GPU, not the queue
    probe_start = kinds.index("create")
    assert kinds[:probe_start].count("launch") == 7 and kinds[probe_start:].count("launch") == 5


def test_warm_with_fewer_warmups_than_the_probe_probes_them_all(timer_mod):
    cuda, log = timer_mod
    seen: list[int] = []
    gpu, _ = cuda.QueuedTimer(lambda *a: None).warm(lambda i: None, 2, 5, 1, seen.append)
    assert seen == [] and gpu == pytest.approx(0.01 / 1e3 / 2)
    gpu, _ = cuda.QueuedTimer(lambda *a: None).warm(lambda i: None, 0, 5, 1, seen.append)
    assert gpu is None and seen == []
