"""The tuning view (``t`` on the Tune form) on the simulated device, driven with Pilot: a tune to the
end, cancel, sort, apply the best knobs, and a snapshot of the finished view."""

from __future__ import annotations

import re
import time

import pytest
from textual.widgets import DataTable, Input

from tests.tui.test_flows import text_of
from tui.app import with_fields
from tui.screens.tune_run import TuneRunScreen
from tui.widgets.tune_plot import TunePlot
from tui.widgets.tune_table import SORTS, best_entry, progress_text, sort_key, trial_label

SIZES = [(80, 24), (120, 40)]


def _ids(size):
    return f"{size[0]}x{size[1]}"


async def start_tune(pilot, app) -> TuneRunScreen:
    """From the Tune form: leave any field, press t (the view opens idle), r, and return the view."""
    await pilot.press("escape", "t")
    await pilot.pause()
    assert isinstance(app.screen, TuneRunScreen), "t did not open the tuning view"
    await pilot.press("r")
    await pilot.pause()
    return app.screen


@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_t_opens_the_view_idle_so_budget_and_regime_can_be_set_first(make, size):
    """Defect 16: t started a 60 s tune before the budget and the regime could be set."""
    app = make(start_mode="tune")
    async with app.run_test(size=size) as pilot:
        await pilot.press("t")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, TuneRunScreen) and screen.state == "idle" and "tune" not in app.work
        assert "r starts a tune" in text_of(app, "#tr-progress")
        screen.query_one("#tr-budget", Input).focus()
        await pilot.press("ctrl+a", "ctrl+k", "5", "escape", "r")
        await pilot.pause(0.3)
        assert screen.state in ("running", "done") and screen.budget_s == 5


async def wait_for_tune(pilot, screen: TuneRunScreen, timeout_s: float = 60.0,
                        seen: list[str] | None = None) -> None:
    """Wait until the tune's result is in and the view has drawn it; ``seen``: the progress lines
    drawn meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        if seen is not None and screen.state == "running":
            seen.append(str(screen.query_one("#tr-progress").content))
        if screen.result is not None:
            await pilot.pause(0.3)
            return
    raise AssertionError(f"the tune did not finish in time (state {screen.state})")


def first_row(screen: TuneRunScreen) -> dict:
    table = screen.query_one("#tr-table", DataTable)
    key = table.coordinate_to_cell_key((0, 0)).row_key.value
    return next(e for e in screen.entries if str(e["seq"]) == key)


async def test_t_with_an_invalid_form_does_not_tune(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#f-shape", Input).value = "m=0,n=2560,k=2560"
        await pilot.pause()
        await pilot.press("escape", "t")
        await pilot.pause()
        assert not any(isinstance(s, TuneRunScreen) for s in app.screen_stack)
        assert "shape" in text_of(app, "#tune-status")
        assert any("fix them before tuning" in n.message for n in app._notifications)


@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_a_tune_runs_to_completion(make, size):
    app = make(start_mode="tune")
    async with app.run_test(size=size) as pilot:
        screen = await start_tune(pilot, app)
        seen: list[str] = []
        await wait_for_tune(pilot, screen, seen=seen)
        res = screen.result
        assert res.status == "ok" and res.simulated and res.best is not None and res.saved
        assert screen.state == "done"
        table = screen.query_one("#tr-table", DataTable)
        assert table.row_count == len(res.trials) + len(res.skipped) > 10
        assert_steady_denominators(seen)
        progress = text_of(app, "#tr-progress")
        assert progress.startswith("done") and f"{len(res.trials)} of {res.total} candidates timed" in progress
        assert f"best {res.best.median_ms:.4f} ms ({res.best.key})" in progress
        assert "SIMULATED" in text_of(app, "#tr-head")
        # the best row is marked (and first, in the default sort by time)
        assert first_row(screen)["median_ms"] == res.best.median_ms
        marked = [r for r in range(table.row_count) if "★" in str(table.get_row_at(r)[0])]
        assert marked == [0]
        # skipped candidates are listed with their reason
        skipped = [table.get_row_at(r)[4].plain for r in range(table.row_count)
                   if table.get_row_at(r)[4].plain.startswith("skipped")]
        assert len(skipped) == len(res.skipped) and all(": " in s for s in skipped)
        plot = screen.query_one("#tr-plot", TunePlot)
        assert len(plot.points) == sum(1 for t in res.trials if t.correct)
        best_n = next(i + 1 for i, t in enumerate(res.trials) if t.key == res.best.key)
        assert plot.best == (best_n, res.best.median_ms)
        labels = [label for label, _ in plot.lines]
        assert labels[0] == f"default {res.default.key}" and set(res.peers) <= set(labels)
        assert dict(plot.lines)["cublas_gemm_beta1"] == pytest.approx(res.peers["cublas_gemm_beta1"]["median_ms"])


def assert_steady_denominators(lines: list[str]) -> None:
    """Defect 16: the running count's denominator grew (48/140 -> 168/187) as the search added
    variations. Each step of the search now counts its own candidates, known when it starts: within
    a step the denominator holds and the count never goes back."""
    steps: dict[str, tuple[int, int]] = {}
    for line in lines:
        assert line.startswith("running · "), line
        m = re.match(r"running · ([a-z/ 0-9]+): (\d+)/(\d+) · \d+ timed", line)
        if m is None:  # before the first trial lands
            assert "/" not in line.split(",")[0], line
            continue
        name, done, total = m.group(1), int(m.group(2)), int(m.group(3))
        assert done <= total, line
        if name in steps:
            assert total == steps[name][1] and done >= steps[name][0], (steps[name], line)
        steps[name] = (done, total)
    assert "tiles/stages" in steps, lines[-5:]


def test_the_running_line_counts_the_step_not_the_growing_total():
    """Defect 16: the denominator was the candidates known so far, which the rounds of variations
    grow; the running line counts the step's own candidates and the candidates timed."""
    best = {"block_size": "128x128", "memory_pipelining": 5, "schedule": {}, "status": "ok", "median_ms": 0.14412}
    line = progress_text("running", ("variations round 2", 3, 8), 161, 166, best, 11.2, 60, None).plain
    assert line.startswith("running · variations round 2: 3/8 · 161 timed, best 0.1441 ms")
    assert "166" not in line
    assert progress_text("done", None, 166, 166, best, 13, 60, None).plain.startswith(
        "done · 166 of 166 candidates timed")


