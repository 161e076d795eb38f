"""A closed terminal (SIGHUP) or SIGTERM stops `tui bench` and `tui soak` with a record of the
cancelled run in the store, not nothing (issue 47, defect 19)."""

from __future__ import annotations

import os
import signal
import threading

from engine import ResultStore
from tui.cli.main import main


def _hang_up_once_running(monkeypatch, module, name):
    real = getattr(module, name)

    def running(*args, **kwargs):
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGHUP)).start()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, running)


def test_a_hung_up_bench_stores_its_cancelled_run(monkeypatch, capsys):
    import tui.cli.bench as bench

    monkeypatch.setenv("SOL_SIM_DELAY", "30")
    _hang_up_once_running(monkeypatch, bench, "run_prepared")
    assert main(["bench", "--backend", "sim", "--no-peers"]) == 128 + signal.SIGHUP
    runs = ResultStore().list()
    assert [(r.status, r.kind) for r in runs] == [("cancelled", "bench")]
    assert f"stored as run {runs[0].id}" in capsys.readouterr().err


def test_a_hung_up_soak_stores_its_cancelled_soak(monkeypatch, capsys):
    import engine.soak

    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "1")
    _hang_up_once_running(monkeypatch, engine.soak, "run_soak")
    assert main(["soak", "--backend", "sim", "--duration", "60s"]) == 128 + signal.SIGHUP
    runs = ResultStore().list()
    assert [(r.status, r.kind) for r in runs] == [("cancelled", "soak")]
