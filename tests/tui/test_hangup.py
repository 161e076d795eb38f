"""Closing the terminal (SIGHUP) or SIGTERM ends the cockpit as q does (issue 47, defect 19): the
preferences are saved and the run in flight is cancelled and stored, not lost with the process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from engine import ResultStore
from tests.tui.conftest import fixed_sampler, wait_until
from tui.preferences import tomllib


def test_a_signal_ignored_before_stays_ignored():
    from tui.app import stop_on_signals

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert signal.SIGHUP not in stop_on_signals(object())  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGHUP, old)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


async def test_a_hang_up_saves_the_preferences_and_stores_the_cancelled_run():
    from tui.app import app_from_command_line, stop_on_signals, with_fields

    app = app_from_command_line(["--backend", "sim", "--screen", "run"], telemetry=fixed_sampler(),
                                start_telemetry=False, checks_on_start=False)
    app.task_spec = with_fields(app.task_spec, fault="hang", timeout_s=60, iterations=77)
    replaced = stop_on_signals(app)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("r")
            await wait_until(pilot, lambda: app.run_active, what="the run starting")
            await pilot.pause(1.0)
            os.kill(os.getpid(), signal.SIGHUP)
            await pilot.pause(0.5)
        assert app.return_code == 128 + signal.SIGHUP
    finally:
        for sig, handler in replaced.items():
            signal.signal(sig, handler)
    saved = tomllib.loads((Path(os.environ["SOL_COCKPIT_CONFIG_DIR"]) / "cockpit.toml").read_text())
    assert saved["task"]["iterations"] == 77 and saved["screen"] == "run"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not ResultStore().list():
        time.sleep(0.2)
    assert [(r.status, r.kind) for r in ResultStore().list()] == [("cancelled", "bench")]


async def test_applied_best_knobs_are_not_pinned_in_the_saved_task():
    """Defect 19: `a` pinned the tuned knobs into the saved task; after a restart they read
    '(knobs: task)' and stayed when the shape changed. The tuning cache chooses them now."""
    from textual.widgets import DataTable

    from tests.tui.test_tune_run import start_tune, wait_for_tune
    from tui.app import app_from_command_line, with_fields

    def cockpit(*argv):
        return app_from_command_line(["--backend", "sim", *argv], telemetry=fixed_sampler(),
                                     start_telemetry=False, checks_on_start=False)

    app = cockpit("--screen", "tune")
    async with app.run_test(size=(120, 40)) as pilot:
        app.task_spec = with_fields(app.task_spec, shape={"m": 1024, "n": 2560, "k": 2560})
        app.screen.refresh_view()
        await pilot.pause()
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        best = screen.result.best
        await pilot.press("a")
        assert str(app.task_spec.block_size) == best.block_size  # this session: applied, shown
        screen.query_one("#tr-table", DataTable).focus()
        await pilot.press("escape", "q")
    saved = tomllib.loads((Path(os.environ["SOL_COCKPIT_CONFIG_DIR"]) / "cockpit.toml").read_text())
    assert saved["task"]["shape"] == {"m": 1024, "n": 2560, "k": 2560}
    assert not {"block_size", "memory_pipelining", "schedule"} & set(saved["task"])
    again = cockpit()
    assert again.task_spec.block_size is None  # the planner's tuned lookup picks them, at any shape