async def test_x_cancels_and_keeps_what_was_measured(make, monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.05")
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        deadline = time.monotonic() + 30
        while len(screen.entries) < 3 and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert screen.state == "running" and len(screen.entries) >= 3
        await pilot.press("x")
        assert screen.state == "cancelled"  # at once, before the engine process has gone
        await wait_for_tune(pilot, screen)
        res = screen.result
        assert res.status == "cancelled" and 3 <= len(res.trials) < res.total
        assert screen.query_one("#tr-table", DataTable).row_count == len(res.trials) + len(res.skipped)
        assert text_of(app, "#tr-progress").startswith("cancelled")
        assert len(app.store.trials(res.tune_id)) == len(res.trials)  # what was measured is stored


async def test_a_applies_the_best_knobs_and_the_form_shows_them(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(120, 40)) as pilot:
        app.task_spec = with_fields(app.task_spec, shape={"m": 1024, "n": 2560, "k": 2560})
        app.screen.refresh_view()
        await pilot.pause()
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        best = screen.result.best
        assert best.schedule, "this shape's best sets a schedule choice (the sim's model)"
        await pilot.press("a")
        task = app.task_spec
        assert (str(task.block_size), task.memory_pipelining, task.schedule) == (
            best.block_size, best.memory_pipelining, best.schedule)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TuneRunScreen)
        form = app.screen
        assert form.query_one("#f-block_size", Input).value == best.block_size
        assert form.query_one("#f-memory_pipelining", Input).value == str(best.memory_pipelining)
        assert form.query_one("#f-schedule", Input).value == ",".join(f"{k}={v}" for k, v in best.schedule.items())
        assert app.task_spec == task  # the form took the applied task as it is
        assert "valid" in text_of(app, "#tune-status")


