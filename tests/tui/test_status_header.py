"""The one-line status header (``tui.widgets.status_line``): on every screen, one row at 80x24 and
120x40, the device (SIM labelled), the profile, a gauge of the GPU in use from the sampled
telemetry, and the last run labelled with its id. Defect 14: the no-GPU text took 3 of 24 rows, was
cut mid-sentence, and toasts repeated it."""

from __future__ import annotations

import pytest

from engine.errors import BackendUnavailable
from tests.tui.conftest import screen_lines, wait_for_run
from tui.screen_list import MODES
from tui.widgets.status_line import HeaderFacts, render_status

SIZES = [(80, 24), (120, 40)]
PROBLEM = ("no NVIDIA driver found: NVML library libnvidia-ml.so.1 could not be loaded (NVML Shared Library "
           "Not Found). Fix: install the NVIDIA driver on the host; in a container run with --gpus all")


def _facts(**kw) -> HeaderFacts:
    base = dict(device="sim", profile="h100-sxm", gpu_state="ok", util_pct=41.0, power_w=312.0,
                sm_clock_mhz=1755.0, last_run="run #24 OK")
    return HeaderFacts(**{**base, **kw})


def test_the_header_reads_as_the_issue_asks():
    line = render_status(_facts(), 120).plain
    assert line.startswith(" SIM ") and "h100-sxm" in line and "run #24 OK" in line
    assert "GPU0 ▕" in line and "41 % 312 W 1755 MHz" in line


@pytest.mark.parametrize("width", [20, 40, 60, 80, 120, 200])
def test_the_header_is_one_line_that_fits_and_keeps_the_device(width):
    for facts in (_facts(), _facts(work="run + tune"), _facts(device="cuda", gpu_state="not answering"),
                  _facts(device="none", problem=PROBLEM), _facts(profile="x" * 300)):
        line = render_status(facts, width)
        assert "\n" not in line.plain and line.cell_len <= width, (width, line.plain)
        assert line.plain.strip().split()[0] in ("SIM", "GPU", "NO"), line.plain


def test_narrow_headers_drop_clocks_and_power_before_the_run():
    line = render_status(_facts(), 50).plain
    assert "run #24 OK" in line and "MHz" not in line and "SIM" in line


def test_no_gpu_keeps_the_key_that_fixes_it_whole_at_80_columns():
    line = render_status(_facts(device="none", problem=PROBLEM), 80).plain
    assert line.startswith(" NO GPU ") and "S uses the SIMULATED device" in line and line.endswith("…")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("mode", MODES)
async def test_every_screen_shows_the_header_on_its_first_row(make, mode, size):
    app = make(start_mode=mode)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        rows = screen_lines(app)
        assert rows[0].startswith(" SIM ") and "h100-sxm" in rows[0] and "GPU0" in rows[0], rows[0]
        assert "%" in rows[0] and "no run yet" in rows[0], rows[0]
        assert rows[1].lstrip().startswith("1 "), "the screens' bar is the second row"


async def test_the_header_names_the_run_in_flight_then_its_id_and_status(make, monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.3")
    app = make(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await pilot.pause()
        assert "run in flight" in app.screen.query_one("#status").render().plain  # type: ignore[attr-defined]
        await wait_for_run(pilot, app)
        app.screen.refresh_status()
        await pilot.pause()
        rid = app.last_result.run_id
        assert f"run #{rid} OK" in screen_lines(app)[0]
        await pilot.press("7")
        await pilot.pause()
        assert f"run #{rid} OK" in screen_lines(app)[0], "the header is on every screen"


async def test_no_gpu_takes_one_row_and_no_toast_repeats_it(make, monkeypatch):
    from tui import app as app_mod

    def no_driver(requested, device=0):
        raise BackendUnavailable(PROBLEM)

    monkeypatch.setattr(app_mod, "choose_backend", no_driver)
    app = make(backend="cuda", start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        rows = screen_lines(app)
        assert rows[0].startswith(" NO GPU ") and "S uses the SIMULATED device" in rows[0]
        assert rows[1].lstrip().startswith("1 "), "the no-GPU text took more than one row"
        await pilot.press("t", "r")
        await pilot.pause(1.0)
        await pilot.press("escape", "4", "r")
        await pilot.pause(1.0)
        toasts = [n.message for n in app._notifications]
        assert not any("no NVIDIA driver" in t or "libnvidia-ml" in t for t in toasts), toasts
        await pilot.press("question_mark")
        await pilot.pause()
        from tests.tui.test_flows import text_of

        assert "libnvidia-ml.so.1" in " ".join(text_of(app, "#help-keys").split())


async def test_no_toast_covers_the_quit_question(make, monkeypatch):
    """Defect 14: a toast once covered the quit dialog."""
    monkeypatch.setenv("SOL_SIM_DELAY", "0.6")
    app = make(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await pilot.pause()
        app.notify("a long toast " * 20, timeout=30)
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert type(app.screen).__name__ == "ConfirmQuitScreen"
        assert not app._notifications, [n.message for n in app._notifications]
        assert "Quit the cockpit?" in " ".join(screen_lines(app))
        await pilot.press("y")
