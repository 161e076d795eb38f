"""The fleet view shows times (issue 47, defect 10): its "median" column is the GPU's seed bench time
in ms, not the group's SOL %; the slow GPU's ms is named where it is marked; an empty or missing
folder says how to point the view at one."""

from __future__ import annotations

import json

import pytest

from engine import load_fleet
from tests.unit.test_fleet import host, sim_report, write  # noqa: F401 (sim_report is a fixture)
from tui.cli.main import main


def _timed(report: dict, ms: list[float]) -> dict:
    for bench, t in zip(report["benches"], ms, strict=True):
        bench["result"] = {**bench["result"], "time_ms": {"median": t, "p10": t, "p90": t}}
    return report


def test_the_median_column_is_a_time_and_the_slow_gpu_names_its_ms(sim_report, tmp_path, capsys,  # noqa: F811
                                                                  monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    write(tmp_path, "a.json", _timed(host(sim_report, "node-a", [70.0, 69.0]), [0.1559, 0.1581]))
    write(tmp_path, "b.json", _timed(host(sim_report, "node-b", [70.5, 49.9]), [0.1548, 0.2187]))
    view = load_fleet(tmp_path, outlier_pct=10)
    slow = next(r for r in view.rows if r.outlier)
    assert slow.median_ms == pytest.approx(0.2187) and "0.2187 ms" in slow.reasons[0]
    assert main(["fleet", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "┃ host" in line)
    assert "median ms" in header and "group SOL %" in header
    row = next(line for line in out.splitlines() if "node-b" in line and "49.9" in line)
    assert "0.2187" in row
    assert main(["fleet", str(tmp_path), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert sorted(r["median_ms"] for r in rows) == pytest.approx(sorted([0.1559, 0.1581, 0.1548, 0.2187]))


@pytest.mark.parametrize("make", [lambda p: p, lambda p: p / "missing"])
def test_no_reports_says_how_to_point_it_at_a_folder(make, tmp_path, capsys):
    assert main(["fleet", str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert "tui fleet-report --output-dir DIR" in err and "give that folder" in err
