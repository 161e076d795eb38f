"""The Jobs view (``j``): runs, tunes and soaks in flight and recent, status and elapsed; a
notification when one ends while its own screen is not shown; ``x`` cancels one in flight."""

from __future__ import annotations

import pytest

from tests.tui.conftest import screen_lines, wait_for_run, wait_until
from tui.app import with_fields
from tui.widgets.jobs_table import JobRecord, elapsed_text, ended_message


def test_elapsed_and_the_message_read_plainly():
    assert elapsed_text(4.24) == "4.2 s" and elapsed_text(185) == "3 min 05 s" and elapsed_text(3720) == "1 h 02 min"
    job = JobRecord("run", "gemm_residual 8192x2560x2560 bf16", started=0.0, ended=1.5, status="ok", detail="run #24")
    assert ended_message(job) == "run of gemm_residual 8192x2560x2560 bf16 ended: ok · run #24 (1.5 s)"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_run_that_ends_while_browsing_is_notified_and_listed(make, monkeypatch, size):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.6")
    app = make(start_mode="run")
    async with app.run_test(size=size) as pilot:
        await pilot.press("r")
        await wait_until(pilot, lambda: "run" in app.work, what="the run starting")
        await pilot.press("7")
        await pilot.pause()
        await pilot.press("j")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "JobsScreen", what="the Jobs view")
        assert "running" in " ".join(screen_lines(app))
        await wait_for_run(pilot, app)
        await pilot.pause(1.2)
        rid = app.last_result.run_id
        shown = " ".join(screen_lines(app))
        assert f"ok · run #{rid}" in shown and " s " in shown + " ", shown
        await pilot.press("escape")
        assert any(f"ended: ok · run #{rid}" in n.message for n in app._notifications) is False  # Jobs was open
        await pilot.press("4", "r")
        await wait_until(pilot, lambda: "run" in app.work, what="the second run starting")
        await pilot.press("7")
        await wait_for_run(pilot, app, runs=2)
        assert any(f"ended: ok · run #{app.last_result.run_id}" in n.message for n in app._notifications)


async def test_x_in_the_jobs_view_cancels_a_hung_run(make):
    app = make(start_mode="run")
    app.task_spec = with_fields(app.task_spec, fault="hang", timeout_s=60)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await wait_until(pilot, lambda: app.run_active, what="the run starting")
        await pilot.press("j")
        await pilot.pause()
        await pilot.press("x")
        await wait_for_run(pilot, app)
        assert app.last_result.status.value == "cancelled"
        await pilot.pause(1.2)
        assert "cancelled" in " ".join(screen_lines(app))


@pytest.fixture(scope="module")
def cli_tuned(tmp_path_factory):
    """A store in which `tui tune` (its own process, as a user starts it) noted one tune."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = tmp_path_factory.mktemp("cli-tune")
    env = dict(os.environ, SOL_COCKPIT_CONFIG_DIR=str(root / "config"), SOL_COCKPIT_DATA_DIR=str(root / "data"),
               SOL_COCKPIT_CACHE_DIR=str(root / "cache"), SOL_SIM_DELAY="0")
    store = root / "store.sqlite"
    done = subprocess.run([sys.executable, "-m", "tui.cli.main", "tune", "--backend", "sim", "--budget", "2",
                           "--store", str(store), "--top", "0"], env=env, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert done.returncode == 0, done.stderr
    return store


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_tune_started_from_the_cli_is_listed(make, cli_tuned, size):
    """Issue 47's jobs view: a tune started with `tui tune` (another process) did not show in the
    cockpit's Jobs view, which listed only the cockpit's own work."""
    from engine import ResultStore

    app = make(start_mode="run", store=ResultStore(cli_tuned))
    async with app.run_test(size=size) as pilot:
        await pilot.press("j")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "JobsScreen", what="the Jobs view")
        await wait_until(pilot, lambda: app.screen.store_jobs, what="the store's tunes")
        await pilot.pause()
        shown = " ".join(screen_lines(app))
        assert "cli tune" in shown and "gemm_residual" in shown and "done" in shown, shown
        if size[0] >= 120:
            assert "done · best" in shown, shown
        assert "0 in flight, 1 ended" in shown


def test_a_tune_without_an_end_is_running_while_its_process_lives(tmp_path, monkeypatch):
    """A tune in flight in another process lists as running with its trials so far; one whose
    process died without noting its end (killed) lists as lost, never as running."""
    import subprocess
    import sys

    from engine import ResultStore, recent_tunes, tune_jobs

    store = ResultStore(tmp_path / "store.sqlite")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(tune_jobs.os, "getpid", lambda: sleeper.pid)
        tune_jobs.started(store, "t-live", "gemm_residual 8x8x8 bf16", "tui tune")
        store.save_trial("t-live", {}, {"status": "ok"})
        monkeypatch.setattr(tune_jobs.os, "getpid", lambda: 2**22 + 1)  # above Linux's pid_max: no process
        tune_jobs.started(store, "t-dead", "gemm_residual 8x8x8 bf16", "tui tune")
        monkeypatch.undo()
        jobs = {j.tune_id: j for j in recent_tunes(store)}
        assert jobs["t-live"].status == "running" and jobs["t-live"].detail == "1 trials stored"
        assert jobs["t-dead"].status == "lost" and not jobs["t-dead"].in_flight
        assert [j.tune_id for j in recent_tunes(store, other_than_pid=sleeper.pid)] == ["t-dead"]
    finally:
        sleeper.kill()
        sleeper.wait()
