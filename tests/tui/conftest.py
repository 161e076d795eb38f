"""Cockpit fixtures: a fresh store and dirs per test, the simulated device without delays, and a
fixed telemetry source (polled once, never on a clock) so screens and snapshots are deterministic."""

from __future__ import annotations

import pytest

from engine.telemetry import SimulatedSource, simulated_sampler


@pytest.fixture(autouse=True)
def cockpit_env(tmp_path, monkeypatch):
    """The root conftest isolates dirs and env per test; here the working dir moves there too, so
    task files saved from the Tune screen land in the test's own folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fixed_sampler():
    """Simulated telemetry, filled with a few deterministic polls and never started."""
    sampler = simulated_sampler(SimulatedSource(), history_s=60)
    for _ in range(6):
        sampler._poll_gpu(0)
    return sampler


@pytest.fixture
def make():
    """make(**kwargs) -> a cockpit on the simulated device with fixed telemetry and no auto checks."""
    from tui.app import make_app

    def _make(**kwargs):
        kwargs.setdefault("backend", "sim")
        kwargs.setdefault("telemetry", fixed_sampler())
        kwargs.setdefault("start_telemetry", False)
        kwargs.setdefault("checks_on_start", False)
        return make_app(**kwargs)

    return _make


async def wait_for_run(pilot, app, runs: int = 1, timeout_s: float = 30.0) -> None:
    """Wait until ``runs`` runs have finished this session."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if app.runs_finished >= runs and not app.run_active:
            await pilot.pause()
            return
    raise AssertionError(f"{runs} run(s) did not finish in time ({app.runs_finished} did)")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run ``async def`` tests with asyncio.run (no pytest-asyncio needed)."""
    import asyncio
    import inspect

    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


def screen_lines(app) -> list[str]:
    """What the terminal shows now, one string per row (the compositor's output as plain text)."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def wait_until(pilot, condition, timeout_s: float = 10.0, what: str = "the condition") -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout_s} s")
        await pilot.pause(0.05)
