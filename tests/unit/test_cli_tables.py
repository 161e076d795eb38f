"""The CLI's tables never cut the number (issue 47, "tables that never cut the number"): at 80 and
120 columns, in a pipe, every median and SOL % of `tui bench`, `tui tune` and `tui fleet` is printed
whole, with the product's longest labels (the peers' names, a fleet's long host and GPU names)."""

from __future__ import annotations

import json
import re

import pytest

from tests.unit.test_fleet import sim_report  # noqa: F401 (a fixture)
from tui.cli.main import main

BENCH = ["bench", "--backend", "sim", "--iterations", "20", "--warmup", "1"]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("│")]


@pytest.mark.parametrize("columns", [80, 120])
def test_bench_table_keeps_every_median_and_sol_whole(columns, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = cli(capsys, *BENCH)
    assert code == 0 and "…" not in out and all(len(line) <= columns for line in out.splitlines())
    cells = [c.strip() for line in _rows(out) for c in line.strip("│").split("│")]
    doc = json.loads(cli(capsys, *BENCH, "--json")[1])  # the same task and seed: the same figures
    figures = [(doc["time_ms"]["median"], doc["sol_pct"])]
    figures += [(p["timing"]["median_ms"], p["sol_pct"]) for p in doc["peers"] if p.get("timing")]
    assert len(figures) >= 3
    for median, sol in figures:
        assert f"{median:.4f}" in cells and f"{sol:.1f}" in cells, (median, sol)


@pytest.mark.parametrize("columns", [80, 120])
def test_tune_table_keeps_every_median_and_sol_whole(columns, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = cli(capsys, "tune", "--backend", "sim", "--budget", "3", "--top", "10")
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in _rows(out)]
    rows = [r for r in rows if r[1]]  # not a long label's second line
    assert code == 0 and rows and "…" not in out
    for r in rows:
        assert re.fullmatch(r"\d+\.\d{4}", r[1]) and re.fullmatch(r"\d+\.\d", r[2]), r


@pytest.mark.parametrize("columns", [80, 120])
def test_fleet_table_keeps_every_median_and_sol_whole(columns, sim_report, tmp_path, capsys,  # noqa: F811
                                                      monkeypatch):
    from tests.unit.test_fleet import host, write

    monkeypatch.setenv("COLUMNS", str(columns))
    long_host = "gpu-node-with-a-long-name-in-rack-17-of-the-cluster"
    doc = host(sim_report, long_host, [70.0, 49.9], failed=["health.ecc", "health.retirement"])
    for bench, ms in zip(doc["benches"], [0.1559, 0.2187], strict=True):
        bench["result"] = {**bench["result"], "time_ms": {"median": ms, "p10": ms, "p90": ms}}
    write(tmp_path, "a.json", doc)
    write(tmp_path, "b.json", host(sim_report, "node-b", [70.5]))
    assert main(["fleet", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    cells = [c.strip() for line in _rows(out) for c in line.strip("│").split("│")]
    assert "…" not in out and all(len(line) <= columns for line in out.splitlines())
    for fig in ("0.1559", "0.2187", "70.0", "49.9", "70.5"):
        assert fig in cells, fig
