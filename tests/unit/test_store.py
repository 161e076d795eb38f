"""The results store: round trip, filters, WAL, and survival of a killed writer."""

import sqlite3
import subprocess
import sys
import time

from engine.result import RunResult, RunStatus, Timing
from engine.store import ResultStore
from tests.unit.test_run_records import sol_of


def _result(kernel="gemm_residual", median=0.2, status=RunStatus.ok):
    return RunResult(status=status, simulated=True, task={"kernel": kernel, "dtype": "bf16", "shape": {"m": 8},
                                                         "block_size": "128x128", "memory_pipelining": 3, "fusion": True},
                     profile="h100-sxm", timing=Timing(median_ms=median, p10_ms=median, p90_ms=median, mean_ms=median,
                                                       min_ms=median, samples=1),
                     sol=sol_of(tflops=1.0, sol_pct=50.0))


def test_roundtrip_and_filters(tmp_path):
    s = ResultStore(tmp_path / "r.sqlite")
    a = s.save(_result(median=0.3))
    b = s.save(_result(kernel="add_rmsnorm", median=0.1))
    assert [r.id for r in s.list()] == [b, a]
    assert [r.id for r in s.list(kernel="gemm_residual")] == [a]
    got = s.get(a)
    assert got.timing.median_ms == 0.3 and got.run_id == a and got.simulated
    assert s.get(999) is None
    assert [r.id for r in s.best()] == [b, a]


def test_wal_mode(tmp_path):
    s = ResultStore(tmp_path / "r.sqlite")
    s.save(_result())
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_state_per_host(tmp_path):
    s = ResultStore(tmp_path / "r.sqlite")
    s.put_state("checklist", {"a": 1}, host="h1")
    assert s.get_state("checklist", host="h1") == {"a": 1}
    assert s.get_state("checklist", host="h2", default="none") == "none"


def test_killed_writer_never_corrupts(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultStore(path).save(_result())
    code = (
        "import sys; sys.path.insert(0, {!r})\n"
        "from tests.unit.test_store import _result\n"
        "from engine.store import ResultStore\n"
        "s = ResultStore({!r})\n"
        "while True: s.save(_result())\n"
    ).format(str(__import__('pathlib').Path(__file__).resolve().parents[2]), str(path))
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(1.5)
    proc.kill()
    proc.wait()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = ResultStore(path).list(limit=100000)
    assert len(n) >= 1


def test_a_file_that_is_not_a_store_is_a_clear_error_and_is_left_alone(tmp_path):
    import pytest

    from engine.errors import InputError

    path = tmp_path / "r.sqlite"
    path.write_bytes(b"not a database, but somebody's file" * 100)
    with pytest.raises(InputError, match="not a cockpit store"):
        ResultStore(path).save(_result())
    assert path.read_bytes().startswith(b"not a database")
