"""The results store adopts only the schema it knows (a trigger or a view is refused, the file left
untouched) and tells a full disk, a lock held elsewhere, a read-only store and a damaged file apart,
each with its own fix; reading (history) needs no write, and the pre-run check writes for real."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engine import store as store_mod
from engine import store_file
from engine.errors import InputError
from engine.store import ResultStore
from engine.store_file import SCHEMA
from tests.unit.test_fuzz_inputs import run_main

pytestmark = pytest.mark.timeout(60)


def _digest(path: Path) -> str:
    return hashlib.sha256(b"".join(Path(f"{path}{s}").read_bytes() for s in ("", "-wal")
                                   if Path(f"{path}{s}").exists())).hexdigest()


def _our_store(path: Path) -> ResultStore:
    store = ResultStore(path)
    store.put_state("k", 1, host="h")
    return store


@pytest.mark.parametrize("extra, words", [
    ("CREATE TRIGGER wipe AFTER INSERT ON runs BEGIN DELETE FROM runs; END", "trigger 'wipe' on runs"),
    ("CREATE VIEW v AS SELECT * FROM runs", "view 'v'"),
])
def test_a_store_with_a_trigger_or_a_view_is_refused_and_left_untouched(tmp_path, extra, words):
    unmarked = tmp_path / "old.db"
    conn = sqlite3.connect(unmarked)
    conn.executescript(SCHEMA + extra + ";")
    conn.close()
    marked = tmp_path / "ours.db"
    _our_store(marked)
    conn = sqlite3.connect(marked)
    conn.executescript(extra + ";")
    conn.close()
    for path in (unmarked, marked):
        before = _digest(path)
        with pytest.raises(InputError, match=words) as info:
            ResultStore(path).list()
        assert "never has" in info.value.message and "left unchanged" in info.value.message
        code, _, err = run_main(["bench", "--backend", "sim", "--iterations", "2", "--warmup", "0", "--no-peers",
                                 "--store", str(path)])
        assert code == 2 and words in err and "stored as run" not in err
        assert _digest(path) == before


def _wrap_connect(monkeypatch, pragma: str) -> None:
    """Every write connection of the store runs ``pragma`` first (an SQLite way to make a store
    read-only or full without privileges)."""
    real = store_file.connect

    def connect(path, read_only=False, immutable=False):
        conn = real(path, read_only, immutable)
        if not read_only:
            page_count = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(pragma.format(page_count=page_count))
        return conn

    monkeypatch.setattr(store_mod, "connect", connect)


def test_a_full_disk_says_so_and_history_still_reads(tmp_path, monkeypatch):
    store = _our_store(tmp_path / "s.db")
    _wrap_connect(monkeypatch, "PRAGMA max_page_count = {page_count}")
    with pytest.raises(InputError, match="the disk that holds it is full") as info:
        store.put_state("big", "x" * 100_000)
    assert "df -h" in (info.value.fix or "")
    assert store.get_state("k", host="h") == 1 and store.list() == []
    code, out, err = run_main(["history", "--store", str(tmp_path / "s.db"), "--json"])
    assert code == 0, err


def test_a_lock_held_elsewhere_says_so_and_reading_goes_on(tmp_path, monkeypatch):
    store = _our_store(tmp_path / "s.db")
    monkeypatch.setattr(store_file, "BUSY_TIMEOUT_S", 0.2)
    other = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(InputError, match="another process held its write lock") as info:
            store.put_state("k", 2, host="h")
        assert "fuser" in (info.value.fix or "")
        assert store.get_state("k", host="h") == 1
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_read_only_store_fails_the_pre_run_check(tmp_path, monkeypatch):
    store = _our_store(tmp_path / "s.db")
    _wrap_connect(monkeypatch, "PRAGMA query_only = ON")
    with pytest.raises(InputError, match="cannot be written") as info:
        store.check()
    assert "writable" in (info.value.fix or "")
    assert store.get_state("k", host="h") == 1


def test_a_damaged_store_says_to_move_it_aside(tmp_path):
    path = tmp_path / "s.db"
    store = _our_store(path)
    store.put_state("pad", "x" * 20_000, host="h")
    del store
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\xff" * 4096
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="damaged") as info:
        ResultStore(path).list()
        ResultStore(path).get_state("pad", host="h")
    assert "mv " in (info.value.fix or "") and ".recover" in (info.value.fix or "")


def test_the_four_failures_have_four_fixes(tmp_path):
    path = tmp_path / "s.db"
    fixes = {store_file.store_failure(path, sqlite3.OperationalError(msg)).fix
             for msg in ("database or disk is full", "database is locked", "attempt to write a readonly database",
                         "database disk image is malformed")}
    assert len(fixes) == 4


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def tmpfs(tmp_path):
    """A small tmpfs of our own (root only; skipped elsewhere)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "mnt"
    where.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)):
        pytest.skip("cannot mount a tmpfs here")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_read_only_file_system_with_leftover_wal_files_fails_the_check(tmp_path, tmpfs):
    src = tmp_path / "src.db"
    _our_store(src)
    keep = sqlite3.connect(src)
    keep.execute("PRAGMA wal_autocheckpoint = 0")
    keep.execute("INSERT INTO kv VALUES ('h', 'k2', '2', 't')")
    keep.commit()
    for suffix in ("", "-wal", "-shm"):  # a store left by a killed cockpit: its WAL files beside it
        shutil.copy(f"{src}{suffix}", f"{tmpfs / 's.db'}{suffix}")
    keep.close()
    if not _mount("-o", "remount,ro", str(tmpfs)):
        pytest.skip("cannot remount read-only")
    store = ResultStore(tmpfs / "s.db")
    with pytest.raises(InputError, match="cannot be written"):
        store.check()
    assert store.get_state("k2", host="h") == 2


def test_history_reads_a_store_on_a_full_disk(tmp_path, tmpfs):
    path = tmpfs / "s.db"
    store = _our_store(path)
    with open(tmpfs / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    with pytest.raises(InputError, match="full|I/O"):
        store.put_state("big", "x" * 200_000, host="h")
    code, _, err = run_main(["history", "--store", str(path), "--json"])
    assert code == 0, err
