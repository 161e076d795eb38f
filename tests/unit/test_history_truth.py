"""What the store calls a run's predecessor, its best runs and its kinds (issue 47, defects 5, 6
and 11): "vs previous" never compares with an incorrect run or a soak, a soak is listed as a soak,
and `tui history` never cuts a cell in a pipe at 120 or 80 columns."""

from __future__ import annotations

import json

import pytest

from engine import ResultStore
from tui.cli.main import main

BENCH = ["bench", "--backend", "sim", "--iterations", "5", "--warmup", "1", "--no-peers", "--json"]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def mixed(capsys, monkeypatch):
    """Four runs of the seed task: ok, incorrect (an injected NaN), a soak, ok."""
    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "200")
    ids = [json.loads(cli(capsys, *BENCH)[1])["run_id"]]
    ids.append(json.loads(cli(capsys, *BENCH, "--fault", "nan")[1])["run_id"])
    ids.append(json.loads(cli(capsys, "soak", "--backend", "sim", "--duration", "20s", "--json")[1])["run_id"])
    ids.append(json.loads(cli(capsys, *BENCH)[1])["run_id"])
    return ids


def test_vs_previous_skips_incorrect_runs_and_soaks(mixed):
    store = ResultStore()
    ok1, bad, soak, ok2 = mixed
    assert store.get(bad).status.value == "incorrect"
    prev = store.previous(store.get(ok2))
    assert prev is not None and prev.run_id == ok1
    assert store.previous(store.get(ok1)) is None


def test_a_soak_is_stored_and_listed_as_a_soak(mixed, capsys):
    soak = mixed[2]
    code, out, _ = cli(capsys, "history", "--json")
    kinds = {r["id"]: r["kind"] for r in json.loads(out)["runs"]}
    assert kinds[soak] == "soak" and [k for i, k in kinds.items() if i != soak] == ["bench"] * 3
    code, out, _ = cli(capsys, "history")
    row = next(line for line in out.splitlines() if line.startswith(f"│ {soak:>2} "))
    assert "soak ok" in row


def test_best_runs_leave_soaks_and_incorrect_runs_out(mixed):
    best = [r.id for r in ResultStore().best(limit=10)]
    assert sorted(best) == sorted([mixed[0], mixed[3]])


@pytest.mark.parametrize("columns", [120, 80])
def test_history_in_a_pipe_never_cuts_a_cell(columns, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    cli(capsys, *BENCH[:-1], "--kernel", "gemm_residual_mma", "--profile", "a100-sxm-80gb", "--json")
    cli(capsys, *BENCH[:-1], "--shape", "m=16384,n=16384,k=16384", "--json")
    code, out, _ = cli(capsys, "history", "--json")
    runs = json.loads(out)["runs"]
    code, out, _ = cli(capsys, "history")
    assert code == 0 and "…" not in out
    assert all(len(line) <= columns for line in out.splitlines() if line[:1] in "┏┃┡│└")  # the table
    table = "\n".join(out.splitlines())
    for r in runs:
        row = next(line for line in table.splitlines() if line.startswith(f"│ {r['id']:>2} "))
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert f"{r['median_ms']:.4g}" in cells and f"{r['sol_pct']:.1f}" in cells
        if columns == 120:
            assert r["kernel"] in cells and "sim" in cells


def test_history_json_has_every_field(capsys):
    cli(capsys, *BENCH)
    code, out, _ = cli(capsys, "history", "--json")
    run = json.loads(out)["runs"][0]
    assert {"id", "created_at", "kernel", "shape", "dtype", "block_size", "memory_pipelining", "fusion", "profile",
            "backend", "simulated", "status", "median_ms", "tflops", "sol_pct", "correct", "kind"} <= set(run)


def test_the_cockpit_history_lists_a_soak_as_a_soak(mixed):
    from tui.widgets.history_rows import COLUMNS, history_row, row_cells

    store = ResultStore()
    soak = next(r for r in store.list() if r.id == mixed[2])
    cells = dict(zip([k for k, _ in COLUMNS], row_cells(history_row(soak, store.get(soak.id)), False), strict=True))
    assert str(cells["status"]) == "soak ok" and cells["iterations"] == "-"
    bench = next(r for r in store.list() if r.id == mixed[0])
    cells = dict(zip([k for k, _ in COLUMNS], row_cells(history_row(bench, store.get(bench.id)), False), strict=True))
    assert str(cells["status"]) == "ok" and cells["iterations"] == "5"


def test_a_soak_is_never_a_baseline_nor_judged_against_one(mixed, capsys):
    ok1, _, soak, ok2 = mixed
    code, _, err = cli(capsys, "baseline", "set", str(soak))
    assert code == 2 and "a soak" in err
    code, out, _ = cli(capsys, "baseline", "set", "--json")  # the newest ok bench, not the soak
    assert code == 0 and json.loads(out)["baseline"]["run_id"] == ok2
    code, out, _ = cli(capsys, "history", "--json")
    runs = {r["id"]: r for r in json.loads(out)["runs"]}
    assert runs[soak]["baseline_ratio"] is None and runs[ok1]["baseline_ratio"] is not None
