"""The results store refuses what is not its own without changing it, is private to the user,
names damaged rows instead of crashing, and `tui bench` checks it before it runs anything."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.errors import InputError
from engine.result import RunResult, RunStatus, Timing
from engine.store import APPLICATION_ID, ResultStore
from tui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _result(median: float = 0.2) -> RunResult:
    return RunResult(status=RunStatus.ok, simulated=True, profile="h100-sxm",
                     task={"kernel": "gemm_residual", "dtype": "bf16", "shape": {"m": 8}, "block_size": "128x128",
                           "memory_pipelining": 3, "fusion": True},
                     timing=Timing(median_ms=median, p10_ms=median, p90_ms=median, mean_ms=median, min_ms=median,
                                   samples=1))


def _foreign(path: Path, sql: str) -> bytes:
    conn = sqlite3.connect(path)
    conn.executescript(sql)
    conn.commit()
    conn.close()
    return path.read_bytes()


# --- what is not ours is refused, unchanged ---------------------------------------------------

def test_an_empty_file_is_refused_with_a_fix_and_stays_empty(tmp_path):
    path = tmp_path / "r.sqlite"
    path.touch()
    with pytest.raises(InputError, match="empty") as exc:
        ResultStore(path).list()
    assert "rm " in str(exc.value)
    assert path.read_bytes() == b""


def test_another_programs_sqlite_file_is_refused_before_anything_changes(tmp_path):
    path = tmp_path / "notes.db"
    before = _foreign(path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes VALUES (1, 'x');")
    with pytest.raises(InputError, match="another program's SQLite database .*notes"):
        ResultStore(path).save(_result())
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_file_marked_by_another_application_is_refused(tmp_path):
    path = tmp_path / "other.db"
    before = _foreign(path, "PRAGMA application_id = 42;")
    with pytest.raises(InputError, match="application id 0x2a"):
        ResultStore(path).list()
    assert path.read_bytes() == before


def test_a_table_named_like_ours_with_other_columns_is_not_ours(tmp_path):
    path = tmp_path / "other.db"
    before = _foreign(path, "CREATE TABLE runs (who TEXT, lap REAL);")
    with pytest.raises(InputError, match="another program's"):
        ResultStore(path).list()
    assert path.read_bytes() == before


@pytest.mark.parametrize("target", ["folder", "/dev/null"])
def test_a_folder_or_a_device_is_refused(tmp_path, target):
    path = tmp_path if target == "folder" else Path(target)
    with pytest.raises(InputError, match="folder|not a regular file"):
        ResultStore(path).list()


def test_a_new_store_is_marked_and_an_unmarked_store_of_ours_is_adopted(tmp_path):
    new = tmp_path / "new.sqlite"
    ResultStore(new).save(_result())
    conn = sqlite3.connect(new)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
    conn.close()

    old = tmp_path / "old.sqlite"  # a store made before stores were marked
    from engine.store import SCHEMA

    _foreign(old, "PRAGMA journal_mode=WAL;" + SCHEMA)
    s = ResultStore(old)
    s.save(_result())
    assert len(ResultStore(old).list()) == 1
    assert sqlite3.connect(old).execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_processes_creating_one_store_at_once_all_get_it(tmp_path):
    path = tmp_path / "data" / "r.sqlite"
    errors: list[BaseException] = []

    def make(i: int) -> None:
        try:
            ResultStore(path).put_state(f"k{i}", i)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [ResultStore(path).get_state(f"k{i}") for i in range(8)] == list(range(8))
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("r.sqlite")) == []


# --- private files ----------------------------------------------------------------------------

PERMS = """
import os, sqlite3, stat, sys
os.umask(int(sys.argv[2], 8))
from engine.store import ResultStore
path = sys.argv[1]
ResultStore(path).put_state("k", 1)
reader = sqlite3.connect(path)
reader.execute("SELECT count(*) FROM kv").fetchone()  # keeps the -wal and -shm files open
modes = {p: oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (path, path + "-wal", path + "-shm",
                                                             os.path.dirname(path), os.path.dirname(os.path.dirname(path)))}
