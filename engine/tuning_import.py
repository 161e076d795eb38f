"""Checking the entries of a tuning export before they enter the cache (``tui tune --import``).

An export is a file from another machine: an entry is stored only after it reads as a task
(``engine.task``) and its knobs plan on the profile of its GPU as ``engine.plan`` would plan them
from the cache (the kernel's own ``plan`` on the profile's limits; nothing compiles or runs). An
entry that does not is refused with its index and the field at fault, and the others are imported:
one bad entry costs that entry, not the file, and never a traceback in every later ``tui bench`` of
its shape. Text from the file (host, origin, tuned_at) is kept only as visible text of bounded
length: it is printed by every bench that uses the entry.

Work per entry is bounded and memoised per kernel, profile and plan, so the import is linear in
the entries (30 000 in seconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from engine.errors import InputError
from engine.text_safety import has_control, visible
from engine.tomlio import short_repr

MAX_ENTRIES = 200_000
"""Entries one export may hold (a cache of every shape of every model on a fleet is thousands)."""
MAX_TEXT = 200
"""Characters of a host, origin or GPU name kept."""
MAX_LISTED = 20
"""Refused entries named one by one in the error; the rest are counted."""
REGIMES = ("burst", "sustained")
REQUIRED = ("gpu", "sm_count", "kernel", "source_hash", "dtype", "shape", "fusion", "regime", "block_size",
            "memory_pipelining", "schedule", "median_ms", "candidates", "simulated", "tuned_at", "host")


class Refused(ValueError):
    """An entry that is not stored: ``field`` and why."""

    def __init__(self, field_name: str, why: str) -> None:
        super().__init__(f"{field_name}: {why}")
        self.field = field_name


@dataclass
class ImportReport:
    """What an import did: entries stored, entries of another kernel source (they would never
    match), and entries refused as (1-based index, reason naming the field)."""

    imported: int = 0
    skipped: int = 0
    refused: list[tuple[int, str]] = field(default_factory=list)

    def refusal_text(self, path: object) -> str:
        """One message naming the file, each refused entry (the first ``MAX_LISTED``) and its field."""
        listed = "; ".join(f"entry {i}: {why}" for i, why in self.refused[:MAX_LISTED])
        more = f"; and {len(self.refused) - MAX_LISTED} more" if len(self.refused) > MAX_LISTED else ""
        return (f"tuning export {visible(path, one_line=True)}: imported {self.imported}, skipped {self.skipped} "
                f"(another kernel source), refused {len(self.refused)}: {listed}{more}")


def clean_text(value: Any, name: str, *, required: bool = True) -> str | None:
    """A one-line text field of an entry: its control characters written visibly, Rich's and
    Textual's markup brackets replaced, at most ``MAX_TEXT`` characters. Refused: not a string."""
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise Refused(name, f"expected a string, got {short_repr(value)}")
    text = visible(value, one_line=True).replace("[", "(").replace("]", ")")
    return text[:MAX_TEXT] + ("..." if len(text) > MAX_TEXT else "")


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise Refused(name, f"expected an integer {lo}..{hi}, got {short_repr(value)}")
    return value


def _flag(value: Any, name: str) -> int:
    if isinstance(value, bool) or value in (0, 1):
        return int(value)
    raise Refused(name, f"expected true or false, got {short_repr(value)}")


def _ms(value: Any, name: str, *, required: bool = True) -> float | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value < 1e9:
        raise Refused(name, f"expected a time in ms above 0, got {short_repr(value)}")
    return float(value)


