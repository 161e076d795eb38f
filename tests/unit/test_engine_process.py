"""The engine process: stages and events, faults isolated, timeout and cancel, next run works."""

import threading
import time

from engine.events import ProgressEvent, StageEvent
from engine.result import RunStatus
from engine.runner import prepare, run_prepared
from engine.store import ResultStore
from engine.task import TaskSpec


def _run(fault="none", timeout_s=60.0, cancel=None, events=None, **kw):
    task = TaskSpec(backend="sim", iterations=20, warmup=2, fault=fault, timeout_s=timeout_s, **kw)
    prep = prepare(task)
    return run_prepared(prep, on_event=(events.append if events is not None else None), cancel=cancel)


def test_stages_in_order_with_progress():
    events = []
    res = _run(events=events)
    assert res.status is RunStatus.ok and res.simulated
    started = [e.stage for e in events if isinstance(e, StageEvent) and e.state == "start"]
    assert started == ["compile", "load", "inputs", "warmup", "timed", "verify", "peers", "collect"]
    prog = [e for e in events if isinstance(e, ProgressEvent) and e.stage == "timed"]
    assert prog and prog[-1].done == prog[-1].total == 20


def test_compile_error_is_a_result():
    res = _run("compile_error")
    assert res.status is RunStatus.compile_error and "NVRTC_ERROR_COMPILATION" in res.error


def test_launch_faults_are_results_and_next_run_works():
    for fault, needle in (("launch_failure", "unspecified launch failure"),
                          ("illegal_address", "illegal memory access")):
        res = _run(fault)
        assert res.status is RunStatus.launch_error and needle in res.error
    assert _run().status is RunStatus.ok


def test_nan_output_is_incorrect():
    res = _run("nan")
    assert res.status is RunStatus.incorrect and res.correctness.nan_count > 0


def test_hang_is_killed_at_timeout_and_next_run_works():
    t0 = time.monotonic()
    res = _run("hang", timeout_s=4.0)
    assert res.status is RunStatus.timeout and "timed out after 4 s" in res.error
    assert time.monotonic() - t0 < 15
    assert _run().status is RunStatus.ok


def test_cancel_kills_the_run():
    cancel = threading.Event()
    threading.Timer(2.0, cancel.set).start()
    res = _run("hang", cancel=cancel)
    assert res.status is RunStatus.cancelled


def test_crashed_engine_process_is_reported(monkeypatch):
    # A worker that dies without a word (as a segfault would) must read as a crash, not hang.
    import engine.runner as runner

    monkeypatch.setattr(runner, "child_main", _die)
    res = _run()
    assert res.status is RunStatus.crashed and "exit code" in res.error


def _die(payload, conn):
    import os

    os._exit(11)


def test_results_are_stored(tmp_path):
    store = ResultStore(tmp_path / "s.sqlite")
    prep = prepare(TaskSpec(backend="sim", iterations=5, warmup=1))
    res = run_prepared(prep, store=store)
    assert res.run_id is not None and store.get(res.run_id).status is RunStatus.ok


def test_knob_changes_change_simulated_time():
    fast = _run(block_size="128x256", memory_pipelining=3)
    off = _run(block_size="128x256", memory_pipelining="off")
    unfused = _run(block_size="128x256", memory_pipelining=3, fusion=False)
    assert off.timing.median_ms > fast.timing.median_ms
    assert unfused.timing.median_ms > fast.timing.median_ms
    again = _run(block_size="128x256", memory_pipelining=3)
    assert again.timing.median_ms == fast.timing.median_ms   # deterministic for a task
