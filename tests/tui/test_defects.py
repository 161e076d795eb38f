"""The defects of "the cockpit tells the truth, fits 80x24": each test failed before its fix."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time

from textual.widgets import DataTable, Input, ProgressBar

from tests.tui.conftest import screen_lines, wait_for_run, wait_until
from tests.tui.test_flows import FAKE_RULE, text_of
from tui import diagnostics
from tui.app import with_fields
from tui.screen_list import SCREENS


def engine_processes() -> list:
    return [p for p in mp.active_children() if p.name == "sol-engine"]


# 1 -------------------------------------------------------------------------------------------
async def test_quit_during_a_hung_run_asks_then_cancels_and_exits_within_2_s(make):
    """A hung kernel (timeout far away): q asks first; y cancels the run and the cockpit is gone
    at once, engine process and worker thread included (it once stayed blank until the timeout)."""
    app = make(start_mode="run")
    app.task_spec = with_fields(app.task_spec, fault="hang", timeout_s=60)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await wait_until(pilot, lambda: app.run_active and engine_processes(), what="the run starting")
        await pilot.pause(0.5)
        await pilot.press("q")
        assert type(app.screen).__name__ == "ConfirmQuitScreen"
        assert "a run" in " ".join(screen_lines(app))
        await pilot.press("n")  # stay: the run goes on
        assert type(app.screen).__name__ == "RunScreen" and app.run_active and app.return_code is None
        await pilot.press("q")
        t0 = time.monotonic()
        await pilot.press("y")
        while (engine_processes() or not app.store.list()) and time.monotonic() - t0 < 10:
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - t0
        assert app.return_code == 0
        assert not engine_processes(), "the hung engine process was left running"
        assert [r.status for r in app.store.list()] == ["cancelled"]  # the worker thread finished
        assert elapsed < 2.0, f"quitting took {elapsed:.1f} s"


async def test_quit_during_a_tune_asks_then_cancels_it(make, monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.05")
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("escape", "t", "r")
        await wait_until(pilot, lambda: getattr(app.screen, "done", 0) >= 2, what="the tune starting")
        tune_view = app.screen
        await pilot.press("q")
        assert type(app.screen).__name__ == "ConfirmQuitScreen" and "a tune" in " ".join(screen_lines(app))
        t0 = time.monotonic()
        await pilot.press("y")
        while engine_processes() and time.monotonic() - t0 < 10:
            await asyncio.sleep(0.05)
        assert app.return_code == 0 and tune_view._cancel.is_set()
        assert not engine_processes() and time.monotonic() - t0 < 2.0


async def test_quit_without_work_in_flight_does_not_ask(make):
    app = make(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("q")
        assert app.return_code == 0


# 2 -------------------------------------------------------------------------------------------
async def test_run_refuses_an_invalid_form_with_the_forms_error(make):
    """shape m=0 on the Tune form: r on 4 Run used to run the previous valid task, silently."""
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#f-shape", Input).value = "m=0,n=2560,k=2560"
        await pilot.pause()
        problem = text_of(app, "#tune-status")
        assert "shape" in problem and "✗" in problem
        await pilot.press("escape", "4", "r")
        await pilot.pause(0.5)
        assert app.runs_finished == 0 and not app.run_active and not app.store.list()
        summary = text_of(app, "#run-summary")
        assert "Not run" in summary and "shape" in summary
        assert "r will not run" in text_of(app, "#run-task")
        await pilot.press("3")  # fixed on the form: the run goes
        app.screen.query_one("#f-shape", Input).value = "m=1024,n=2560,k=2560"
        await pilot.pause()
        await pilot.press("escape", "4", "r")
        await wait_for_run(pilot, app)
        assert app.last_result.ok and app.last_result.task.shape["m"] == 1024


async def test_a_task_set_elsewhere_replaces_the_invalid_form(make):
    """Diagnose's knob fix (or a tune's best knobs) set a valid task: runs go again."""
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#f-iterations", Input).value = "0"
        await pilot.pause()
        assert app.form_error() and "iterations" in app.form_error()
        app.task_spec = with_fields(app.task_spec, memory_pipelining=0)
        assert app.form_error() is None


# 5 -------------------------------------------------------------------------------------------
async def test_enter_on_a_failed_check_opens_that_checks_rule(make, monkeypatch):
    """Two failed checks, the cursor on the second: enter once opened the first one's rule."""
    from engine.checks.model import CheckResult

    checks = [CheckResult(id="driver.loaded", title="NVIDIA driver loaded", status="fail", detail="missing",
                          fix="install the driver", rules=["no_driver"]),
              CheckResult(id="gpu.ecc", title="No ECC errors", status="fail", detail="12 uncorrectable",
                          fix="drain the node", rules=["ecc_errors"])]
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    monkeypatch.setattr(diagnostics, "rules_for_check",
                        lambda r: [dict(FAKE_RULE, id=f"rule-of-{r.id}", title=f"rule of {r.id}")])
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.check_results == checks, what="the checks")
        await pilot.pause()
        await pilot.press("down", "enter")
        assert type(app.screen).__name__ == "TroubleshootScreen"
        await pilot.pause()
        detail = text_of(app, "#ts-detail")
        assert "rule-of-gpu.ecc" in detail and "rule-of-driver.loaded" not in detail
        await pilot.press("1", "up", "enter")  # and the other way round, the second time
        await pilot.pause()
        assert "rule-of-driver.loaded" in text_of(app, "#ts-detail")