def _when(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 40 or has_control(value):
        raise Refused("tuned_at", f"expected an ISO 8601 time, got {short_repr(value)}")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise Refused("tuned_at", f"expected an ISO 8601 time, got {short_repr(value)}") from None
    return value


class EntryChecker:
    """Checks entries one by one, remembering what it learnt (profiles, kernel hashes, plans)."""

    def __init__(self) -> None:
        from engine.profiles import load_profiles

        self.profiles = load_profiles()
        self._profile: dict[str, Any] = {}
        self._hash: dict[str, str | None] = {}
        self._limits: dict[str, Any] = {}
        self._plans: dict[tuple[Any, ...], tuple[str, str] | None] = {}

    def profile_of(self, gpu: str) -> Any:
        """The profile an entry of ``gpu`` plans on: 'SIMULATED <profile>' names it, a GPU model
        is detected as ``tui bench`` detects it."""
        if gpu not in self._profile:
            prof = None
            if gpu.startswith("SIMULATED "):
                try:
                    prof = self.profiles.get(gpu.removeprefix("SIMULATED "))
                except InputError:
                    prof = None
            else:
                prof = self.profiles.detect(gpu)
            self._profile[gpu] = prof
        found = self._profile[gpu]
        if found is None:
            raise Refused("gpu", f"no hardware profile matches {short_repr(gpu)} (`tui profiles` lists them)")
        return found

    def source_hash(self, kernel: str) -> str | None:
        """This checkout's hash of ``kernel``'s sources; None for a kernel not known here."""
        if kernel not in self._hash:
            from kernels import get_spec

            try:
                self._hash[kernel] = get_spec(kernel).source_hash()
            except KeyError:
                self._hash[kernel] = None
        return self._hash[kernel]

    def check(self, e: Any) -> dict[str, Any] | None:
        """The entry as the store keeps it; None when its kernel's sources differ from this
        checkout's (it would never match); Refused naming the field otherwise."""
        if not isinstance(e, dict):
            raise Refused("entry", "not a table")
        missing = [c for c in REQUIRED if c not in e]
        if missing:
            raise Refused(missing[0], "missing" + (f" (also {', '.join(missing[1:])})" if missing[1:] else ""))
        kernel, source_hash = e["kernel"], e["source_hash"]
        if not isinstance(kernel, str) or not kernel.isidentifier() or len(kernel) > 128:
            raise Refused("kernel", f"expected a kernel name, got {short_repr(kernel)}")
        if not isinstance(source_hash, str) or len(source_hash) > 128 or has_control(source_hash):
            raise Refused("source_hash", f"expected a hash, got {short_repr(source_hash)}")
        current = self.source_hash(kernel)
        if current is None or current != source_hash:
            return None
        gpu = e["gpu"]
        if not isinstance(gpu, str) or not gpu.strip() or len(gpu) > MAX_TEXT or has_control(gpu) \
                or "[" in gpu or "]" in gpu:  # part of the key, shown in tables: kept as it is, so only plain text
            raise Refused("gpu", f"expected a GPU model name, got {short_repr(gpu)}")
        if e["regime"] not in REGIMES:
            raise Refused("regime", f"expected {' or '.join(REGIMES)}, got {short_repr(e['regime'])}")
        if not isinstance(e["schedule"], dict):
            raise Refused("schedule", f"expected a table of choices, got {short_repr(e['schedule'])}")
        if not isinstance(e["shape"], str):
            raise Refused("shape", f"expected text such as 'k=2560,m=8192,n=2560', got {short_repr(e['shape'])}")
        if not isinstance(e["dtype"], str):
            raise Refused("dtype", f"expected a dtype name, got {short_repr(e['dtype'])}")
        out = {"gpu": gpu, "sm_count": _int(e["sm_count"], "sm_count", 1, 65_536), "kernel": kernel,
               "source_hash": source_hash, "regime": e["regime"], "fusion": _flag(e["fusion"], "fusion"),
               "median_ms": _ms(e["median_ms"], "median_ms"),
               "default_ms": _ms(e.get("default_ms"), "default_ms", required=False),
               "candidates": _int(e["candidates"], "candidates", 0, 10**9),
               "simulated": _flag(e["simulated"], "simulated"), "tuned_at": _when(e["tuned_at"]),
               "host": clean_text(e["host"], "host"), "origin": clean_text(e.get("origin"), "origin", required=False)}
        out.update(self._planned(e, self.profile_of(gpu)))
        return out

    def _planned(self, e: dict[str, Any], profile: Any) -> dict[str, Any]:
        """The entry's knobs read as a task's and planned on ``profile``: its shape in the cache's
        spelling and its knobs as the planner takes them. Refused naming the field that fails."""
        from engine.task import TaskSpec, parse_shape_text
        from engine.tuning_key import shape_key

        try:
            shape = parse_shape_text(e["shape"])
        except ValueError as exc:
            raise Refused("shape", str(exc)) from None
        data = {"kernel": e["kernel"], "shape": shape, "dtype": e["dtype"], "block_size": e["block_size"],
                "memory_pipelining": e["memory_pipelining"], "schedule": e["schedule"], "fusion": bool(e["fusion"]),
                "backend": "sim"}
        try:
            task = TaskSpec.model_validate(data, context={"source": "file"})
        except ValidationError as exc:
            err = exc.errors()[0]
            name = ".".join(str(p) for p in err["loc"]) or "entry"
            raise Refused(name, str(err["msg"]).removeprefix("Value error, ")) from None
        if task.block_size is None or task.memory_pipelining is None:
            raise Refused("block_size", "a cache entry sets both knobs")
        spec, shape = self._spec_shape(task)
        task = task.model_copy(update={"shape": shape})
        key = (profile.name, task.kernel, task.dtype.value, tuple(sorted(shape.items())), str(task.block_size),
               task.memory_pipelining, tuple(sorted((k, str(v)) for k, v in task.schedule.items())))
        if key not in self._plans:
            self._plans[key] = self._plan_problem(spec, task, profile)
        problem = self._plans[key]
        if problem is not None:
            raise Refused(problem[0], f"does not plan on {profile.name}: {problem[1]}")
        return {"shape": shape_key(shape), "dtype": task.dtype.value, "block_size": str(task.block_size),
                "memory_pipelining": task.memory_pipelining, "schedule": dict(task.schedule)}

    def _spec_shape(self, task: Any) -> tuple[Any, dict[str, int]]:
        from kernels import get_spec

        spec = get_spec(task.kernel)
        try:
            shape = spec.normalize_shape(task.shape)
        except ValueError as exc:
            raise Refused("shape", str(exc)) from None
        if task.dtype.value not in spec.dtypes:
            raise Refused("dtype", f"{spec.name} supports {', '.join(spec.dtypes)}")
        return spec, shape

    def _plan_problem(self, spec: Any, task: Any, profile: Any) -> tuple[str, str] | None:
        """None when the kernel plans ``task`` on ``profile`` as the planner would with this entry
        (``engine.planner``: the tuned knobs and schedule, the profile's limits); else the field
        at fault and why."""
        from kernels import spec as kernel_spec

        refusal = getattr(kernel_spec, "Refusal", None)  # a kernel refuses by value or by KnobError
        if profile.name not in self._limits:
            self._limits[profile.name] = kernel_spec.DeviceLimits.from_profile(profile)
        limits = self._limits[profile.name]
        try:
            kp = spec.plan(task, limits)
        except ValueError as exc:
            return _field_of(str(exc)), str(exc)
        except Exception as exc:  # a kernel's planner meeting values no task file could hold
            return "block_size", f"{type(exc).__name__}: {exc}"
        if refusal is not None and isinstance(kp, refusal):
            return _field_of(kp.violations[0].field), "; ".join(str(v) for v in kp.violations)
        try:
            choices = {k.name: k for k in spec.schedule_knobs(limits, task.dtype.value, task.shape, task.block_size)}
        except Exception:  # no choices to check against: the kernel's plan judged the schedule
            return None
        for name, value in task.schedule.items():
            if name not in choices:
                return "schedule", f"{name}: unknown choice (known here: {', '.join(sorted(choices)) or 'none'})"
            if choices[name].values and value not in choices[name].values:
                return "schedule", f"{name}={short_repr(value)}: one of {', '.join(map(str, choices[name].values))}"
        return None


def _field_of(text: str) -> str:
    """The entry field a kernel's planning message or violation names first ('MEMORY_PIPELINING=9:
    ...' -> memory_pipelining, 'schedule.cluster=...' -> schedule); block_size where it names none."""
    head = text.split(":", 1)[0].split("=", 1)[0].strip().lower()
    root = head.split(".", 1)[0].split("[", 1)[0]
    return root if root in ("memory_pipelining", "schedule", "shape", "dtype", "fusion") else "block_size"


def check_entries(entries: list[Any]) -> tuple[list[dict[str, Any]], ImportReport]:
    """The entries fit to store, and the report of the rest."""
    report = ImportReport()
    if len(entries) > MAX_ENTRIES:
        raise InputError(f"entry: {len(entries)} entries; an export holds at most {MAX_ENTRIES}")
    checker = EntryChecker()
    good: list[dict[str, Any]] = []
    for i, e in enumerate(entries, 1):
        try:
            row = checker.check(e)
        except Refused as exc:
            report.refused.append((i, visible(str(exc), one_line=True)))
            continue
        if row is None:
            report.skipped += 1
        else:
            good.append(row)
    report.imported = len(good)
    return good, report
