"""Results store: SQLite in WAL mode, one transaction per write, so a killed cockpit loses at most
the run in flight and never corrupts what was saved."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.errors import InputError
from engine.paths import store_path
from engine.result import RunResult

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
"""


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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ResultStore:
    """The SQLite store. Opens (and creates) the file lazily; each call uses its own connection,
    so the store is safe to use from the cockpit's worker threads."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else store_path()

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=10)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"results store {self.path}: cannot open ({exc})",
                             fix="set SOL_COCKPIT_STORE or --store to a writable path") from None
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            with conn:
                yield conn
        except sqlite3.DatabaseError as exc:
            raise InputError(f"results store {self.path}: {exc}",
                             fix="the file is not a cockpit store or is damaged; move it aside") from None
        finally:
            conn.close()

    def save(self, result: RunResult) -> int:
        """Store one run in one transaction; returns its id (also set on ``result.run_id``)."""
        t = result.task
        sol = result.sol or {}
        row = (
            result.started_at or _now(), result.fingerprint.host or socket.gethostname(),
            t.get("kernel", ""), result.profile, result.fingerprint.backend or t.get("backend", ""),
            int(result.simulated), result.status.value, t.get("dtype"), json.dumps(t.get("shape")),
            t.get("block_size"), t.get("memory_pipelining"),
            None if t.get("fusion") is None else int(t["fusion"]),
            result.timing.median_ms if result.timing else None, sol.get("tflops"), sol.get("gbps"),
            sol.get("sol_pct"), None if result.correctness is None else int(result.correctness.correct),
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
            run_id = int(cur.lastrowid)
        result.run_id = run_id
        return run_id

    def list(self, kernel: str | None = None, profile: str | None = None, limit: int = 50,
             status: str | None = None) -> list[RunRecord]:
        """Newest first, optionally filtered by kernel, profile and status."""
        where, args = [], []
        for col, val in (("kernel", kernel), ("profile", profile), ("status", status)):
            if val:
                where.append(f"{col} = ?")
                args.append(val)
        sql = ("SELECT id, created_at, host, kernel, profile, backend, simulated, status, dtype, shape,"
               " block_size, memory_pipelining, fusion, median_ms, tflops, gbps, sol_pct, correct, gpu_name"
               " FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY id DESC LIMIT ?")
        with self._conn() as conn:
            rows = conn.execute(sql, (*args, int(limit))).fetchall()
        out = []
        for r in rows:
            out.append(RunRecord(
                id=r[0], created_at=r[1], host=r[2], kernel=r[3], profile=r[4], backend=r[5],
                simulated=bool(r[6]), status=r[7], dtype=r[8], shape=json.loads(r[9] or "{}"),
                block_size=r[10], memory_pipelining=r[11], fusion=None if r[12] is None else bool(r[12]),
                median_ms=r[13], tflops=r[14], gbps=r[15], sol_pct=r[16],
                correct=None if r[17] is None else bool(r[17]), gpu_name=r[18],
            ))
        return out

    def get(self, run_id: int) -> RunResult | None:
        with self._conn() as conn:
            row = conn.execute("SELECT result_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        res = RunResult.model_validate_json(row[0])
        res.run_id = run_id
        return res

    def best(self, kernel: str | None = None, limit: int = 5) -> list[RunRecord]:
        """Fastest correct runs (per stored median), for reports."""
        recs = [r for r in self.list(kernel=kernel, limit=10_000, status="ok") if r.median_ms]
        return sorted(recs, key=lambda r: r.median_ms)[:limit]

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
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM kv WHERE host = ? AND key = ?", (host, key)).fetchone()
        return default if row is None else json.loads(row[0])

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

    def trials(self, tune_id: str) -> list[dict[str, Any]]:
        with self._conn() as conn:
            rows = conn.execute("SELECT trial_json FROM trials WHERE tune_id = ? ORDER BY id", (tune_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def put_tuned(self, entry: dict[str, Any]) -> None:
        """Insert or replace the cache entry for its key (``TUNED_COLUMNS``)."""
        row = [entry.get(c) for c in self.TUNED_COLUMNS]
        row[self.TUNED_COLUMNS.index("schedule")] = json.dumps(entry.get("schedule") or {}, sort_keys=True)
        with self._conn() as conn:
            conn.execute(f"INSERT OR REPLACE INTO tuned ({', '.join(self.TUNED_COLUMNS)}) VALUES "
                         f"({', '.join('?' * len(self.TUNED_COLUMNS))})", row)

    def get_tuned(self, key: dict[str, Any]) -> dict[str, Any] | None:
        rows = self.list_tuned(**key)
        return rows[0] if rows else None

    def list_tuned(self, **where: Any) -> list[dict[str, Any]]:
        """Cache entries whose key columns equal ``where``'s values, newest first."""
        cols = [c for c in where if c in self.TUNED_KEY]
        sql = (f"SELECT {', '.join(self.TUNED_COLUMNS)} FROM tuned"
               + (" WHERE " + " AND ".join(f"{c} = ?" for c in cols) if cols else "") + " ORDER BY tuned_at DESC")
        with self._conn() as conn:
            rows = conn.execute(sql, [where[c] for c in cols]).fetchall()
        out = []
        for r in rows:
            d = dict(zip(self.TUNED_COLUMNS, r, strict=True))
            d["schedule"] = json.loads(d["schedule"] or "{}")
            d["fusion"], d["simulated"] = bool(d["fusion"]), bool(d["simulated"])
            out.append(d)
        return out