print(repr(modes))
"""


@pytest.mark.parametrize("umask", ["022", "000"])
def test_store_files_and_folders_are_private_whatever_the_umask(tmp_path, umask):
    path = tmp_path / f"u{umask}" / "data" / "results.sqlite"
    cp = subprocess.run([sys.executable, "-c", PERMS, str(path), umask], cwd=ROOT, capture_output=True, text=True,
                        timeout=60, check=False)
    assert cp.returncode == 0, cp.stderr
    modes = eval(cp.stdout)  # noqa: S307 - our own repr of a dict of strings
    assert modes == {str(path): "0o600", f"{path}-wal": "0o600", f"{path}-shm": "0o600",
                     str(path.parent): "0o700", str(path.parent.parent): "0o700"}


# --- damaged contents: a message naming the row, exit 2, no traceback ----------------------------

def _store_with_runs(tmp_path: Path, n: int = 2) -> Path:
    path = tmp_path / "r.sqlite"
    s = ResultStore(path)
    for i in range(n):
        s.save(_result(0.1 + i))
    return path


def _sql(path: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("column,value,needle", [
    ("shape", "{not json", "shape is"),
    ("shape", "[1, 2]", "not a JSON object"),
    ("median_ms", "fast", "median_ms is 'fast'"),
    ("created_at", b"\x00\xff", "created_at is b'\\x00\\xff'"),
])
def test_a_damaged_run_row_is_named_by_history_and_report(tmp_path, capsys, column, value, needle):
    path = _store_with_runs(tmp_path)
    _sql(path, f"UPDATE runs SET {column} = ? WHERE id = 2", value)
    for argv in (["history", "--store", str(path)], ["report", "--format", "json", "--store", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "runs row 2" in err and needle in err and "DELETE FROM runs" in err, err


def test_a_stored_run_that_is_not_a_run_is_named(tmp_path):
    path = _store_with_runs(tmp_path, 1)
    _sql(path, "UPDATE runs SET result_json = '[]' WHERE id = 1")
    with pytest.raises(InputError, match="runs row 1: result_json"):
        ResultStore(path).get(1)


@pytest.mark.parametrize("value,needle", [("{oops", "not JSON"), (json.dumps([1, 2]), "not an object")])
def test_a_damaged_checklist_row_is_named_with_a_fix(tmp_path, capsys, value, needle):
    path = tmp_path / "r.sqlite"
    s = ResultStore(path)
    s.put_state("checklist.smoke", {"done": True})
    _sql(path, "UPDATE kv SET value = ? WHERE key = 'checklist.smoke'", value)
    assert main(["checklist", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert "smoke" in err and needle in err and "fix:" in err, err
    assert main(["checklist", "--undo", "smoke", "--store", str(path)]) == 0  # the fix it names works


def test_a_damaged_page_is_an_error_not_an_empty_checklist(tmp_path, capsys):
    path = _store_with_runs(tmp_path, 30)
    s = ResultStore(path)
    s.put_state("checklist.checks", {"done": True, "source": "manual"})
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    conn.close()
    with open(path, "r+b") as f:  # the runs table's root page becomes garbage
        f.seek((root - 1) * page)
        f.write(b"\xde\xad" * (page // 2))
    assert main(["checklist", "--store", str(path)]) == 2
    assert "damaged" in capsys.readouterr().err


# --- tui bench: the store is checked before the run; a store lost after it loses no result --------

@pytest.mark.parametrize("target", ["/dev/null", "folder", "empty"])
def test_bench_refuses_an_unusable_store_before_running(tmp_path, capsys, target):
    path = {"/dev/null": Path("/dev/null"), "folder": tmp_path, "empty": tmp_path / "e.sqlite"}[target]
    if target == "empty":
        path.touch()
    assert main(["bench", "--backend", "sim", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert "results store" in err and "compile:" not in err and "timed" not in err


def test_a_store_that_fails_after_the_run_still_prints_the_result(tmp_path, capsys, monkeypatch):
    def broken(self, result):
        raise InputError(f"results store {self.path}: disk I/O error")

    monkeypatch.setattr(ResultStore, "save", broken)
    assert main(["bench", "--backend", "sim", "--json", "--store", str(tmp_path / "r.sqlite")]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["status"] == "ok" and out["time_ms"]["median"] > 0 and out["run_id"] is None
    assert "the run was not stored" in cap.err and "disk I/O error" in cap.err
    assert stat.S_ISREG((tmp_path / "r.sqlite").stat().st_mode)
