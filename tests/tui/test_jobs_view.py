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
