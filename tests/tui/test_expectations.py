"""What people expect of a tool they live in: ? help, a focus ring, a palette without duplicates,
`tui --help` with the cockpit's own options, History sorted and filtered by any column."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Select

from tests.tui.conftest import screen_lines, wait_until
from tests.tui.test_flows import text_of
from tests.unit.test_run_records import sol_of
from tui.screen_list import SCREENS


async def test_question_mark_shows_the_keys_of_the_current_screen(make):
    from tui.app import CockpitApp

    app = make(start_mode="checklist")
    async with app.run_test(size=(80, 24)) as pilot:
        for key in (s.key for s in SCREENS):
            await pilot.press(key)
            screen = app.screen
            await pilot.press("question_mark")
            assert type(app.screen).__name__ == "HelpScreen", key
            keys = text_of(app, "#help-keys")
            for b in screen.BINDINGS:
                assert (b.tooltip or b.description) in " ".join(keys.split()), (key, b.description)
            assert "Quit the cockpit" in keys and f"{SCREENS[0].key}-{SCREENS[-1].key}" in keys
            await pilot.press("escape")
            assert app.screen is screen
        await pilot.press("question_mark", "question_mark")  # ? closes it too
        assert type(app.screen).__name__ != "HelpScreen"
        assert "question_mark" in [b.key for b in CockpitApp.BINDINGS]


async def test_the_palette_lists_every_command_once(make):
    from tui.app import CockpitApp

    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        for mode in CockpitApp.MODES:
            app.switch_mode(mode)
            await pilot.pause()
            titles = [c.title for c in app.get_system_commands(app.screen)]
            names = [t.rsplit(" (", 1)[0] for t in titles]
            assert len(names) == len(set(names)), (mode, sorted(names))


async def test_the_focused_widget_has_a_visible_ring(make):
    app = make(start_mode="checklist")
    async with app.run_test(size=(80, 24)) as pilot:
        steps = app.screen.query_one("#steps-table", DataTable)
        checks = app.screen.query_one("#checks-table", DataTable)
        steps.focus()
        await pilot.pause()
        assert steps.styles.outline_left[0] != "" and checks.styles.outline_left[0] == ""
        bar = screen_lines(app)[steps.region.y][steps.region.x]
        await pilot.press("tab")
        assert checks.has_focus
        assert checks.styles.outline_left[0] != "" and steps.styles.outline_left[0] == ""
        assert screen_lines(app)[steps.region.y][steps.region.x] != bar


def test_tui_help_lists_the_cockpits_options_and_the_commands(capsys):
    from tui.main import main

    try:
        code = main(["--help"])
    except SystemExit as exc:  # argparse's own --help
        code = exc.code
    out = capsys.readouterr().out
    assert code == 0
    for option in ("--profile", "--backend", "--task", "--screen", "--theme"):
        assert option in out, option
    for command in ("bench", "tune", "history", "check"):
        assert command in out, command


# --- History: columns, sorting, filtering --------------------------------------------------------
def stored(store, kernel: str, median_ms: float, sol_pct: float, iterations: int = 100, shape=None,
           simulated: bool = True, status: str = "ok") -> int:
    from engine import RunResult, RunStatus
    from engine.timing import timing_stats

    shape = shape or ({"m": 8192, "n": 2560, "k": 2560} if kernel == "gemm_residual" else {"m": 4096, "n": 4096})
    res = RunResult(status=RunStatus(status), simulated=simulated, profile="h100-sxm",
                    task={"kernel": kernel, "shape": shape, "dtype": "bf16", "iterations": iterations,
                          "block_size": "128x128", "memory_pipelining": 4, "fusion": True},
                    timing=timing_stats([median_ms] * 3), sol=sol_of(sol_pct=sol_pct),
                    started_at="2025-05-14T13:02:00+00:00")
    return store.save(res)


@pytest.fixture
def three_runs(make):
    app = make(start_mode="history")
    stored(app.store, "gemm_residual", 0.20, 55.0, iterations=100)
    stored(app.store, "add_rmsnorm", 0.05, 80.0, iterations=300)
    stored(app.store, "gemm_residual", 0.16, 70.0, iterations=50, simulated=False)
    return app


def column_values(table: DataTable, key: str) -> list[str]:
    return [str(table.get_cell(row.key, key)) for row in table.ordered_rows]


async def test_history_shows_time_shape_dtype_iterations_sim_and_tuned(three_runs):
    app = three_runs
    async with app.run_test(size=(200, 30)) as pilot:
        table = app.screen.query_one("#hist-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 3)
        headers = [str(c.label) for c in table.ordered_columns]
        for header in ("time", "shape", "dtype", "iters", "sim", "tuned"):
            assert header in headers, header
        assert column_values(table, "id") == ["#3", "#2", "#1"]  # newest first
        assert column_values(table, "iterations") == ["50", "300", "100"]
        assert column_values(table, "shape") == ["8192x2560x2560", "4096x4096", "8192x2560x2560"]
        assert column_values(table, "simulated") == ["GPU", "SIM", "SIM"]
        assert column_values(table, "tuned") == ["-", "-", "-"]  # not stored yet
        assert all(v != "-" and ":" in v for v in column_values(table, "when"))


async def test_history_sorts_by_keys_and_header_clicks_and_filters(three_runs):
    app = three_runs
    async with app.run_test(size=(200, 30)) as pilot:
        table = app.screen.query_one("#hist-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 3)
        while app.screen.sort_column != "median_ms":
            await pilot.press("s")
        assert column_values(table, "id") == ["#2", "#3", "#1"]  # fastest first
        await pilot.press("o")
        assert column_values(table, "id") == ["#1", "#3", "#2"]
        sol = [c.key.value for c in table.ordered_columns].index("sol_pct")
        x = sum(c.get_render_width(table) for c in table.ordered_columns[:sol]) + 2
        await pilot.click("#hist-table", offset=(x, 0))
        assert column_values(table, "id") == ["#1", "#3", "#2"]  # SOL % ascending
        await pilot.click("#hist-table", offset=(x, 0))
        assert column_values(table, "id") == ["#2", "#3", "#1"]  # and descending
        assert "SOL %" in str(app.screen.query_one("#hist-sort").content)
        app.screen.query_one("#hist-kernel", Select).value = "gemm_residual"
        await wait_until(pilot, lambda: table.row_count == 2)
        assert set(column_values(table, "kernel")) == {"gemm_residual"}
        app.screen.query_one("#hist-profile", Select).value = "h200"
        await wait_until(pilot, lambda: table.row_count == 0)


async def test_history_compare_without_marks_takes_the_previous_run_of_the_same_task(three_runs):
    app = three_runs
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one("#hist-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 3)
        await pilot.press("c")  # #3 is a GEMM: its previous GEMM is #1, not the RMSNorm #2
        compare = text_of(app, "#compare-table")
        assert "#1" in compare and "#3" in compare and "#2" not in compare
        await pilot.press("escape", "down", "c")  # #2 has no earlier run of its own task
        assert type(app.screen).__name__ == "HistoryScreen"
        assert any("No earlier run" in n.message for n in app._notifications)


async def test_history_lists_and_compares_runs_saved_before_rest_s_and_with_refused_knobs(make):
    """Saved results survive: a run stored before rest_s existed and one whose task today's rules
    refuse (``engine.recorded_task``) are listed and compared like any other."""
    from tests.unit.test_recorded_task import LEGACY_TASK, REFUSED_TASK, stored_with_task

    app = make(start_mode="history")
    stored_with_task(app.store, LEGACY_TASK)
    stored_with_task(app.store, REFUSED_TASK)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.screen.query_one("#hist-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 2)
        assert column_values(table, "iterations") == ["0", "100"]
        await pilot.press("c")
        compare = text_of(app, "#compare-table")
        assert "#1" in compare and "#2" in compare and "fp8" in compare and "96x96" in compare


def test_tuned_column_reads_where_the_knobs_came_from():
    from types import SimpleNamespace

    from engine import RecordedTask
    from tui.widgets.history_rows import history_row, row_cells

    rec = SimpleNamespace(id=1, created_at=None, status="ok", kernel="gemm_residual", shape={"m": 1}, dtype="bf16",
                          block_size=None, memory_pipelining=None, median_ms=None, sol_pct=None, profile="h200",
                          simulated=False)
    from tui.widgets.history_rows import COLUMNS

    cells = {key: str(c) for (key, _), c in zip(COLUMNS, row_cells(history_row(rec, None), False), strict=True)}
    assert cells["tuned"] == "-" and cells["iterations"] == "-" and cells["pipe"] == "-" and cells["when"] == "-"
    for source, shown in (("tuned 2025-05-14 (burst)", "yes"), ("tuned on this GPU (2025-05-14, 9 candidates)", "yes"),
                          ("tuned table h200 (nearest 8192x2560x2560)", "no"), ("rules for this profile", "no"),
                          ("task", "no")):
        result = SimpleNamespace(task=RecordedTask(iterations=9), knobs_from=source)
        assert str(row_cells(history_row(rec, result), False)[13]) == shown, source


def test_the_footer_leaves_out_the_least_important_keys_first():
    from types import SimpleNamespace

    from tui.widgets.footer import fit_keys, key_width

    def key(k, desc, action):
        return SimpleNamespace(key_display=k, description=desc, action=action)

    keys = [key("r", "Run", "start_run"), key("x", "Cancel", "cancel_run"), key("S", "Use sim", "app.use_simulated"),
            key("^t", "Theme", "app.toggle_theme"), key("^p", "Palette", "app.command_palette"),
            key("?", "Help", "app.help"), key("q", "Quit", "app.quit")]
    assert fit_keys(keys, 200) == keys
    width = sum(key_width(k) for k in keys)
    assert [k.description for k in fit_keys(keys, width - 1)] == ["Run", "Cancel", "Use sim", "Theme", "Help", "Quit"]
    assert [k.description for k in fit_keys(keys, 20)] == ["Use sim", "Help", "Quit"]


async def test_a_checklist_step_is_ticked_in_the_cockpit_and_stays_ticked(make):
    """x on the steps table marks the highlighted step done by hand (as `tui checklist --done`),
    x again undoes it; the store keeps it across cockpit sessions."""
    from engine import Checklist

    app = make(start_mode="checklist")
    async with app.run_test(size=(80, 24)) as pilot:
        steps = app.screen.query_one("#steps-table", DataTable)
        steps.focus()
        row = list(app.screen.steps).index("exported")
        steps.move_cursor(row=row)
        await pilot.pause()
        assert app.screen.steps["exported"]["state"] == "todo"
        await pilot.press("x")
        await pilot.pause()
        assert app.screen.steps["exported"]["state"] == "done"
        assert "exported" in text_of(app, "#check-detail")
        store = app.store
    assert {s.id: s.done for s in Checklist(store).steps()}["exported"] is True
    app2 = make(start_mode="checklist")
    async with app2.run_test(size=(80, 24)) as pilot:
        assert app2.screen.steps["exported"]["state"] == "done"
        steps = app2.screen.query_one("#steps-table", DataTable)
        steps.focus()
        steps.move_cursor(row=list(app2.screen.steps).index("exported"))
        await pilot.press("x")
        await pilot.pause()
        assert app2.screen.steps["exported"]["state"] == "todo"


async def test_the_checks_table_sorts_by_severity_and_filters_problems(make, monkeypatch):
    from engine.checks.model import CheckResult
    from tui import diagnostics

    checks = [CheckResult(id=f"c.{s}{i}", title=f"check {s} {i}", status=s, detail="", fix="")
              for i, s in enumerate(["pass", "warn", "pass", "fail", "skip"])]
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        table = app.screen.query_one("#checks-table", DataTable)

        def ids():
            return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]

        assert ids() == [c.id for c in checks]
        await pilot.press("s")
        assert ids() == ["c.fail3", "c.warn1", "c.skip4", "c.pass0", "c.pass2"]
        await pilot.press("f")
        assert ids() == ["c.fail3", "c.warn1"]
        assert "2 of 5" in text_of(app, "#checks-heading")
        await pilot.press("s", "f")
        assert ids() == [c.id for c in checks]
