"""The cockpit's Fleet screen (key 8): the same table as `tui fleet DIR`, outliers marked, files
that are not reports listed, a missing folder said in words, the folder remembered in the
preferences."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from tests.tui.conftest import fixed_sampler, screen_lines, wait_until
from tests.unit.test_fleet import host
from tui.cli.main import main


@pytest.fixture
def reports(tmp_path) -> Path:
    """Three hosts of the simulated device: node-b's second GPU slow, node-c with a failed check."""
    src = tmp_path / "one"
    assert main(["fleet-report", "--backend", "sim", "--host", "node-a", "--only", "host.user", "--no-peers",
                 "--out", str(src / "a.json")]) in (0, 1)
    base = json.loads((src / "a.json").read_text())
    d = tmp_path / "reports"
    d.mkdir()
    for name, sol, failed in (("node-a", [70.0, 69.0], []), ("node-b", [70.5, 50.0], []),
                              ("node-c", [69.5], ["health.ecc"])):
        (d / f"{name}.json").write_text(json.dumps(host(base, name, sol, failed)))
    (d / "broken.json").write_text("{not json")
    return d


def open_cockpit(**kwargs):
    from tui.app import make_app

    return make_app(backend="sim", telemetry=fixed_sampler(), start_telemetry=False, checks_on_start=False,
                    **kwargs)


def note(app) -> str:
    return str(app.screen.query_one("#fleet-note", Static).render())


async def test_fleet_screen_shows_the_table_with_outliers_marked(reports, monkeypatch):
    monkeypatch.setenv("SOL_FLEET_DIR", str(reports))
    app = open_cockpit()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("8")
        assert app.current_mode == "fleet"
        await wait_until(pilot, lambda: app.screen.view is not None, what="the reports to load")
        table = app.screen.query_one("#fleet-table", DataTable)
        assert table.row_count == 5
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        marked = [(r[1].split()[0], r[2].split()[0]) for r in rows if r[0] == "!"]
        assert marked == [("node-b", "1"), ("node-c", "0")]
        assert all("SIM" in r[1] for r in rows)
        text = note(app)
        assert "3 host(s), 5 GPU(s), 2 marked" in text and "broken.json" in text and "SIMULATED" in text
        await pilot.press("m")  # marked only
        assert table.row_count == 2
        table.move_cursor(row=0)
        await pilot.pause()
        assert "below the median" in note(app)
        lines = "\n".join(screen_lines(app))
        assert "node-b" in lines and "host spread" in lines


async def test_a_missing_folder_is_said_and_the_folder_typed_is_remembered(reports, tmp_path):
    from tui.preferences import PreferencesFile

    prefs = PreferencesFile.load()
    app = open_cockpit(preferences=prefs)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("8")
        field = app.screen.query_one("#fleet-dir", Input)
        field.value = str(tmp_path / "nowhere")
        field.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.problem is not None, what="the problem to show")
        assert "no such folder" in note(app) and app.screen.query_one("#fleet-table", DataTable).row_count == 0
        field.value = str(reports)
        field.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.view is not None and app.screen.problem is None,
                         what="the reports to load")
        assert app.screen.query_one("#fleet-table", DataTable).row_count == 5
        await pilot.press("q")
    saved = (Path(os.environ["SOL_COCKPIT_CONFIG_DIR"]) / "cockpit.toml").read_text()
    assert str(reports) in saved
    app = open_cockpit(preferences=PreferencesFile.load())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("8")
        assert app.screen.query_one("#fleet-dir", Input).value == str(reports)


def test_row_cells_mark_and_label_without_an_app(reports):
    from engine import load_fleet
    from tui.screens.fleet import COLUMNS, row_cells

    view = load_fleet(reports)
    cells = [row_cells(r) for r in view.rows]
    assert all(len(c) == len(COLUMNS) for c in cells)
    r_slow, slow = next((r, c) for r, c in zip(view.rows, cells, strict=True) if r.host == "node-b" and r.index == 1)
    keys = [k for k, _ in COLUMNS]
    assert slow[0].plain == "!" and slow[keys.index("sol")].plain == "50.0"
    assert slow[keys.index("median")].plain == f"{r_slow.median_ms:.4g}" != "-"  # a time, not a SOL %
