"""The Live screen lists each GPU's processes (pid, user, GPU memory, command), as nvitop does, and
its sparklines carry a time scale from the sampler's interval and history."""

from __future__ import annotations

from engine.telemetry import SimulatedSource, TelemetrySampler
from tests.tui.conftest import wait_until
from tests.tui.test_flows import text_of
from tui.widgets.gauge import gauge_layout, render_gauge, time_axis, time_scale_line
from tui.widgets.processes import render_processes

ROWS = [
    {"pid": 777, "user": "bob", "used_mib": 512.0, "command": "python\nserve.py --port 80", "name": "python"},
    {"pid": 4242, "user": "alice", "used_mib": 30720.0, "command": "python train.py", "ppid": 1},
    {"pid": 9, "user": None, "used_mib": None, "command": None, "name": "Xorg"},
]


def fake_processes(index: int) -> list[dict]:
    return [dict(r) for r in ROWS]


def gpu_sampler() -> TelemetrySampler:
    """Telemetry that is not simulated (as from NVML), from the simulated source's numbers."""
    sampler = TelemetrySampler(SimulatedSource(), [0], history_s=60, source="fake")
    for _ in range(3):
        sampler._poll_gpu(0)
    return sampler


# --- renderers, without an app ------------------------------------------------------------------
def test_the_process_list_reads_like_nvitop():
    lines = render_processes(fake_processes(0), 100, own_pid=1).plain.splitlines()
    assert lines[0] == "Processes      PID  USER         GPU MEM  COMMAND"
    assert lines[1] == "              4242  alice       30.0 GiB  python train.py  (this cockpit's run)"
    assert lines[2] == "               777  bob          512 MiB  python serve.py --port 80"
    assert lines[3] == "                 9  N/A              N/A  Xorg"
    assert render_processes([], 78).plain == "Processes  none on this GPU"
    assert render_processes(None, 78, "no list here").plain == "Processes  N/A: no list here"
    assert all(len(line) <= 40 for line in render_processes(fake_processes(0), 40).plain.splitlines())


def test_the_time_axis_spans_the_sparklines():
    assert time_axis(18, 0.5, 600) == "-9 s ────┴──── now"
    assert time_axis(57, 0.5, 600) == "-28.5 s ──────────────── -14.2 s ──────────────────── now"
    assert time_axis(30, 0.5, 12) == " " * 18 + "-6 s ─┴─ now"  # a short ring: right-aligned, as the sparks are
    assert time_axis(30, 5.0, 600) == "-2.5 min ── -75 s ──────── now"
    assert time_axis(60, 5.0, 600) == "-5 min ────────────────── -2.5 min ───────────────────── now"
    assert time_axis(6, 0.5, 600) == ""
    line = time_scale_line(78, 0.5, 600)
    gauge = render_gauge("GPU util", 50.0, 100.0, "50 %", 78, history=[50.0] * 30)
    _, cells = gauge_layout(78, True)
    assert line.plain == " " * 11 + f"{'last 9 s, a sample every 0.5 s':<46} " + "-9 s ────┴──── now"
    assert len(line.plain) == len(gauge.plain) and gauge.plain.endswith("▅" * cells)


# --- the Live screen ----------------------------------------------------------------------------
async def test_live_lists_the_processes_a_provider_gives(make):
    app = make(start_mode="live", telemetry=gpu_sampler())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        screen.process_source = fake_processes
        screen.refresh_view()
        await wait_until(pilot, lambda: "python train.py" in text_of(app, "#live-gpus"), what="the process list")
        screen.refresh_view()
        text = text_of(app, "#live-gpus")
        assert "PID  USER         GPU MEM  COMMAND" in text
        assert text.index("4242  alice       30.0 GiB") < text.index("777  bob")
        assert "SIMULATED" not in text.split("Processes")[1]


async def test_live_says_when_processes_cannot_be_listed(make, monkeypatch):
    from tui.screens import live

    monkeypatch.setattr(live, "engine_process_source", lambda: None)
    app = make(start_mode="live", telemetry=gpu_sampler())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert f"Processes  N/A: {live.NO_PROCESS_LIST}" in text_of(app, "#live-gpus")
        app.screen.process_source = lambda index: None  # a driver without the query
        app.screen.refresh_view()
        await wait_until(pilot, lambda: app.screen.process_note.startswith("the driver"), what="the read")
        app.screen.refresh_view()
        assert "N/A: the driver does not report this GPU's processes" in text_of(app, "#live-gpus")


async def test_the_simulated_run_shows_its_own_process_while_active(make):
    app = make(start_mode="live")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "Processes  none on this GPU (SIMULATED)" in text_of(app, "#live-gpus")
        app.telemetry.set_run_active(True, app.task_spec, app.effective_profile())
        app.screen.refresh_view()
        text = text_of(app, "#live-gpus")
        assert f"engine run {app.task_spec.label()} [SIMULATED]" in text
        row = next(line for line in text.splitlines() if "engine run" in line)
        assert row.split()[0] == "-" and ("MiB" in row or "GiB" in row)
        app.telemetry.set_run_active(False)
        app.screen.refresh_view()
        assert "none on this GPU (SIMULATED)" in text_of(app, "#live-gpus")


async def test_the_sparklines_carry_their_time_scale(make):
    app = make(start_mode="live")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = text_of(app, "#live-gpus")
        assert "last 9 s, a sample every 0.5 s" in text and "-9 s ────┴──── now" in text
        await pilot.press("s")
        assert "a sample every" not in text_of(app, "#live-gpus")
    app = make(start_mode="live")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "last 29 s, a sample every 0.5 s" in text_of(app, "#live-gpus")
