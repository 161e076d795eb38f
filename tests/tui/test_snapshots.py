"""Snapshots of every screen at 80x24 and 120x40, and in the light theme: simulated device, fixed
seeds, fixed telemetry, a fresh store per test (so run ids are stable), no clocks or host names on
screen (History's time column is pinned).

Update them after an intended change with ``pytest tests/tui --snapshot-update``."""

from __future__ import annotations

import pytest

from tests.tui.conftest import wait_for_run
from tui.app import with_fields
from tui.screen_list import MODES

SIZES = [(80, 24), (120, 40)]


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    """History shows when each run started: pinned so snapshots do not change by the minute."""
    from tui.widgets import history_rows

    monkeypatch.setattr(history_rows, "when_text", lambda created_at: "05-14 13:02")


@pytest.fixture(autouse=True)
def no_fleet_reports(monkeypatch):
    """Fleet reads the folder ``SOL_FLEET_DIR`` names: one that is not there, whatever the machine has."""
    monkeypatch.setenv("SOL_FLEET_DIR", "/nonexistent/sol-cockpit-reports")


def _ids(size):
    return f"{size[0]}x{size[1]}"


@pytest.mark.parametrize("size", SIZES, ids=_ids)
@pytest.mark.parametrize("mode", MODES)
def test_screen(snap_compare, make, mode, size):
    assert snap_compare(make(start_mode=mode), terminal_size=size)


@pytest.mark.parametrize("mode", MODES)
def test_screen_light(snap_compare, make, mode):
    assert snap_compare(make(start_mode=mode, theme="light"), terminal_size=(80, 24))


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_help_overlay(snap_compare, make, theme):
    assert snap_compare(make(start_mode="run", theme=theme), terminal_size=(80, 24), press=["question_mark"])


def test_run_result_light(snap_compare, make):
    app = make(start_mode="run", theme="light")

    async def run_task(pilot):
        await pilot.press("r")
        await wait_for_run(pilot, app)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_task)


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_run_result(snap_compare, make, size):
    app = make(start_mode="run")

    async def run_task(pilot):
        await pilot.press("r")
        await wait_for_run(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=run_task)


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_troubleshoot_after_fault(snap_compare, make, size):
    app = make(start_mode="run")

    async def fail_then_diagnose(pilot):
        app.task_spec = with_fields(app.task_spec, fault="illegal_address")
        await pilot.press("r")
        await wait_for_run(pilot, app)
        await pilot.press("6")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=fail_then_diagnose)


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_history_after_two_runs(snap_compare, make, size):
    app = make(start_mode="run")

    async def two_runs(pilot):
        await pilot.press("r")
        await wait_for_run(pilot, app)
        app.task_spec = with_fields(app.task_spec, memory_pipelining=2)
        await pilot.press("r")
        await wait_for_run(pilot, app, runs=2)
        await pilot.press("7")
        await pilot.pause(0.3)
        await pilot.press("c")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=two_runs)


def test_run_roofline_narrow(snap_compare, make):
    """At 80x24 the roofline is behind p: it takes the report's place, under the badge."""
    app = make(start_mode="run")

    async def run_and_plot(pilot):
        await pilot.press("r")
        await wait_for_run(pilot, app)
        await pilot.press("p")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_and_plot)


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_run_suspect_with_measured_ceilings(snap_compare, make, size):
    """A GPU-like result (fabricated) run throttled beside another process, on a calibrated
    machine: the badge says suspect and why; the roofline has both pairs of roofs."""
    from tests.tui.test_validity_roofline import THROTTLED, fabricated
    from tui.screens.run import RunScreen

    app = make(start_mode="run")

    async def show(pilot):
        app.screen.post_message(RunScreen.Finished(fabricated(THROTTLED, measured=True)))
        await pilot.pause()
        if size[0] < 110:
            await pilot.press("p")
        else:  # the summary of a GPU run is longer: the badge and the whole roofline in view
            app.screen.query_one("#run-body").scroll_end(animate=False)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=show)


def test_live_with_processes(snap_compare, make):
    from tests.tui.conftest import wait_until
    from tests.tui.test_live_processes import fake_processes, gpu_sampler

    app = make(start_mode="live", telemetry=gpu_sampler())

    async def list_them(pilot):
        app.screen.process_source = fake_processes
        app.screen.refresh_view()
        await wait_until(pilot, lambda: app.screen.process_rows.get(0), what="the process list")
        app.screen.refresh_view()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=list_them)
