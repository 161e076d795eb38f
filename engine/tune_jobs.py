"""Tunes as jobs in the store: each tune notes when it starts and how it ends (``tune_jobs``), so
that a tune started by another process (``tui tune``, another cockpit) shows in the cockpit's Jobs
view, in flight or recent. A tune whose process died without a word (killed) is told apart from one
still running by its process id on this host."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

RECENT = 20
"""Tunes ``recent`` returns at most (the newest first)."""


@dataclass(frozen=True)
class TuneJob:
    """One tune as the store knows it."""

    tune_id: str
    what: str
    """The task's label (kernel, shape, dtype)."""
    client: str
    """What started it: 'tui tune', 'cockpit'."""
    host: str
    pid: int
    started_at: datetime
    ended_at: datetime | None
    status: str
    """'running', how it ended ('done', 'cancelled', 'crashed', 'no candidate', 'interrupted'), or
    'lost' (no end recorded and its process is gone) or 'unknown' (no end recorded, another host)."""
    detail: str
    """The best trial, or the trials timed so far."""

    @property
    def in_flight(self) -> bool:
        return self.status == "running"


def _stamp(when: datetime | None = None) -> str:
    return (when or datetime.now(timezone.utc)).isoformat(timespec="milliseconds")


def started(store: Any, tune_id: str, what: str, client: str, at: datetime | None = None) -> None:
    """Note a tune's start (this process, this host; ``at``: when its budget began, else now)."""
    with store.transaction() as conn:
        conn.execute("INSERT OR REPLACE INTO tune_jobs (tune_id, what, client, host, pid, started_at) "
                     "VALUES (?,?,?,?,?,?)", (tune_id, what, client, socket.gethostname(), os.getpid(), _stamp(at)))


def ended(store: Any, tune_id: str, status: str, detail: str = "") -> None:
    """Note how a tune ended."""
    with store.transaction() as conn:
        conn.execute("UPDATE tune_jobs SET ended_at = ?, status = ?, detail = ? WHERE tune_id = ?",
                     (_stamp(), status, detail, tune_id))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _when(text: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def recent(store: Any, limit: int = RECENT, other_than_pid: int | None = None) -> list[TuneJob]:
    """The newest tunes in the store (those of process ``other_than_pid`` on this host left out: a
    cockpit lists its own tunes itself), with the trials timed so far for those in flight."""
    rows = store.read_rows(
        "SELECT j.tune_id, j.what, j.client, j.host, j.pid, j.started_at, j.ended_at, j.status, j.detail, "
        "(SELECT COUNT(*) FROM trials t WHERE t.tune_id = j.tune_id) "
        "FROM tune_jobs j ORDER BY j.started_at DESC, j.rowid DESC LIMIT ?", (limit + 1,))
    here = socket.gethostname()
    out = []
    for tid, what, client, host, pid, start, end, status, detail, trials in rows:
        begun = _when(start)
        if begun is None or (host == here and pid == other_than_pid):
            continue
        if end is None:
            status = ("running" if _alive(int(pid)) else "lost") if host == here else "unknown"
            detail = f"{trials} trials stored" + ("" if status == "running" else ", no end recorded")
        out.append(TuneJob(str(tid), str(what), str(client), str(host), int(pid), begun, _when(end),
                           str(status), str(detail or "")))
    return out[:limit]
