"""Live's history longer than 30 s: ``+`` and ``-`` set how many samples a sparkline cell averages,
and the time axis under the sparklines says the span (issue 47, "Live like nvitop")."""

from __future__ import annotations

import re

import pytest

from engine.telemetry import SimulatedSource, simulated_sampler
from tests.tui.conftest import screen_lines
from tui.screens.live import SPANS, downsample


def test_downsample_averages_from_the_newest():
    assert downsample([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [1.0, 2.5, 4.5]
    assert downsample([None, None, 3.0, None], 2) == [None, 3.0]
    assert downsample([1.0, 2.0], 1) == [1.0, 2.0]


def span_s(line: str) -> float:
    m = re.search(r"last ([0-9.]+) (s|min)", line)
    assert m, line
    return float(m[1]) * (60 if m[2] == "min" else 1)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_plus_widens_the_history_and_the_axis_says_so(make, size):
    sampler = simulated_sampler(SimulatedSource(), history_s=300)
    for _ in range(600):  # five minutes of samples at 0.5 s
        sampler._poll_gpu(0)
    app = make(start_mode="live", telemetry=sampler)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()

        def axis() -> str:
            return next((r for r in screen_lines(app) if "last " in r), "")

        first = axis()
        assert "a sample every 0.5 s" in first, first
        await pilot.press("plus", "plus")
        await pilot.pause()
        wider = axis()
        assert f"a cell every {0.5 * SPANS[2]:g} s" in wider, wider
        assert span_s(wider) == SPANS[2] * span_s(first) and span_s(wider) > 30, (first, wider)
        await pilot.press("minus", "minus", "minus")
        await pilot.pause()
        assert axis() == first


def test_processes_sort_by_each_order():
    from tui.widgets.processes import PROCESS_SORTS, render_processes

    rows = [{"pid": 30, "user": "bob", "used_mib": 100.0, "command": "b"},
            {"pid": 10, "user": "amy", "used_mib": 900.0, "command": "c"},
            {"pid": 20, "user": "cid", "used_mib": 500.0, "command": "a"}]

    def pids(order: str) -> list[str]:
        lines = render_processes(rows, 120, order=order).plain.splitlines()[1:]
        return [line.split()[0] for line in lines]

    assert pids("memory") == ["10", "20", "30"] and pids("pid") == ["10", "20", "30"]
    assert pids("user") == ["10", "30", "20"] and pids("command") == ["20", "30", "10"]
    assert set(PROCESS_SORTS) == {"memory", "pid", "user", "command"}


async def test_x_on_live_stops_the_run_in_flight(make):
    from tests.tui.conftest import wait_for_run, wait_until
    from tui.app import with_fields

    app = make(start_mode="run")
    app.task_spec = with_fields(app.task_spec, fault="hang", timeout_s=60)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await wait_until(pilot, lambda: app.run_active, what="the run starting")
        await pilot.press("5", "o")
        await pilot.pause()
        assert app.screen.process_order == 1
        await pilot.press("x")
        await wait_for_run(pilot, app)
        assert app.last_result.status.value == "cancelled"