# 8 -------------------------------------------------------------------------------------------
async def test_80_columns_keep_the_s_hint_the_footer_keys_and_the_profile(make, monkeypatch):
    from engine.errors import BackendUnavailable
    from tui import app as app_mod

    def no_driver(requested, device=0):
        raise BackendUnavailable("no NVIDIA driver found: libnvidia-ml.so.1 could not be loaded",
                                 fix="install the NVIDIA driver (550 or newer) or use --backend sim")

    monkeypatch.setattr(app_mod, "choose_backend", no_driver)
    app = make(backend="cuda", start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        for s in SCREENS:
            await pilot.press(s.key)
            await pilot.pause()
            lines = screen_lines(app)
            assert "S uses the SIMULATED device" in lines[0], s.key
            footer = lines[-1]
            for shown in ("S Use sim", "^t Theme", "? Help", "q Quit"):
                assert shown in footer, (s.key, shown, footer)
            assert footer.rstrip().endswith("q Quit"), footer  # nothing cut, nothing stray
            assert f" {app.effective_profile().name} · " in lines[0], lines[0]  # the whole name
            assert all(f"{t.key} {t.label}" in lines[1] for t in SCREENS), lines[1]  # every screen named
        await pilot.press("S")
        await pilot.pause()
        lines = screen_lines(app)
        assert "S Use sim" not in lines[-1]  # nothing to switch to any more
        assert lines[0].startswith(" SIM ") and "h100-sxm" in lines[0], lines[0]


async def test_every_screen_fits_80x24_with_help_and_quit_in_the_footer(make):
    app = make(start_mode="checklist")
    async with app.run_test(size=(80, 24)) as pilot:
        for s in SCREENS:
            await pilot.press(s.key)
            await pilot.pause()
            lines = screen_lines(app)
            assert len(lines) == 24
            assert "? Help" in lines[-1] and "q Quit" in lines[-1] and "^t Theme" in lines[-1], lines[-1]
            assert f"{s.key} {s.label}" in lines[1] and "h100-sxm" in lines[0], lines[:2]


# 9 -------------------------------------------------------------------------------------------
async def test_top_bar_and_profile_screen_name_the_same_profile_and_the_cursor_starts_on_it(make):
    app = make(start_mode="profile")
    async with app.run_test(size=(120, 40)) as pilot:
        in_use = app.effective_profile().name
        assert in_use == "h100-sxm"
        assert f"{in_use} (auto)" in screen_lines(app)[0]
        assert f"in use: {in_use}" in text_of(app, "#profile-status")
        assert app.screen.highlighted() == in_use
        await pilot.press("down", "u")
        chosen = app.screen.highlighted()
        assert chosen != in_use and app.effective_profile().name == chosen
        assert f"{chosen} (chosen)" in screen_lines(app)[0]
        assert f"in use: {chosen}" in text_of(app, "#profile-status")
        await pilot.press("a")
        assert app.screen.highlighted() == in_use and f"{in_use} (auto)" in screen_lines(app)[0]


# 12 ------------------------------------------------------------------------------------------
async def test_history_compare_at_80x24_keeps_the_list_names_the_task_and_closes_with_esc(make):
    app = make(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        app.task_spec = with_fields(app.task_spec, memory_pipelining=2)
        await pilot.press("r")
        await wait_for_run(pilot, app, runs=2)
        await pilot.press("7")
        await wait_until(pilot, lambda: app.screen.query_one("#hist-table", DataTable).row_count == 2)
        history = app.screen
        await pilot.press("c")  # the highlighted (newest) against the previous run of its task
        await pilot.pause()
        assert type(app.screen).__name__ == "CompareScreen"
        assert history.query_one("#hist-table", DataTable).size.height >= 10
        compare = text_of(app, "#compare-table")
        for word in ("kernel", "gemm_residual", "shape", "8192x2560x2560", "dtype", "bf16", "iterations",
                     "MEMORY_PIPELINING", "#1", "#2"):
            assert word in compare, word
        for python in ("None", "True", "False"):
            assert python not in compare, python
        await pilot.press("escape")
        assert app.screen is history
        assert not any("MEMORY_PIPELINING" in line for line in screen_lines(app))


async def test_vs_previous_compares_the_same_task_even_from_an_earlier_session(make):
    app = make(start_mode="run")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)  # run #1: the GEMM
        gemm = app.task_spec
        app.task_spec = with_fields(gemm, kernel="add_rmsnorm", shape={"m": 4096, "n": 4096})
        await pilot.press("r")
        await wait_for_run(pilot, app, runs=2)  # run #2: another kernel
        compare = text_of(app, "#run-compare")
        assert "#1" not in compare and "No earlier stored run of add_rmsnorm" in compare
        app.task_spec = with_fields(gemm, memory_pipelining=3)
        await pilot.press("r")
        await wait_for_run(pilot, app, runs=3)  # run #3: the GEMM again
        compare = text_of(app, "#run-compare")
        assert "#1" in compare and "#3" in compare and "#2" not in compare
        assert "None" not in compare
    again = make(start_mode="run")  # a new session on the same store
    async with again.run_test(size=(100, 40)) as pilot:
        again.task_spec = with_fields(gemm, memory_pipelining=3)
        await pilot.press("r")
        await wait_for_run(pilot, again)
        compare = text_of(again, "#run-compare")
        assert again.last_result.run_id == 4 and "#3" in compare and "#4" in compare


# 13 ------------------------------------------------------------------------------------------
async def test_cancel_keeps_the_progress_where_it_stopped_and_matches_no_rule(make):
    app = make(start_mode="run")
    app.task_spec = with_fields(app.task_spec, fault="hang", timeout_s=60)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("r")
        await wait_until(pilot, lambda: app.run_active and engine_processes(), what="the run starting")
        await pilot.pause(0.5)
        await pilot.press("x")
        await wait_for_run(pilot, app)
        assert app.last_result.status.value == "cancelled"
        assert app.screen.query_one("#run-progress", ProgressBar).percentage < 1.0
        summary = text_of(app, "#run-summary")
        assert "CANCELLED" in summary and "rule" not in summary.lower()
