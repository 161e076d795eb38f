"""Baselines: `tui baseline set/list/clear`, `tui bench --against-baseline` (exit 1 on a regression,
naming what changed), History's regression marks, and the table's arrival in an existing store."""

import json
import sqlite3

import pytest

from engine.baseline import Baselines, compare, parse_tolerance
from engine.paths import store_path
from engine.store import ResultStore
from tui.cli.main import main


@pytest.fixture(autouse=True)
def _wide_tables(monkeypatch):
    """The assertions read whole table cells: print tables wide whatever terminal (or xdist
    worker, whose COLUMNS is 80) runs the tests."""
    monkeypatch.setenv("COLUMNS", "300")

SIM = ["--backend", "sim", "--iterations", "10", "--warmup", "2", "--no-peers"]


def cli(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def bench(capsys, *extra):
    code, out, err = cli(capsys, "bench", *SIM, "--json", *extra)
    return code, json.loads(out), err


def tamper(**sets):
    """Edit the one stored baseline as a change of code, driver or hardware would leave it."""
    conn = sqlite3.connect(store_path())
    with conn:
        for col, val in sets.items():
            if col == "fingerprint":
                for k, v in val.items():
                    conn.execute("UPDATE baselines SET fingerprint = json_set(fingerprint, ?, ?)", (f"$.{k}", v))
            else:
                conn.execute(f"UPDATE baselines SET {col} = ?", (val,))
    conn.close()


def test_set_list_clear_round_trip(capsys):
    code, run, _ = bench(capsys)
    assert code == 0
    code, out, _ = cli(capsys, "baseline", "set", str(run["run_id"]), "--tolerance", "3%", "--json")
    assert code == 0
    b = json.loads(out)["baseline"]
    assert b["run_id"] == run["run_id"] and b["simulated"] is True and b["tolerance_pct"] == 3
    assert b["gpu"] == "SIMULATED h100-sxm" and b["shape"] == "k=2560,m=8192,n=2560" and b["dtype"] == "bf16"
    assert b["median_ms"] == pytest.approx(run["time_ms"]["median"])
    assert b["fingerprint"]["kernel_source_sha256"] == run["fingerprint"]["kernel_source_sha256"]
    # setting again replaces: one baseline per kernel, shape, dtype and GPU model
    code, out, _ = cli(capsys, "baseline", "set", "--json")
    assert code == 0 and json.loads(out)["baseline"]["tolerance_pct"] is None
    code, out, _ = cli(capsys, "baseline", "list", "--json")
    listed = json.loads(out)["baselines"]
    assert len(listed) == 1 and listed[0]["key"] == "gemm_residual/k=2560,m=8192,n=2560/bf16/SIMULATED h100-sxm"
    code, out, _ = cli(capsys, "baseline", "list")
    assert code == 0 and "gemm_residual" in out and "SIMULATED" in out
    code, out, _ = cli(capsys, "baseline", "clear", listed[0]["key"], "--json")
    assert code == 0 and [c["id"] for c in json.loads(out)["cleared"]] == [listed[0]["id"]]
    code, out, _ = cli(capsys, "baseline", "list", "--json")
    assert json.loads(out)["baselines"] == []


@pytest.mark.parametrize("argv, needle", [
    (["baseline", "set", "999"], "run=999"),
    (["baseline", "set", "abc"], "run id"),
    (["baseline", "set"], "no ok run"),
    (["baseline", "clear", "42"], "no such baseline"),
    (["baseline", "clear", "just-a-word"], "kernel/shape/dtype/GPU"),
    (["baseline", "set", "--tolerance", "120%"], "below 100"),
    (["baseline", "set", "--shape", "m=1,n=1,k=1"], "--tuned"),
])
def test_bad_input_is_exit_2_naming_it(capsys, argv, needle):
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 2 and needle in json.loads(out)["error"] + err


def test_a_failed_run_cannot_be_a_baseline(capsys):
    code, run, _ = bench(capsys, "--fault", "compile_error")
    assert code == 1
    code, out, _ = cli(capsys, "baseline", "set", str(run["run_id"]), "--json")
    assert code == 2 and "compile_error" in json.loads(out)["error"]


def test_against_baseline_without_one_is_exit_2_before_anything_runs(capsys):
    code, out, err = cli(capsys, "bench", *SIM, "--against-baseline", "--json")
    d = json.loads(out)
    assert code == 2 and "no baseline for gemm_residual" in d["error"] and "tui baseline set" in d["fix"]
    assert ResultStore().list() == []  # nothing ran, nothing stored
    code, _, err = cli(capsys, "bench", *SIM, "--tolerance", "5%")
    assert code == 2 and "--against-baseline" in err


def test_within_tolerance_is_exit_0_and_a_regression_is_exit_1_naming_the_change(capsys):
    bench(capsys)
    cli(capsys, "baseline", "set")
    code, d, _ = bench(capsys, "--against-baseline")
    v = d["against_baseline"]
    assert code == 0 and v["regression"] is False and v["ratio"] == pytest.approx(1.0, abs=0.05)
    assert v["changes"] == []
    # the baseline was twice as fast, on another kernel source and card: a regression, both named
    tamper(median_ms=d["time_ms"]["median"] / 2,
           fingerprint={"kernel_source_sha256": "0" * 64, "gpu_name": "SIMULATED older card"})
    code, d, _ = bench(capsys, "--against-baseline")
    v = d["against_baseline"]
    assert code == 1 and d["status"] == "ok" and v["regression"] is True
    assert v["ratio"] == pytest.approx(2.0) and v["slower_pct"] == pytest.approx(100.0)
    assert v["changed"] == ["GPU", "code"]
    assert {c["field"] for c in v["changes"]} == {"kernel_source_sha256", "gpu_name"}
    # a tolerance just short of it still fails; the human output names the change in words
    code, d, _ = bench(capsys, "--against-baseline", "--tolerance", "99%")
    assert code == 1  # +100 % is beyond 99 %
    code, out, _ = cli(capsys, "bench", *SIM, "--against-baseline")
    assert code == 1 and "REGRESSION" in out and "kernel source hash" in out and "older card" in out


def test_history_marks_regressions(capsys):
    bench(capsys)
    cli(capsys, "baseline", "set")
    bench(capsys)
    code, out, _ = cli(capsys, "history", "--json")
    runs = json.loads(out)["runs"]
    assert code == 0 and [r["regression"] for r in runs] == [False, False]
    tamper(median_ms=runs[0]["median_ms"] / 1.5)
    code, out, _ = cli(capsys, "history", "--json")
    runs = json.loads(out)["runs"]
    assert all(r["regression"] for r in runs) and runs[0]["baseline_ratio"] == pytest.approx(1.5)
    code, out, _ = cli(capsys, "history")
    assert "REGR" in " ".join(out.split())

    from engine.baseline import marks
    from tui.widgets.history_rows import COLUMNS, history_row, row_cells

    store = ResultStore()
    recs = store.list()
    row = history_row(recs[0], store.get(recs[0].id), marks(store, recs).get(recs[0].id))
    status = str(row_cells(row, False)[[k for k, _ in COLUMNS].index("status")])
    assert status == "ok REGR +50%"


def test_tuned_best_as_baseline(capsys):
    store = ResultStore()
    entry = {"gpu": "NVIDIA H200", "sm_count": 132, "kernel": "gemm_residual", "source_hash": "abc", "dtype": "bf16",
             "shape": "k=2560,m=8192,n=2560", "fusion": 1, "regime": "burst", "block_size": "128x256",
             "memory_pipelining": 4, "schedule": {}, "median_ms": 0.142, "default_ms": 0.16, "candidates": 12,
             "simulated": 0, "tuned_at": "2025-01-01T00:00:00+00:00", "host": "box", "origin": None}
    store.put_tuned(entry)
    store.put_tuned(entry | {"dtype": "fp16"})
    code, out, _ = cli(capsys, "baseline", "set", "--tuned", "--json")
    assert code == 2 and "2 tuning cache entries match" in json.loads(out)["error"]
    code, out, _ = cli(capsys, "baseline", "set", "--tuned", "--dtype", "bf16", "--shape", "m=8192,n=2560,k=2560",
                       "--json")
    b = json.loads(out)["baseline"]
    assert code == 0 and b["source"] == "tuned" and b["median_ms"] == 0.142 and b["gpu"] == "NVIDIA H200"
    assert b["run_id"] is None and b["simulated"] is False


def test_an_existing_store_gains_the_table_and_keeps_its_runs(tmp_path, capsys):
    """A store made before baselines existed: same runs afterwards, and baselines work in it."""
    from engine.store_file import APPLICATION_ID, SCHEMA

    path = tmp_path / "old.sqlite"
    old_schema = SCHEMA.split("CREATE TABLE IF NOT EXISTS baselines")[0]
    conn = sqlite3.connect(path)
    conn.executescript(f"PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;" + old_schema)
    conn.close()
    code, run, _ = bench(capsys, "--store", str(path))
    assert code == 0
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE baselines")  # as a store written by the version before
    conn.commit()
    conn.close()
    assert [r.id for r in ResultStore(path).list()] == [run["run_id"]]
    b = Baselines(ResultStore(path)).set_from_run(run["run_id"])
    assert b.run_id == run["run_id"] and len(ResultStore(path).list()) == 1
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "tuned", "trials", "kv", "baselines"} <= tables


def test_compare_names_gpu_and_clock_changes_and_a_failed_run_is_not_compared(capsys):
    bench(capsys)
    cli(capsys, "baseline", "set")
    store = ResultStore()
    b = Baselines(store).find()[0]
    res = store.get(b.run_id)
    res.fingerprint.gpu_uuid = "GPU-new"
    res.validity.sm_clock_mhz_max = 1500
    b.fingerprint.update(gpu_uuid="GPU-old", sm_clock_mhz_max=1980)
    v = compare(b, res, 5.0)
    assert not v.regression and {c["area"] for c in v.changes} == {"GPU", "clocks"}
    assert any("GPU UUID: GPU-old -> GPU-new" in line for line in v.lines())
    res.validity.sm_clock_mhz_max = 1965  # boost wander is not a change
    assert {c["area"] for c in compare(b, res).changes} == {"GPU"}
    res.status, res.timing = type(res.status)("timeout"), None
    v = compare(b, res)
    assert v.ratio is None and not v.regression and "timeout" in v.lines()[0]


@pytest.mark.parametrize("text, pct", [("5%", 5.0), ("2.5", 2.5), (" 10 % ", 10.0)])
def test_tolerance_is_a_percentage(text, pct):
    assert parse_tolerance(text) == pct
