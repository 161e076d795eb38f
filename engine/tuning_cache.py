"""The tuning cache: the fastest correct knobs a tune found, per GPU model and SM count, kernel, hash
of the kernel's templates and planner, dtype, shape, fusion and timing regime. Entries live in the
results store (one transaction each, so a crash loses none); a changed kernel source changes its
hash, so old entries stop matching. ``--export`` / ``--import`` share entries between machines of
the same GPU model as TOML."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.errors import InputError
from engine.safe_files import write_atomic
from engine.task import TaskSpec
from engine.text_safety import visible
from engine.tomlio import load_toml
from engine.tuned_knobs import TUNED_HERE_LABEL, TunedKnobs
from engine.tuning_import import ImportReport, Refused, check_entries, clean_text
from engine.tuning_key import shape_key
from kernels import get_spec

REGIMES = ("burst", "sustained")
EXPORT_VERSION = 1
EXPORT_MAX_BYTES = 64 * 2**20
"""The largest export read: about 140 000 entries as ``export`` writes them."""


def gpu_label(device_name: str | None, profile: Any, simulated: bool) -> str:
    """The GPU model a cache entry belongs to: the device's own name; on the simulated device
    'SIMULATED <profile>', which no real GPU's lookup can ever match."""
    if simulated or not device_name:
        return f"SIMULATED {profile.name}"
    return device_name


@dataclass(frozen=True)
class CacheScope:
    """Where lookups happen: the store, the GPU model and its SM count, and the regime wanted."""

    store: Any
    gpu: str
    sm_count: int
    regime: str = "burst"

    def key(self, task: TaskSpec) -> dict[str, Any]:
        """The cache key of a task whose shape is normalised."""
        return {"gpu": self.gpu, "sm_count": int(self.sm_count), "kernel": task.kernel,
                "source_hash": get_spec(task.kernel).source_hash(), "dtype": task.dtype.value,
                "shape": shape_key(task.shape), "fusion": int(bool(task.fusion)), "regime": self.regime}

    def lookup(self, task: TaskSpec) -> TunedKnobs | None:
        """The cached best for this task, as ``engine.plan`` takes it; None when there is none (or
        the store cannot be read: a cache miss is never an error)."""
        try:
            entry = self.store.get_tuned(self.key(task))
            return None if entry is None else as_knobs(entry)
        except Exception:  # an unreadable store or a damaged entry: planned without it
            return None

    __call__ = lookup


def as_knobs(entry: dict[str, Any]) -> TunedKnobs:
    """A stored entry as planning takes it, labelled with when and how it was tuned."""
    day = visible(entry.get("tuned_at", ""), one_line=True)[:10]
    origin = f", imported from {_label_text(entry['origin'])}" if entry.get("origin") else ""
    label = f"{TUNED_HERE_LABEL} ({day}, {entry.get('candidates', 0)} candidates{origin})"
    return TunedKnobs(block_size=str(entry["block_size"]), memory_pipelining=int(entry["memory_pipelining"]),
                      schedule=dict(entry.get("schedule") or {}), label=label)


def _label_text(value: Any) -> str:
    """Text of an entry in a label that the CLI and the cockpit print as markup: control
    characters visible, markup brackets replaced (stores written before imports were checked
    may hold anything)."""
    return visible(value, one_line=True).replace("[", "(").replace("]", ")")[:200]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def tuned_lookup(store: Any, device_name: str | None, profile: Any, simulated: bool,
                 regime: str = "burst") -> CacheScope:
    """The lookup the runner and the cockpit pass to ``engine.plan``."""
    return CacheScope(store=store, gpu=gpu_label(device_name, profile, simulated), sm_count=profile.sm_count,
                      regime=regime)


class TuningCache:
    """Export and import of cache entries (TOML, written atomically; read and checked entry by
    entry: ``engine.tuning_import``)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def export(self, path: Path, gpu: str | None = None) -> int:
        """Write every entry (of ``gpu`` when given) to ``path``; returns how many. Never through
        a symbolic link at ``path`` or beside it (``engine.safe_files.write_atomic``)."""
        import tomli_w

        rows = self.store.list_tuned(**({"gpu": gpu} if gpu else {}))
        doc = {"version": EXPORT_VERSION, "exported_at": now_iso(), "host": socket.gethostname(),
               "entry": [{k: v for k, v in r.items() if v is not None} for r in rows]}
        write_atomic(Path(path), tomli_w.dumps(doc), mode=0o644, what="--export")
        return len(rows)

    def import_report(self, path: Path) -> ImportReport:
        """Read entries from ``path`` into the store, each checked first (``engine.tuning_import``),
        all stored in one transaction: the report says how many were imported, skipped (another
        kernel source: they would never match) and refused (index and reason). InputError naming
        the problem for a file that is not an export."""
        doc = load_toml(Path(path), "tuning export", EXPORT_MAX_BYTES)
        if doc.get("version") != EXPORT_VERSION or not isinstance(doc.get("entry"), list):
            raise InputError(f"tuning export {path}: not a tuning export (version {EXPORT_VERSION} with [[entry]] "
                             "tables)", fix="write one with `tui tune --export FILE.toml`")
        try:
            rows, report = check_entries(doc["entry"])
        except InputError as exc:
            raise InputError(f"tuning export {path}: {exc.message}", fix=exc.fix) from None
        try:
            fallback = clean_text(doc.get("host") or Path(path).name, "host")
        except Refused:
            fallback = clean_text(Path(path).name, "host")
        for row in rows:
            row["origin"] = row["origin"] or fallback
        self.store.put_tuned_many(rows)
        return report

    def import_(self, path: Path) -> tuple[int, int]:
        """``import_report`` as (imported, skipped); when entries were refused, the rest are
        stored and an InputError lists the refused ones (index and field), so the caller exits 2
        naming them."""
        report = self.import_report(path)
        if report.refused:
            raise InputError(report.refusal_text(path),
                             fix="correct or drop the entries named (the others are imported); "
                                 "`tui tune --export` writes valid ones")
        return report.imported, report.skipped
