"""The engine server that engine processes are forked from (ADR-0009): it holds no CUDA state and
runs no thread, so a fork of it is as clean as a fresh interpreter; and a job forked from it sees
what a spawned one saw: the caller's environment, directory and engine, and its life bound to the
caller's."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from engine.process import preload_modules, run_in_engine_process, start_engine_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CUDA_MODULES = ("cupy", "cupy_backends", "pynvml", "textual")
CUDA_LIBRARIES = ("libcuda.", "libnvidia-ml", "libcudart", "libnvrtc", "cupy")


def _report(payload, conn) -> None:
    """An engine process's entry: what it imported, where it runs, and who its parent is."""
    import engine

    conn.send({"type": "result", "result": {
        "modules": sorted(sys.modules), "ppid": os.getppid(), "threads": threading.active_count(),
        "env": os.environ.get(payload.get("env", ""), None), "cwd": os.getcwd(), "engine": engine.__file__}})


def _hang(payload, conn) -> None:
    conn.send({"type": "event", "event": {"kind": "log", "level": "info", "message": "up"}})
    time.sleep(60)


def _run(entry, payload=None):
    out = run_in_engine_process(entry, payload or {}, 60)
    assert out.status == "ok", out
    return out.result


def test_the_server_holds_no_cuda_state_and_runs_no_thread():
    pid = start_engine_server()
    assert pid is not None and start_engine_server() == pid  # idempotent
    assert _run(_report)["ppid"] == pid  # the server has imported its modules before it forks
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert not [lib for lib in CUDA_LIBRARIES if lib in maps], "the engine server loaded a CUDA library"
    assert len(list(Path(f"/proc/{pid}/task").iterdir())) == 1
    for mod in preload_modules():
        assert not mod.startswith("engine.backends.cuda")


def test_a_job_is_forked_from_the_server_with_the_engine_imported_and_no_cuda():
    res = _run(_report)
    assert res["ppid"] == start_engine_server()
    assert set(preload_modules()) <= set(res["modules"])  # imported by the server, not by this job
    bad = [m for m in res["modules"] if m.split(".")[0] in CUDA_MODULES or m.startswith("engine.backends.cuda")]
    assert bad == []
    assert res["threads"] == 1


def test_a_job_sees_the_callers_environment_directory_and_engine(tmp_path, monkeypatch):
    import engine

    start_engine_server()
    name, value = "SOL_ENGINE_SERVER_TEST", uuid.uuid4().hex
    monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    res = _run(_report, {"env": name})
    assert res["env"] == value and res["cwd"] == str(tmp_path)
    assert res["engine"] == engine.__file__
    monkeypatch.delenv(name)
    assert _run(_report, {"env": name})["env"] is None


def test_a_job_counts_as_a_child_while_it_runs():
    """The tests that say "nothing left running" look through the server at its children."""
    from tests.unit.test_multi_device import child_pids

    cancel = threading.Event()
    seen: list[list[int]] = []
    t = threading.Thread(target=run_in_engine_process, args=(_hang, {}, 60),
                         kwargs={"on_event": lambda ev: seen.append(child_pids()), "cancel": cancel})
    t.start()
    try:
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        cancel.set()
        t.join(10)
    assert seen and len(seen[0]) == 1
    deadline = time.monotonic() + 5
    while child_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() == []
