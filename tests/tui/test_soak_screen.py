"""The Soak screen (key 9): a soak on the simulated device runs in a worker, its series reaches the
plot, the summary shows; bad input is named and runs nothing; a cancel (or quitting) stops the
engine process. The Live screen lists every GPU on one row each when there are several."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Static

from engine.telemetry import SimulatedSource, simulated_sampler
from tests.tui.conftest import wait_until
from tests.unit.test_multi_device import child_pids
from tui.screens.live import render_overview
from tui.screens.soak import SoakScreen
from tui.widgets.soak_plot import SoakPlot, thin


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "20")


async def open_soak(pilot, app, duration: str, verify: str = "2s") -> SoakScreen:
    await pilot.press("9")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, SoakScreen)
    screen.query_one("#soak-duration", Input).value = duration
    screen.query_one("#soak-verify", Input).value = verify
    return screen


async def test_soak_runs_plots_and_summarises(make) -> None:
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_soak(pilot, app, "20s")
        await pilot.press("r")
        await wait_until(pilot, lambda: screen.summary is not None, 30, "the soak's summary")
        s = screen.summary
        assert s.ok and s.simulated and s.windows == 80 and s.verifications >= 10
        await pilot.pause(0.6)
        plot = screen.query_one(SoakPlot)
        assert len(plot.series) == 80 and plot.series[-1]["t_s"] == pytest.approx(20.0)
        text = str(screen.query_one("#soak-summary", Static).render())
        assert "OK" in text and "SIMULATED" in text and "drift" in text
        assert app.busy_with() == [] and child_pids() == []
        assert app.store.soak_series(s.run_id)[-1]["t_s"] == pytest.approx(20.0)


async def test_bad_duration_is_named_and_runs_nothing(make) -> None:
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_soak(pilot, app, "0")
        await pilot.press("r")
        await pilot.pause()
        status = str(screen.query_one("#soak-status", Static).render())
        assert "duration='0': must be more than 0 s" in status
        assert not screen.running and app.busy_with() == []


async def test_cancel_stops_the_engine_process(make, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "1")
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_soak(pilot, app, "10m")
        await pilot.press("r")
        await wait_until(pilot, lambda: len(screen.series) >= 2, 30, "the first windows")
        assert app.busy_with() == ["a soak"]
        await pilot.press("x")
        await wait_until(pilot, lambda: screen.summary is not None, 15, "the cancelled soak's summary")
        assert screen.summary.status == "cancelled" and not screen.running
        assert child_pids() == []


def test_plot_thins_long_series() -> None:
    series = [{"t_s": k * 0.25, "ms": 0.1} for k in range(1, 5001)]
    out = thin(series, 600)
    assert len(out) == 600 and out[-1] is series[-1] and out[0] is series[0]


def test_live_overview_lists_every_gpu() -> None:
    sampler = simulated_sampler(SimulatedSource(gpu_count=3), history_s=10)
    sampler.poll_once()
    lines = render_overview(sampler.latest()).plain.splitlines()
    assert lines[0].startswith("GPU") and [ln.split()[0] for ln in lines[1:]] == ["0", "1", "2"]
    assert all("MHz" not in ln and "ok" in ln for ln in lines[1:])


async def test_live_screen_shows_every_simulated_gpu(make, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_COCKPIT_SIM_DEVICES", "3")
    app = make(telemetry=None, start_mode="live")
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause()
        app.screen.refresh_view()
        text = str(app.screen.query_one("#live-gpus", Static).render())
        assert "GPU 2 SIMULATED" in text and text.startswith("GPU  state")
