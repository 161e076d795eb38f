"""A batch of tasks from one TOML file, run one after another in the engine process.

Each task runs under its own wall-clock limit (``timeout_s``, enforced by the engine process), a
failed one is retried once, and the batch stops after ``STOP_AFTER`` failed tasks in a row (a
card or driver that has gone bad fails everything after it; the rest are reported as skipped, not
run). The whole file is validated, and every task planned, before the first one runs, so a typo in
task 7 costs nothing.

The file::

    [defaults]            # optional: keys every task starts from
    backend = "sim"

    [[task]]
    name = "seed shape"   # optional: how the table names it (default: kernel, shape, dtype)
    kernel = "gemm_residual"
    shape = "m=8192,n=2560,k=2560"
    timeout_s = 120
    profile = "h100-sxm"  # optional, as bench --profile
    untuned = false       # optional, as bench --untuned

Task keys are the task file's (``tui bench`` flags by their field names: block_size,
memory_pipelining, iterations, ...)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.errors import InputError
from engine.task import FILE_CONTEXT, TaskSpec, _format_validation_error, resolve_task
from engine.tomlio import load_toml, short_key, short_repr, toml_kind

MAX_ATTEMPTS = 2
"""A failed task is run once more; a second failure is the task's."""
STOP_AFTER = 3
"""Failed tasks in a row after which the batch stops."""
MAX_TASKS = 10_000
"""More tasks than any batch needs: a bound on what a file can ask for."""
EXTRA_KEYS: dict[str, type] = {"name": str, "profile": str, "untuned": bool}
"""Keys a batch task takes besides the task file's."""


@dataclass
class BatchTask:
    """One task of the file, validated."""

    index: int
    """1-based position in the file."""
    name: str
    task: TaskSpec
    profile: str | None = None
    untuned: bool = False


@dataclass
class Attempt:
    """One run of a task."""

    status: str
    run_id: int | None
    median_ms: float | None
    sol_pct: float | None
    error: str | None
    wall_s: float | None
    simulated: bool

    @classmethod
    def of(cls, res: Any) -> Attempt:
        return cls(status=res.status.value, run_id=res.run_id, median_ms=res.timing.median_ms if res.timing else None,
                   sol_pct=None if res.sol is None else res.sol.sol_pct, error=res.error, wall_s=res.wall_s, simulated=res.simulated)


@dataclass
class Outcome:
    """What became of one task: 'ok', 'failed', or 'skipped' (the batch stopped before it)."""

    task: BatchTask
    status: str = "skipped"
    attempts: list[Attempt] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        t = self.task.task
        last = self.attempts[-1] if self.attempts else None
        return {"index": self.task.index, "name": self.task.name, "status": self.status, "kernel": t.kernel,
                "shape": t.shape, "dtype": t.dtype.value, "timeout_s": t.timeout_s, "retried": len(self.attempts) > 1,
                "median_ms": last.median_ms if last else None, "sol_pct": last.sol_pct if last else None,
                "simulated": last.simulated if last else None,
                "attempts": [a.__dict__ for a in self.attempts]}


def _where(path: Path | str, i: int, name: str | None) -> str:
    return f"batch file {path}: task {i}" + (f" ({short_repr(name)})" if name else "")


def load_batch(path: Path, env: Any = None) -> list[BatchTask]:
    """The file's tasks, each validated as a task file's (strict TOML types), merged as bench
    merges a task file and flags: defaults < environment knobs < [defaults] < the task's own keys. InputError naming
    the task and the key for anything wrong."""
    doc = load_toml(Path(path), "batch file")
    other = [short_key(str(k)) for k in doc if k not in ("task", "defaults")]
    if other:
        raise InputError(f"batch file {path}: unknown top-level key(s) {', '.join(other)}",
                         fix="put tasks under [[task]] and shared keys under [defaults]")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise InputError(f"batch file {path}: defaults: expected a table ([defaults]), got {toml_kind(defaults)}")
    tasks = doc.get("task")
    if not isinstance(tasks, list) or not tasks:
        got = "nothing" if tasks is None else toml_kind(tasks)
        raise InputError(f"batch file {path}: task: expected one or more [[task]] tables, got {got}",
                         fix='add [[task]] tables, e.g. [[task]] kernel = "gemm_residual" timeout_s = 120')
    if len(tasks) > MAX_TASKS:
        raise InputError(f"batch file {path}: {len(tasks)} tasks, more than {MAX_TASKS}", fix="split the file")
    out = []
    for i, raw in enumerate(tasks, 1):
        if not isinstance(raw, dict):
            raise InputError(f"{_where(path, i, None)}: expected a table, got {toml_kind(raw)}")
        merged = {**defaults, **raw}
        name = merged.pop("name", None)
        where = _where(path, i, name)
        extra = {k: merged.pop(k) for k in list(merged) if k in EXTRA_KEYS}
        for k, v in ({"name": name} | extra).items():
            if v is not None and not isinstance(v, EXTRA_KEYS[k]):
                raise InputError(f"{where}: {k}={short_repr(v)}: expected {EXTRA_KEYS[k].__name__}, got {toml_kind(v)}")
        try:
            TaskSpec.model_validate(merged, context=FILE_CONTEXT)
        except ValidationError as exc:
            raise InputError(_format_validation_error(exc, where)) from None
        task = resolve_task(None, os.environ if env is None else env, merged)
        out.append(BatchTask(index=i, name=name or task.label(), task=task, profile=extra.get("profile"),
                             untuned=bool(extra.get("untuned", False))))
    return out


RunOne = Callable[[BatchTask], Any]
"""Runs one task once and returns its RunResult (stored, when the caller stores)."""


def run_batch(tasks: list[BatchTask], run_one: RunOne,
              on_attempt: Callable[[Outcome, Attempt], None] | None = None) -> list[Outcome]:
    """Run ``tasks`` in order: a failed one once more, and none after ``STOP_AFTER`` failed tasks
    in a row (those stay 'skipped')."""
    outcomes = [Outcome(task=t) for t in tasks]
    in_a_row = 0
    for o in outcomes:
        if in_a_row >= STOP_AFTER:
            break
        for _ in range(MAX_ATTEMPTS):
            res = run_one(o.task)
            a = Attempt.of(res)
            o.attempts.append(a)
            if on_attempt is not None:
                on_attempt(o, a)
            if res.ok:
                break
        o.status = "ok" if o.attempts[-1].status == "ok" else "failed"
        in_a_row = 0 if o.status == "ok" else in_a_row + 1
    return outcomes


def stopped_early(outcomes: list[Outcome]) -> bool:
    return any(o.status == "skipped" for o in outcomes)
