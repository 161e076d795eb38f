"""Tables that never cut the number (issue 47): every table of the cockpit rendered at 80 and 120
columns with the longest labels the product makes; the median and SOL % cells (and the run's id)
are whole, low-value columns hide first, long labels end in an ellipsis. Defect 2 (the Tune view
cut ms to '0.1' and pushed SOL % and status off screen) and 6 (History at 80x24 hid median and
SOL % behind ~20 presses of Right) each have an app-level test here too."""

from __future__ import annotations

import pytest

from engine import kernel_names
from tests.tui.conftest import screen_lines, wait_for_run
from tui.widgets.fit_table import Column, fit_cell, layout, matches

WIDTHS = [80, 120, 66]
"""The terminal's width for full-width tables, and the tuning view's table at 120 columns (66)."""
LONG_KERNEL = max(kernel_names(), key=len)
LONG_KNOBS = {"block_size": "256x128x64", "memory_pipelining": 7,
              "schedule": {"consumers": "pingpong", "cluster": 2, "multicast": "none", "raster": "along_m"}}


def _history_rows():
    from tui.widgets.history_rows import row_cells

    row = {"id": 123456, "created_at": "2026-12-06T05:00:00+00:00", "status": "incorrect", "kernel": LONG_KERNEL,
           "shape": {"m": 262144, "n": 65536, "k": 65536}, "dtype": "bf16", "block_size": "256x128x64",
           "pipe": 7, "iterations": 50000, "median_ms": 1234.5678, "sol_pct": 99.9, "profile": "a100-sxm-80gb",
           "simulated": True, "tuned": True, "baseline_ratio": 9.99, "regression": True}
    return [row_cells(row, True)]


def _tune_rows():
    from tui.widgets.tune_table import row_cells

    trial = {**LONG_KNOBS, "status": "skipped", "seq": 0, "n": 187, "median_ms": 0.14127, "sol_pct": 88.8,
             "reason": "needs 232448 bytes of shared memory per block, the profile allows 232448 - 1024 " * 3,
             "default": True}
    return [row_cells({**trial, "status": "ok", "reason": ""}, True), row_cells(trial, False)]


def _fleet_rows():
    from types import SimpleNamespace

    from tui.screens.fleet import row_cells

    row = SimpleNamespace(gpu_name="NVIDIA H100 80GB HBM3 NVL", sol_pct=100.0, outlier=True, group_median_pct=99.9,
                          reasons=["SOL 50.0 % is below the median"], host="node-" + "x" * 250, simulated=True,
                          gpu=7, driver="560.35.03", failed_checks=["gpu.ecc", "driver.loaded", "host.memlock"],
                          median_ms=1234.5678, host_spread_pct=99.9, status="ok")
    return [row_cells(row)]


def _check_rows():
    from rich.text import Text

    from tui.screens.checklist import status_cell

    return [(status_cell("fail"), Text("Persistence mode is enabled on every GPU so the driver stays loaded " * 2))]


def _tables():
    from tui.screens.checklist import CHECK_COLUMNS
    from tui.screens.fleet import FIT_COLUMNS as FLEET
    from tui.widgets.history_rows import FIT_COLUMNS as HISTORY
    from tui.widgets.tune_table import FIT_COLUMNS as TUNE

    return {"history": (HISTORY, _history_rows(), ("id", "median_ms", "sol_pct")),
            "candidates": (TUNE, _tune_rows(), ("n", "ms", "sol")),
            "fleet": (FLEET, _fleet_rows(), ("median", "sol")),
            "checks": (CHECK_COLUMNS, _check_rows(), ("status",))}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["history", "candidates", "fleet", "checks"])
def test_every_table_keeps_its_key_figures_whole(name, width):
    columns, rows, keys = _tables()[name]
    plan = layout(columns, rows, width)
    shown = {columns[i].key: w for i, w in plan}
    assert sum(w + 2 for w in shown.values()) + 2 <= width, (name, width, shown)
    for row in rows:
        for i, w in plan:
            whole = str(row[i].plain if hasattr(row[i], "plain") else row[i])
            cell = fit_cell(row[i], w).plain
            if columns[i].key in keys:
                assert cell == whole, (name, width, columns[i].key, cell, whole)
            elif cell != whole:
                assert cell.endswith("…") and columns[i].min_width, (name, columns[i].key, cell)
    assert set(keys) <= set(shown), (name, width, shown)


def test_low_value_columns_hide_first_at_80_columns():
    from tui.widgets.history_rows import FIT_COLUMNS

    shown = [FIT_COLUMNS[i].key for i, _ in layout(FIT_COLUMNS, _history_rows(), 80)]
    assert "tuned" not in shown and "iterations" not in shown and "pipe" not in shown
    assert {"id", "status", "kernel", "median_ms", "sol_pct"} <= set(shown)
    wide = [FIT_COLUMNS[i].key for i, _ in layout(FIT_COLUMNS, _history_rows(), 300)]
    assert wide == [c.key for c in FIT_COLUMNS]


def test_columns_are_as_wide_as_their_content():
    cols = (Column("a", "a"), Column("b", "bbbb"))
    assert layout(cols, [("xyz", "1")], 200) == [(0, 3), (1, 4)]


def test_slash_filter_matches_any_cell():
    assert matches(("ok", "gemm_residual", "0.1441"), "GEMM") and not matches(("ok", "bias_gelu"), "rms")
    assert matches(("anything",), "")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_history_shows_median_and_sol_whole_without_scrolling(make, size):
    """Defect 6: at 80x24 median and SOL % sat behind ~20 presses of Right."""
    app = make(start_mode="run")
    async with app.run_test(size=size) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        await pilot.press("7")
        await pilot.pause(0.5)
        rows = screen_lines(app)
        header = next((r for r in rows[2:] if "median" in r), "")
        assert "SOL %" in header and "status" in header, rows
        result = app.last_result
        line = next(r for r in rows[2:] if f"#{result.run_id} " in r)
        from tui.widgets.format import fmt, fmt_ms

        assert fmt_ms(result.timing.median_ms) in line and fmt(result.sol.sol_pct, digits=1) in line, line


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_tune_view_shows_ms_sol_and_status_whole(make, size):
    """Defect 2: long knob labels sized the knobs column; ms read '0.1', SOL % and status went off
    screen; skip reasons could not be read (the highlighted row is shown in full)."""
    from tests.tui.test_tune_run import start_tune, wait_for_tune

    app = make(start_mode="tune")
    async with app.run_test(size=size) as pilot:
        screen = await start_tune(pilot, app)
        await wait_for_tune(pilot, screen)
        rows = screen_lines(app)
        header = next(r for r in rows if "knobs" in r and "ms" in r)
        assert "SOL %" in header and "status" in header, header
        best = min((e for e in screen.entries if e.get("status") == "ok"), key=lambda e: e["median_ms"])
        assert any(f"{best['median_ms']:.4f}" in r and f"{best['sol_pct']:.1f}" in r for r in rows), rows
        skipped = [e for e in screen.entries if e.get("status") == "skipped"]
        if skipped:
            while screen.filter != "skipped":
                await pilot.press("f")
            await pilot.pause(0.4)
            detail = " ".join(screen_lines(app))
            assert skipped[0]["reason"][:40] in detail or any(e["reason"][:40] in detail for e in skipped)
