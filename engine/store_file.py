"""The results store's file: made private to the user, and known to be ours before anything
writes to it.

A missing file becomes a new store, built beside its path and linked into place, so no other
process ever sees it empty or half made. Anything else that is not a cockpit store (an empty file,
a folder, a device, another program's database) is refused before a single byte of it changes:
no WAL switch, no schema. Stores are marked with ``PRAGMA application_id``; an unmarked file
holding only our tables (a store from before the mark) is marked and used. A store holding a
trigger or a view, which a cockpit store never has, is refused on every connection: a trigger
could delete every run while the CLI says "stored as run N".

SQLite's errors are told apart (``store_failure``): a full disk, a lock another process holds, a
read-only file or file system, a file that cannot be opened and a damaged one each say so, with
their own fix, instead of one "not a cockpit store or damaged"."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path
from urllib.parse import quote

from engine.errors import InputError
from engine.paths import private_dir
from engine.safe_files import read_head

APPLICATION_ID = 0x534F4C43
"""``PRAGMA application_id`` of a cockpit store ("SOLC")."""
SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of a store made by this version."""
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 10.0
"""Seconds a connection waits for another one's write lock before the store reports it locked."""
FIX_PATH = "set SOL_COCKPIT_STORE or --store to a writable path"
FIX_FOREIGN = "set SOL_COCKPIT_STORE or --store to another path (a new store is created there)"

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    host TEXT NOT NULL,
    kernel TEXT NOT NULL,
    profile TEXT NOT NULL,
    backend TEXT NOT NULL,
    simulated INTEGER NOT NULL,
    status TEXT NOT NULL,
    dtype TEXT,
    shape TEXT,
    block_size TEXT,
    memory_pipelining INTEGER,
    fusion INTEGER,
    median_ms REAL,
    tflops REAL,
    gbps REAL,
    sol_pct REAL,
    correct INTEGER,
    gpu_name TEXT,
    source_sha256 TEXT,
    result_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_kernel ON runs(kernel, profile);
