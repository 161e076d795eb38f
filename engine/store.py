"""Results store: SQLite in WAL mode, one transaction per write, so a killed cockpit loses at most
the run in flight and never corrupts what was saved."""

from __future__ import annotations

import builtins
import json
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from engine.errors import InputError
from engine.paths import store_path
from engine.result import RunResult
from engine.store_file import (
    APPLICATION_ID,
    SCHEMA,
    SCHEMA_VERSION,
    connect,
    ensure_store_file,
    refuse_foreign,
    store_error,
    store_failure,
    wal_is_empty,
)

__all__ = ["APPLICATION_ID", "SCHEMA", "SCHEMA_VERSION", "ResultStore", "RunRecord"]


@dataclass
class RunRecord:
    """A stored run's summary row (the full result is in ``result``)."""

    id: int
    created_at: str
    host: str
    kernel: str
    profile: str
    backend: str
    simulated: bool
    status: str
    dtype: str | None
    shape: dict[str, int]
    block_size: str | None
    memory_pipelining: int | None
    fusion: bool | None
    median_ms: float | None
    tflops: float | None
    gbps: float | None
    sol_pct: float | None
    correct: bool | None
    gpu_name: str | None
    kind: str = "bench"
    """``soak`` for a soak stored as a run (its summary under ``validity.soak``), else ``bench``."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


KIND_SQL = ("CASE WHEN NOT json_valid(result_json) THEN 'bench' "
            "WHEN json_type(result_json, '$.validity.soak') IN ('object', 'array') THEN 'soak' ELSE 'bench' END")
"""A row's kind, read from its stored result (a soak keeps its summary under ``validity.soak``): no
column holds it, so that stores written before keep working and their soaks are told apart too."""
KINDS = ("bench", "soak")


class _MissingTable(Exception):
    """A read-only connection met a table this version added and the store does not have yet."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ResultStore:
    """The SQLite store. Opens (and creates) the file lazily; each call uses its own connection,
    so the store is safe to use from the cockpit's worker threads. The file is checked before
    anything writes to it (``engine.store_file``): what is not a cockpit store is refused unchanged,
    a new one is private to the user (runs record host and GPU identities). A stored value of the
    wrong type is an InputError naming its row, never a traceback in a table or a sort."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else store_path()
        self._checked: tuple[int, int] | None = None
        """(device, inode) of the file last found to be ours: checked once, not per call."""

    def check(self) -> None:
        """Open the store, creating it when missing, take its write lock and write a row that is
        rolled back: a caller about to spend minutes on a run learns before the run, not after it,
        that nothing could be saved (a read-only file opens and even locks; only a write tells)."""
        with self._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("INSERT INTO kv (host, key, value, updated_at) VALUES ('', '', '', '')")
            finally:
                conn.execute("ROLLBACK")

    @contextmanager
    def _conn(self, write: bool = True, immutable: bool = False) -> Iterator[sqlite3.Connection]:
        """A checked connection in one transaction. ``write=False``: read-only, nothing created or
        switched, so reading works on a full disk or a read-only file system (``_MissingTable``
        where a table this version added is not there yet; ``immutable``: see ``connect``).
        SQLite's errors are told apart (``store_failure``)."""
        self._checked = ensure_store_file(self.path, self._checked)
        conn = connect(self.path, read_only=not write, immutable=immutable)
        try:
            refuse_foreign(conn, self.path)
            if write:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(SCHEMA)
            with conn:
                yield conn
        except sqlite3.Error as exc:
            if not write and "no such table" in str(exc):
                raise _MissingTable from None
            raise store_failure(self.path, exc) from None
        finally:
            conn.close()

    def read_rows(self, sql: str, args: Any = ()) -> builtins.list[Any]:
        """The rows of a query (for modules that keep their own table: ``engine.baseline``), read
        without writing: where SQLite cannot even read (a full disk
        that cannot grow the -shm file) and the WAL holds nothing, the file is read as it is; a
        table this version added and the store lacks is created first (that once needs a write)."""
        try:
            try:
                with self._conn(write=False) as conn:
                    return conn.execute(sql, args).fetchall()
            except InputError:
                if not wal_is_empty(self.path):
                    raise
                with self._conn(write=False, immutable=True) as conn:
                    return conn.execute(sql, args).fetchall()
        except _MissingTable:
            with self._conn() as conn:
                return conn.execute(sql, args).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A checked connection holding one transaction, for modules that keep their own table
        (``engine.baseline``): committed when the block ends, rolled back when it raises."""
        with self._conn() as conn:
            yield conn

    def _damaged(self, what: str, table: str, row_id: Any) -> InputError:
        return store_error(self.path, f"{table} row {row_id}: {what}",
                           fix=f"delete that row (sqlite3 '{self.path}' \"DELETE FROM {table} WHERE rowid = {row_id}\") "
                               "or move the store aside")

    def save(self, result: RunResult) -> int:
        """Store one run in one transaction; returns its id (also set on ``result.run_id``)."""
        t = result.task
        sol = result.sol
        row = (
            result.started_at or _now(), result.fingerprint.host or socket.gethostname(),
            t.kernel or "", result.profile, result.fingerprint.backend or t.backend or "",
            int(result.simulated), result.status.value, t.dtype, json.dumps(t.shape),
            t.block_size, t.memory_pipelining, None if t.fusion is None else int(t.fusion),
            result.timing.median_ms if result.timing else None, None if sol is None else sol.tflops,
            None if sol is None else sol.gbps, None if sol is None else sol.sol_pct,
            None if result.correctness is None else int(result.correctness.correct),
            result.fingerprint.gpu_name, result.fingerprint.kernel_source_sha256,
            result.model_dump_json(),
        )
        with self._conn() as conn:
            cur = conn.execute(
                "INSERT INTO runs (created_at, host, kernel, profile, backend, simulated, status, dtype,"
                " shape, block_size, memory_pipelining, fusion, median_ms, tflops, gbps, sol_pct, correct,"
                " gpu_name, source_sha256, result_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            run_id = cast(int, cur.lastrowid)  # an INSERT that returned always sets it
        result.run_id = run_id
        return run_id

    def list(self, kernel: str | None = None, profile: str | None = None, limit: int = 50,
             status: str | None = None, kind: str | None = None) -> list[RunRecord]:
        """Newest first, optionally filtered by kernel, profile, status and kind (``KINDS``)."""
        where, args = [], []
        for col, val in (("kernel", kernel), ("profile", profile), ("status", status), (f"({KIND_SQL})", kind)):
            if val:
                where.append(f"{col} = ?")
                args.append(val)
        sql = ("SELECT id, created_at, host, kernel, profile, backend, simulated, status, dtype, shape,"
               " block_size, memory_pipelining, fusion, median_ms, tflops, gbps, sol_pct, correct, gpu_name,"
               f" {KIND_SQL} FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY id DESC LIMIT ?")
        rows = self.read_rows(sql, (*args, int(limit)))
        return [self._record(r) for r in rows]

    def _record(self, r: tuple[Any, ...]) -> RunRecord:
        """A row as a RunRecord; a value of the wrong type (edited by hand, written by something
        else) is an error naming the row, not a traceback later in a table or a sort."""
        def want(i: int, col: str, types: tuple[type, ...], null: bool = True) -> Any:
            v = r[i]
            if (v is None and null) or (isinstance(v, types) and not isinstance(v, bool)):
                return v
            raise self._damaged(f"{col} is {_short(v)}, not {'/'.join(t.__name__ for t in types)}", "runs", r[0])

        num = (int, float)
        try:
            shape = json.loads(r[9] or "{}")
        except (TypeError, ValueError):
            shape = None
        if not isinstance(shape, dict):
            raise self._damaged(f"shape is {_short(r[9])}, not a JSON object", "runs", r[0])
        return RunRecord(
            id=r[0], created_at=want(1, "created_at", (str,), null=False), host=want(2, "host", (str,), null=False),
            kernel=want(3, "kernel", (str,), null=False), profile=want(4, "profile", (str,), null=False),
            backend=want(5, "backend", (str,), null=False), simulated=bool(want(6, "simulated", (int,), null=False)),
            status=want(7, "status", (str,), null=False), dtype=want(8, "dtype", (str,)), shape=shape,
            block_size=want(10, "block_size", (str,)), memory_pipelining=want(11, "memory_pipelining", (int,)),
            fusion=None if r[12] is None else bool(want(12, "fusion", (int,))), median_ms=want(13, "median_ms", num),
            tflops=want(14, "tflops", num), gbps=want(15, "gbps", num), sol_pct=want(16, "sol_pct", num),
            correct=None if r[17] is None else bool(want(17, "correct", (int,))), gpu_name=want(18, "gpu_name", (str,)),
            kind=r[19],
        )

    def distinct(self, column: str) -> builtins.list[str]:
        """The values of ``kernel`` or ``profile`` among the stored runs, sorted."""
        if column not in ("kernel", "profile"):
            raise ValueError(column)
        return sorted(str(r[0]) for r in self.read_rows(f"SELECT DISTINCT {column} FROM runs"))

    def get(self, run_id: int) -> RunResult | None:
        rows = self.read_rows("SELECT result_json FROM runs WHERE id = ?", (run_id,))
        row = rows[0] if rows else None
        if row is None:
            return None
        try:
            res = RunResult.model_validate_json(row[0])
        except (ValidationError, TypeError, ValueError) as exc:
            raise self._damaged(f"result_json is not a stored run ({str(exc).splitlines()[0]})", "runs", run_id) from None
        res.run_id = run_id
        return res

    # In the class body below, ``list`` is the method above: annotations say ``builtins.list``.
    def best(self, kernel: str | None = None, limit: int = 5) -> builtins.list[RunRecord]:
        """Fastest correct benches (per stored median), for reports; a soak's median is of a card
        held busy for minutes, not a bench of the kernel, and is left out."""
        recs = [r for r in self.list(kernel=kernel, limit=10_000, status="ok", kind="bench")
                if r.median_ms and r.correct is not False]
        return sorted(recs, key=lambda r: r.median_ms or 0.0)[:limit]  # every median is set (filtered above)

    def previous(self, result: RunResult) -> RunResult | None:
        """The run "vs previous" compares ``result`` with: the newest stored run before it of the
        same kernel, shape and dtype, on the same profile and kind of device (simulated or not),
        that is a bench that ended ok: an incorrect, failed or cancelled run and a soak are no
        yardstick."""
        task = result.task
        for r in self.list(kernel=task.kernel, profile=result.profile, limit=200, status="ok", kind="bench"):
            if result.run_id is not None and r.id >= result.run_id:
                continue
            if (r.shape, r.dtype, r.simulated) != (task.shape, task.dtype, result.simulated):
                continue
            if r.median_ms is None or r.correct is False:
                continue
            return self.get(r.id)
        return None

    # --- small per-host key/value state (checklist progress, settings) ----------------------
    def put_state(self, key: str, value: Any, host: str | None = None) -> None:
        host = host or socket.gethostname()
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO kv (host, key, value, updated_at) VALUES (?,?,?,?) "
                "ON CONFLICT(host, key) DO UPDATE SET value=excluded.value, updated_at=excluded.updated_at",
                (host, key, json.dumps(value), _now()),
            )

    def get_state(self, key: str, default: Any = None, host: str | None = None) -> Any:
        host = host or socket.gethostname()
        rows = self.read_rows("SELECT rowid, value FROM kv WHERE host = ? AND key = ?", (host, key))
        row = rows[0] if rows else None
        if row is None:
            return default
        try:
            return json.loads(row[1])
        except (TypeError, ValueError):
            raise self._damaged(f"{key!r} of host {host} is {_short(row[1])}, not JSON", "kv", row[0]) from None

    def get_states(self, prefix: str, host: str | None = None) -> dict[str, Any]:
        """Every state whose key starts with ``prefix`` (key -> value), in one read: what a caller
        reading several keys at once (the checklist's steps) would otherwise open the store for
        one by one. A value that is not JSON is an error naming its row, as ``get_state``'s."""
        host = host or socket.gethostname()
        rows = self.read_rows("SELECT rowid, key, value FROM kv WHERE host = ? AND substr(key, 1, ?) = ?",
                              (host, len(prefix), prefix))
        out = {}
        for rowid, key, value in rows:
            try:
                out[key] = json.loads(value)
            except (TypeError, ValueError):
                raise self._damaged(f"{key!r} of host {host} is {_short(value)}, not JSON", "kv", rowid) from None
        return out

    # --- a soak's series (engine.soak), keyed by the soak's run ----------------------------------
    SOAK_COLUMNS = ("t_s", "ms", "launches", "sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c",
                    "throttle_mask", "verified")

    def save_soak_series(self, run_id: int, windows: builtins.list[dict[str, Any]]) -> None:
        """Every window of a soak, in one transaction."""
        rows = [(run_id, *[None if w.get(c) is None else (int(w[c]) if c == "verified" else w[c])
                           for c in self.SOAK_COLUMNS]) for w in windows]
        with self._conn() as conn:
            conn.executemany(f"INSERT INTO soak_samples (run_id, {', '.join(self.SOAK_COLUMNS)}) VALUES "
                             f"({', '.join('?' * (len(self.SOAK_COLUMNS) + 1))})", rows)

    def soak_series(self, run_id: int) -> builtins.list[dict[str, Any]]:
        """A soak's windows in time order ([] for a run that is not a soak)."""
        rows = self.read_rows(f"SELECT {', '.join(self.SOAK_COLUMNS)} FROM soak_samples WHERE run_id = ? ORDER BY t_s",
                          (run_id,))
        out = []
        for r in rows:
            d = dict(zip(self.SOAK_COLUMNS, r, strict=True))
            d["verified"] = None if d["verified"] is None else bool(d["verified"])
            out.append(d)
        return out

    # --- the tuning cache (engine.tuning_cache) and every trial a tune timed --------------------
    TUNED_KEY = ("gpu", "sm_count", "kernel", "source_hash", "dtype", "shape", "fusion", "regime")
    TUNED_COLUMNS = (*TUNED_KEY, "block_size", "memory_pipelining", "schedule", "median_ms", "default_ms",
                     "candidates", "simulated", "tuned_at", "host", "origin")

    def save_trial(self, tune_id: str, key: dict[str, Any], trial: dict[str, Any]) -> None:
        """One timed (or failed) candidate, in its own transaction: a tune that is cancelled or
        crashes keeps every trial it finished."""
        with self._conn() as conn:
            conn.execute("INSERT INTO trials (tune_id, created_at, key_json, trial_json) VALUES (?,?,?,?)",
                         (tune_id, _now(), json.dumps(key, sort_keys=True), json.dumps(trial, sort_keys=True)))

    def trials(self, tune_id: str) -> builtins.list[dict[str, Any]]:
        rows = self.read_rows("SELECT id, trial_json FROM trials WHERE tune_id = ? ORDER BY id", (tune_id,))
        return [self._json(r[1], "trials", r[0], dict) for r in rows]

    def _json(self, text: Any, table: str, row_id: Any, kind: type) -> Any:
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            value = None
        if not isinstance(value, kind):
            raise self._damaged(f"{_short(text)} is not a JSON {kind.__name__}", table, row_id)
        return value

    def put_tuned(self, entry: dict[str, Any]) -> None:
        """Insert or replace the cache entry for its key (``TUNED_COLUMNS``)."""
        self.put_tuned_many([entry])

    def put_tuned_many(self, entries: builtins.list[dict[str, Any]]) -> None:
        """Insert or replace many cache entries in one transaction (an import: all or none)."""
        at = self.TUNED_COLUMNS.index("schedule")
        rows = []
        for entry in entries:
            row = [entry.get(c) for c in self.TUNED_COLUMNS]
            row[at] = json.dumps(entry.get("schedule") or {}, sort_keys=True)
            rows.append(row)
        with self._conn() as conn:
            conn.executemany(f"INSERT OR REPLACE INTO tuned ({', '.join(self.TUNED_COLUMNS)}) VALUES "
                             f"({', '.join('?' * len(self.TUNED_COLUMNS))})", rows)

    def get_tuned(self, key: dict[str, Any]) -> dict[str, Any] | None:
        rows = self.list_tuned(**key)
        return rows[0] if rows else None

    def list_tuned(self, **where: Any) -> builtins.list[dict[str, Any]]:
        """Cache entries whose key columns equal ``where``'s values, newest first."""
        cols = [c for c in where if c in self.TUNED_KEY]
        sql = (f"SELECT rowid, {', '.join(self.TUNED_COLUMNS)} FROM tuned"
               + (" WHERE " + " AND ".join(f"{c} = ?" for c in cols) if cols else "") + " ORDER BY tuned_at DESC")
        rows = self.read_rows(sql, [where[c] for c in cols])
        out = []
        for r in rows:
            d = dict(zip(self.TUNED_COLUMNS, r[1:], strict=True))
            d["schedule"] = self._json(d["schedule"] or "{}", "tuned", r[0], dict)
            d["fusion"], d["simulated"] = bool(d["fusion"]), bool(d["simulated"])
            out.append(d)
        return out
