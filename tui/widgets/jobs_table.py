"""The jobs the cockpit ran this session (runs, tunes, soaks) and the tunes other processes ran
(``tui tune``, another cockpit: from the store), as k9s lists pods: what, status, elapsed. Pure:
the app keeps its records, the Jobs overlay reads the store's, the tests read both."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from rich.text import Text

from tui.widgets.fit_table import Column

KEEP = 50
"""Records kept (the oldest go first)."""
COLUMNS = (Column("kind", "job"), Column("what", "what", min_width=12), Column("status", "status", min_width=10),
           Column("elapsed", "elapsed", key_figure=True), Column("started", "started", hide=6))


@dataclass
class JobRecord:
    """One piece of work: started, maybe ended, how it ended."""

    kind: str
    """'run', 'tune' or 'soak'; for another process's tune, what started it ('cli tune')."""
    what: str
    """The task's label (kernel, shape, dtype)."""
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: datetime.now().strftime("%H:%M:%S"))
    ended: float | None = None
    status: str = "running"
    detail: str = ""
    """How it ended, in a few words ('run #24', 'best 0.1441 ms', the refusal)."""
    pid: int | None = None
    """The process running it where that is not this cockpit (a ``tui tune``): it cannot be
    cancelled from here."""

    @property
    def in_flight(self) -> bool:
        return self.ended is None

    def elapsed_s(self, now: float | None = None) -> float:
        return ((self.ended if self.ended is not None else (now or time.monotonic())) - self.started)


def from_tune_job(job: Any, now_wall: datetime | None = None, now: float | None = None) -> JobRecord:
    """A record of a tune another process noted in the store (``engine.TuneJob``), its times moved
    onto this process's monotonic clock."""
    now_wall = now_wall or datetime.now(timezone.utc)
    now = time.monotonic() if now is None else now
    started = now - (now_wall - job.started_at).total_seconds()
    ended = None if job.in_flight else now - (now_wall - (job.ended_at or now_wall)).total_seconds()
    local = job.started_at.astimezone()
    stamp = local.strftime("%H:%M:%S" if local.date() == now_wall.astimezone().date() else "%b %d %H:%M")
    kind = {"tui tune": "cli tune", "cockpit": "tune (other cockpit)"}.get(job.client, f"tune ({job.client})")
    return JobRecord(kind, job.what, started=started, started_at=stamp, ended=ended,
                     status=job.status, detail=job.detail, pid=job.pid)


def elapsed_text(seconds: float) -> str:
    """'4.2 s', '3 min 05 s', '1 h 02 min'."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def job_cells(job: JobRecord, now: float | None = None) -> tuple[Text, ...]:
    style = {"running": "bold yellow", "ok": "green", "done": "green"}.get(job.status, "red")
    status = job.status + (f" · {job.detail}" if job.detail else "")
    return (Text(job.kind, style="bold"), Text(job.what), Text(status, style=style),
            Text(elapsed_text(job.elapsed_s(now)), justify="right"), Text(job.started_at, style="dim"))


def ended_message(job: JobRecord) -> str:
    """The notification when a job ends: 'run ended: OK · run #24 (1.5 s)'."""
    detail = f" · {job.detail}" if job.detail else ""
    return f"{job.kind} of {job.what} ended: {job.status}{detail} ({elapsed_text(job.elapsed_s())})"