CREATE TABLE IF NOT EXISTS tuned (
    gpu TEXT NOT NULL,
    sm_count INTEGER NOT NULL,
    kernel TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    dtype TEXT NOT NULL,
    shape TEXT NOT NULL,
    fusion INTEGER NOT NULL,
    regime TEXT NOT NULL,
    block_size TEXT NOT NULL,
    memory_pipelining INTEGER NOT NULL,
    schedule TEXT NOT NULL,
    median_ms REAL NOT NULL,
    default_ms REAL,
    candidates INTEGER NOT NULL,
    simulated INTEGER NOT NULL,
    tuned_at TEXT NOT NULL,
    host TEXT NOT NULL,
    origin TEXT,
    PRIMARY KEY (gpu, sm_count, kernel, source_hash, dtype, shape, fusion, regime)
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tune_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    key_json TEXT NOT NULL,
    trial_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trials_tune ON trials(tune_id);
CREATE TABLE IF NOT EXISTS kv (
    host TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (host, key)
);
CREATE TABLE IF NOT EXISTS baselines (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kernel TEXT NOT NULL,
    shape TEXT NOT NULL,
    dtype TEXT NOT NULL,
    gpu TEXT NOT NULL,
    median_ms REAL NOT NULL,
    tolerance_pct REAL,
    run_id INTEGER,
    source TEXT NOT NULL,
    simulated INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    set_at TEXT NOT NULL,
    host TEXT NOT NULL,
    UNIQUE (kernel, shape, dtype, gpu)
);
CREATE TABLE IF NOT EXISTS soak_samples (
    run_id INTEGER NOT NULL,
    t_s REAL NOT NULL,
    ms REAL,
    launches INTEGER,
    sm_clock_mhz REAL,
    mem_clock_mhz REAL,
    power_w REAL,
    temperature_c REAL,
    throttle_mask INTEGER,
    verified INTEGER
);
CREATE INDEX IF NOT EXISTS soak_samples_run ON soak_samples(run_id, t_s);
CREATE TABLE IF NOT EXISTS tune_jobs (
    tune_id TEXT PRIMARY KEY,
    what TEXT NOT NULL,
    client TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    status TEXT,
    detail TEXT NOT NULL DEFAULT ''
);
"""
"""Every table is created IF NOT EXISTS on each connection: a store made before a table existed
gains it, empty, the first time it is opened, and no existing table changes."""


def _schema_columns() -> dict[str, set[str]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: {c[1] for c in conn.execute(f"PRAGMA table_info('{t}')")} for t in tables}
    finally:
        conn.close()


OUR_COLUMNS = _schema_columns()
"""Table -> columns of a cockpit store (sqlite_sequence included): a file with other tables is not ours."""


def store_error(path: Path, what: str, fix: str = FIX_PATH) -> InputError:
    return InputError(f"results store {path}: {what}", fix=fix)


def ensure_store_file(path: Path, checked: tuple[int, int] | None = None) -> tuple[int, int]:
    """Make sure ``path`` is a cockpit store, creating it when missing; returns its (device,
    inode), and passing that back as ``checked`` skips the checks while the file is the same."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _create(path)
        try:
            st = os.stat(path)
        except OSError as exc:  # e.g. a dangling symbolic link
            raise store_error(path, f"cannot create ({exc.strerror or exc})") from None
        return st.st_dev, st.st_ino
    except OSError as exc:
        raise store_error(path, f"cannot open ({exc.strerror or exc})") from None
    if (st.st_dev, st.st_ino) == checked:
        return checked
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise store_error(path, f"{kind}, not a cockpit store")
    if st.st_size == 0:
        raise store_error(path, "the file is empty, so it is not a cockpit store (nothing was written to it)",
                          fix=f"remove it (a new store is created in its place: rm '{path}') or "
                              "set SOL_COCKPIT_STORE or --store to another path")
    try:
        header = read_head(path, "results store", 100)
    except InputError as exc:
        raise store_error(path, exc.message.removeprefix(f"results store {path}: ")) from None
    if not header.startswith(SQLITE_MAGIC):
        raise store_error(path, "not an SQLite file, so not a cockpit store (left unchanged)", fix=FIX_FOREIGN)
    if int.from_bytes(header[68:72], "big", signed=True) != APPLICATION_ID:
        _adopt(path)
    return st.st_dev, st.st_ino


def connect(path: Path, read_only: bool = False, immutable: bool = False) -> sqlite3.Connection:
    """A read-write (or read-only) connection that never creates the file (sqlite3.connect would,
    silently), with SQLite's untrusted-schema defences on. ``immutable``: read the file as it is,
    without locks, the -shm file or the WAL (exact only when the WAL holds nothing: a full disk
    where the -shm file cannot grow, a read-only file system)."""
    mode = "ro&immutable=1" if immutable else "ro" if read_only else "rw"
    try:
        conn = sqlite3.connect(f"{_uri(path)}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise store_failure(path, exc) from None
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
    except sqlite3.Error:  # an SQLite older than 3.31: the foreign-object check below still holds
        pass
    return conn


def wal_is_empty(path: Path) -> bool:
    """True when the store's WAL holds no transaction (missing or empty)."""
    try:
        return os.stat(f"{path}-wal").st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False


def foreign_objects(conn: sqlite3.Connection) -> list[str]:
    """The triggers and views in the store: a cockpit store has none."""
    rows = conn.execute("SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('trigger', 'view') "
                        "ORDER BY type, name").fetchall()
    return [f"{t} {n!r}" + (f" on {tbl}" if t == "trigger" else "") for t, n, tbl in rows]


def refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """InputError, before anything is read or written, when the store holds a trigger or a view."""
    found = foreign_objects(conn)
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise store_error(path, f"holds {shown}, which a cockpit store never has (a trigger could change or delete "
                                "what is stored); left unchanged",
                          fix=f"move it aside (mv '{path}' '{path}.foreign'; a new store is created), or drop them "
                              f"after reading them (sqlite3 '{path}' .schema)")


_PRIMARY_CODES = {5: "busy", 6: "busy", 8: "readonly", 10: "io", 11: "damaged", 13: "full", 14: "cantopen",
                  26: "damaged"}
"""SQLite's primary result codes (the low byte of an extended code) -> the kind of failure."""
_MESSAGES = (("disk is full", "full"), ("database is locked", "busy"), ("readonly database", "readonly"),
             ("read-only", "readonly"), ("disk i/o error", "io"), ("unable to open", "cantopen"),
             ("not a database", "damaged"), ("malformed", "damaged"))
"""The same kinds told by SQLite's message, where Python does not give the code (before 3.11)."""


def failure_kind(exc: sqlite3.Error) -> str:
    """'full', 'busy', 'readonly', 'io', 'cantopen', 'damaged' or 'other'."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _PRIMARY_CODES:
        return _PRIMARY_CODES[code & 0xFF]
    text = str(exc).lower()
    return next((kind for needle, kind in _MESSAGES if needle in text), "other")


def _no_space(folder: Path) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def store_failure(path: Path, exc: sqlite3.Error) -> InputError:
    """SQLite's error as what happened to the store and its own fix."""
    kind = failure_kind(exc)
    where = path.parent
    if kind in ("io", "cantopen", "other") and _no_space(where):  # SQLite says I/O error when the -shm cannot grow
        kind = "full"
    what, fix = {
        "full": ("the disk that holds it is full",
                 f"free space there (df -h '{where}'), or set SOL_COCKPIT_STORE or --store to a path on another "
                 "disk; reading it (tui history) still works"),
        "busy": (f"another process held its write lock for more than {BUSY_TIMEOUT_S:g} s",
                 f"let the other cockpit, tui bench or tui tune on this store finish (fuser -v '{path}' names it), "
                 "or use another --store"),
        "readonly": ("it cannot be written: the file, its folder or its file system is read-only",
                     f"make the file and its folder writable by uid {os.getuid()} (ls -ld '{path}' '{where}'; its "
                     "-wal and -shm files need the folder), or set SOL_COCKPIT_STORE or --store to a writable "
                     "path; reading it (tui history) still works"),
        "io": ("the disk reported an I/O error", "check the disk (dmesg; df -h) and retry, or use another --store"),
        "cantopen": ("it cannot be opened", f"check that {where} exists and uid {os.getuid()} may write it "
                                            "(the -wal and -shm files are made there), or use another --store"),
        "damaged": ("the file is damaged", f"move it aside (mv '{path}' '{path}.damaged'; a new store is created in "
                                           f"its place); sqlite3 '{path}.damaged' .recover may save its runs"),
        "other": ("SQLite failed", "the file may be damaged: move it aside, or use another --store"),
    }[kind]
    return store_error(path, f"{what} (SQLite: {exc})", fix=fix)


def _uri(path: Path) -> str:
    return "file:" + quote(os.path.abspath(path))


def _adopt(path: Path) -> None:
    """Read an unmarked SQLite file read-only; mark it only if it holds nothing but our tables."""
    try:
        conn = sqlite3.connect(f"{_uri(path)}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0]: {c[1] for c in conn.execute(f"PRAGMA table_info('{r[0]}')")}
                      for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            others = foreign_objects(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        if failure_kind(exc) not in ("damaged", "other"):
            raise store_failure(path, exc) from None
        raise store_error(path, f"cannot read it as SQLite ({exc}); left unchanged", fix=FIX_FOREIGN) from None
    if app_id == APPLICATION_ID:  # marked, but the mark is still in the WAL
        return
    if others:
        raise store_error(path, f"holds {', '.join(others)}, which a cockpit store never has; left unchanged",
                          fix=FIX_FOREIGN)
    foreign = sorted(t for t, cols in tables.items() if t not in OUR_COLUMNS or not OUR_COLUMNS[t] <= cols)
    if app_id != 0 or foreign:
        why = f"application id {app_id:#x}" if app_id else f"table(s) {', '.join(foreign)}"
        raise store_error(path, f"another program's SQLite database ({why}), not a cockpit store; left unchanged",
                          fix=FIX_FOREIGN)
    conn = connect(path)
    try:
        _mark(conn)
    except sqlite3.Error as exc:
        raise store_failure(path, exc) from None
    finally:
        conn.close()


def _mark(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _create(path: Path) -> None:
    """Build the store in a private temporary file beside ``path``, then link it into place (a
    process that loses the race uses the winner's store)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        private_dir(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.fchmod(fd, 0o600)  # whatever the umask; SQLite gives the -wal and -shm files this mode too
        os.close(fd)
        conn = sqlite3.connect(tmp)
        try:
            _mark(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            conn.commit()
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.rename(tmp, path)
    except (OSError, sqlite3.Error) as exc:
        raise store_error(path, f"cannot create ({getattr(exc, 'strerror', None) or exc})") from None
    finally:
        for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            p.unlink(missing_ok=True)
