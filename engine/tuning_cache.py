"""The tuning cache: the fastest correct knobs a tune found, per GPU model and SM count, kernel, hash
of the kernel's templates and planner, dtype, shape, fusion and timing regime. Entries live in the
results store (one transaction each, so a crash loses none); a changed kernel source changes its
hash, so old entries stop matching. ``--export`` / ``--import`` share entries between machines of
the same GPU model as TOML."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.errors import InputError
from engine.planner import TunedKnobs
from engine.task import TaskSpec
from engine.tomlio import load_toml
from kernels import get_spec

REGIMES = ("burst", "sustained")
EXPORT_VERSION = 1


def shape_key(shape: dict[str, int]) -> str:
    """A shape as the cache spells it: 'k=2560,m=8192,n=2560' (sorted names, so any order matches)."""
    return ",".join(f"{k}={int(v)}" for k, v in sorted(shape.items()))


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
        except Exception:
            return None
        return None if entry is None else as_knobs(entry)

    __call__ = lookup


def as_knobs(entry: dict[str, Any]) -> TunedKnobs:
    """A stored entry as planning takes it, labelled with when and how it was tuned."""
    day = str(entry.get("tuned_at", ""))[:10]
    origin = f", imported from {entry['origin']}" if entry.get("origin") else ""
    label = f"tuned {day}, {entry.get('candidates', 0)} candidates{origin}"
    return TunedKnobs(block_size=str(entry["block_size"]), memory_pipelining=int(entry["memory_pipelining"]),
                      schedule=dict(entry.get("schedule") or {}), label=label)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def tuned_lookup(store: Any, device_name: str | None, profile: Any, simulated: bool,
                 regime: str = "burst") -> CacheScope:
    """The lookup the runner and the cockpit pass to ``engine.plan``."""
    return CacheScope(store=store, gpu=gpu_label(device_name, profile, simulated), sm_count=profile.sm_count,
                      regime=regime)


class TuningCache:
    """Export and import of cache entries (TOML, written atomically)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def export(self, path: Path, gpu: str | None = None) -> int:
        """Write every entry (of ``gpu`` when given) to ``path``; returns how many."""
        import tomli_w

        rows = self.store.list_tuned(**({"gpu": gpu} if gpu else {}))
        doc = {"version": EXPORT_VERSION, "exported_at": now_iso(), "host": socket.gethostname(),
               "entry": [{k: v for k, v in r.items() if v is not None} for r in rows]}
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(tomli_w.dumps(doc), encoding="utf-8")
        tmp.replace(path)
        return len(rows)

    def import_(self, path: Path) -> tuple[int, int]:
        """Read entries from ``path`` into the store: (imported, skipped because their kernel source
        differs from this checkout's, so they would never match). InputError naming the problem for
        a file that is not an export."""
        doc = load_toml(Path(path), "tuning export")
        if doc.get("version") != EXPORT_VERSION or not isinstance(doc.get("entry"), list):
            raise InputError(f"{path}: not a tuning export (version {EXPORT_VERSION} with [[entry]] tables)",
                             fix="write one with `tui tune --export FILE.toml`")
        imported = skipped = 0
        for i, e in enumerate(doc["entry"]):
            if not isinstance(e, dict):
                raise InputError(f"{path}: entry {i + 1} is not a table")
            missing = [c for c in self.store.TUNED_COLUMNS if c not in e and c not in ("default_ms", "origin")]
            if missing:
                raise InputError(f"{path}: entry {i + 1} lacks {', '.join(missing)}")
            try:
                current = get_spec(str(e["kernel"])).source_hash()
            except KeyError:
                skipped += 1
                continue
            if e["source_hash"] != current:
                skipped += 1
                continue
            entry = dict(e, origin=e.get("origin") or str(doc.get("host") or Path(path).name))
            entry["schedule"] = json.loads(json.dumps(entry.get("schedule") or {}))
            self.store.put_tuned(entry)
            imported += 1
        return imported, skipped