async def test_the_schedule_field_reaches_the_task(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#f-schedule", Input).value = "raster=m"
        await pilot.pause()
        assert app.task_spec.schedule == {"raster": "m"}
        app.screen.query_one("#f-schedule", Input).value = "raster"
        await pilot.pause()
        assert "schedule" in text_of(app, "#tune-status") and app.task_spec.schedule == {"raster": "m"}


async def test_s_cycles_the_sort_order(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        assert screen.sort == "time"
        assert first_row(screen) is best_entry(screen.entries)
        await pilot.press("s")
        assert screen.sort == "knobs"
        assert first_row(screen) is min(screen.entries, key=sort_key("knobs"))
        assert first_row(screen) is not best_entry(screen.entries)
        await pilot.press("s")
        assert screen.sort == "status" and first_row(screen)["status"] == "ok"
        await pilot.press("s")
        assert screen.sort == "order"
        assert first_row(screen)["default"] and first_row(screen)["n"] == 1  # the planner's choice goes first
        await pilot.press("s")
        assert screen.sort == SORTS[0]
        await pilot.click("#tr-table", offset=(10, 0))  # the knobs header
        await pilot.pause()
        assert screen.sort == "knobs"


async def test_escape_cancels_a_running_tune_and_goes_back(make, monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.05")
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        await pilot.pause(0.5)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TuneRunScreen) and screen._cancel.is_set()


async def test_every_binding_of_the_view_has_a_description(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        commands = {c.title for c in app.get_system_commands(screen)}
        for b in TuneRunScreen.BINDINGS:
            assert b.description and any(c.startswith(b.description) for c in commands), b
        await wait_for_tune(pilot, screen)


def test_progress_line_reads_as_the_issue_asks():
    best = {"block_size": "128x128", "memory_pipelining": 5, "schedule": {}, "status": "ok", "median_ms": 0.14412}
    text = progress_text("running", ("tiles/stages", 12, 130), 12, 130, best, 14.2, 60, "128x80/5").plain
    assert text == ("running · tiles/stages: 12/130 · 12 timed, best 0.1441 ms (128x128/5), elapsed 14 s / 60 s, "
                    "timing 128x80/5")
    assert trial_label({**best, "schedule": {"consumers": "pingpong"}}) == "128x128/5 consumers=pingpong"


@pytest.mark.parametrize("size", [(80, 24)], ids=_ids)
def test_snapshot_of_a_finished_tune(snap_compare, make, size):
    app = make(start_mode="tune")

    async def tune_to_the_end(pilot):
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        screen.result.elapsed_s = 12.0  # the wall time is the one thing that differs run to run
        screen.refresh_view()
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=tune_to_the_end)


async def test_a_task_the_engine_refuses_is_a_message(make, monkeypatch):
    from engine import InputError
    from tui.screens import tune_run

    def refuse(task, profile_name=None, **kwargs):
        raise InputError("BLOCK_SIZE=64x80: no stage count fits", fix="pick another BLOCK_SIZE")

    monkeypatch.setattr(tune_run, "tune", refuse)
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        await pilot.pause(0.3)
        assert screen.state == "not tuned" and app.is_running
        progress = text_of(app, "#tr-progress")
        assert "no stage count fits" in progress and "fix: pick another BLOCK_SIZE" in progress
        await pilot.press("a")  # nothing to apply: a message, not a crash
        assert app.is_running and app.task_spec.block_size is None


async def test_budget_out_of_range_is_refused(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        first = screen.result
        screen.query_one("#tr-budget", Input).value = "0"
        await pilot.press("r")
        await pilot.pause()
        assert screen.result is first and screen.state == "done"
        assert any("budget" in n.message for n in app._notifications)


async def test_f_filters_the_candidates(make):
    """f cycles all -> ok -> failed -> skipped: the table shows exactly the entries of that kind."""
    from tui.widgets.tune_table import FILTERS, keep

    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        table = screen.query_one("#tr-table", DataTable)
        assert screen.filter == "all" and table.row_count == len(screen.entries)
        for mode in FILTERS[1:]:
            await pilot.press("f")
            await pilot.pause(0.3)
            assert screen.filter == mode
            want = {str(e["seq"]) for e in screen.entries if keep(mode, e)}
            assert {table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)} == want
            assert f"show: {mode}" in text_of(app, "#tr-sort")
        assert {e["status"] for e in screen.entries} & {"ok", "skipped"}  # the filters had rows to split
        await pilot.press("f")
        assert screen.filter == "all"


def test_filters_partition_the_finished_entries():
    from tui.widgets.tune_table import keep

    entries = [{"status": s} for s in ("ok", "incorrect", "compile_error", "skipped", "timeout", "ok")]
    assert [keep("ok", e) for e in entries] == [True, False, False, False, False, True]
    assert [keep("failed", e) for e in entries] == [False, True, True, False, True, False]
    assert [keep("skipped", e) for e in entries] == [False, False, False, True, False, False]
    assert all(keep("all", e) for e in entries)
