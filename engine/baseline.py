"""Performance baselines: a stored run (or the tuning cache's best) marked as what a kernel, shape
and dtype should take on one GPU model, and the comparison of a later run against it.

The operations guide's rule: alert when throughput drops by more than a set fraction after a
change of code, driver or hardware. A run is a regression when its median time exceeds the
baseline's by more than the tolerance (default 5 %); the verdict names what changed in the
fingerprint since the baseline was set (kernel source, driver and CUDA stack, GPU, clocks), so the
reader knows where to look. Baselines live in the results store's ``baselines`` table, one per
(kernel, shape, dtype, GPU model). Simulated runs have their own GPU model ('SIMULATED <profile>'),
so a simulated baseline never judges a real GPU nor the reverse."""

from __future__ import annotations

import argparse
import json
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel

from engine.errors import InputError

DEFAULT_TOLERANCE_PCT = 5.0
"""How much slower than its baseline a median may be before it counts as a regression."""

COMPARED: tuple[tuple[str, str, str], ...] = (
    ("kernel_source_sha256", "kernel source hash", "code"),
    ("engine_version", "engine version", "code"),
    ("driver_version", "driver version", "driver"),
    ("cuda_driver_version", "CUDA driver version", "driver"),
    ("cuda_runtime_version", "CUDA runtime version", "driver"),
    ("nvrtc_version", "NVRTC version", "driver"),
    ("cupy_version", "CuPy version", "driver"),
    ("gpu_name", "GPU name", "GPU"),
    ("gpu_uuid", "GPU UUID", "GPU"),
    ("profile", "profile", "GPU"),
    ("sm_clock_mhz_max", "highest SM clock (MHz)", "clocks"),
    ("sm_clock_mhz_min", "lowest SM clock (MHz)", "clocks"),
    ("power_limit_w", "power limit (W)", "clocks"),
)
"""(fingerprint key, what it is in words, area) of everything two runs are compared on."""
CLOCK_CHANGE = 0.03
"""A clock counts as changed when it moved by more than this fraction: boost clocks wander by a few
MHz from run to run, which names nothing."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def shape_text(shape: Any) -> str:
    """A shape as the key spells it: 'k=2560,m=8192,n=2560' (sorted, as the tuning cache's)."""
    if isinstance(shape, str):
        return shape
    return ",".join(f"{k}={int(v)}" for k, v in sorted((shape or {}).items()))


def gpu_model(gpu_name: str | None, profile: str, simulated: bool) -> str:
    """The GPU model a baseline belongs to: the device's name; on the simulated device 'SIMULATED
    <profile>' (the tuning cache's label), which no real GPU can match."""
    if simulated or not gpu_name:
        return f"SIMULATED {profile}" if simulated else "unknown GPU"
    return gpu_name


def fingerprint_of(result: Any) -> dict[str, Any]:
    """What a run is compared on: its fingerprint plus the clocks and power limit it ran under."""
    fp = result.fingerprint.model_dump(mode="json")
    out = {k: fp.get(k) for k, _, _ in COMPARED if k in fp}
    v = result.validity
    out.update(sm_clock_mhz_max=v.sm_clock_mhz_max, sm_clock_mhz_min=v.sm_clock_mhz_min,
               power_limit_w=v.power_limit_w)
    return out


def parse_tolerance(text: str) -> float:
    """--tolerance: a percentage, '5%' or '5' (a bare number is a percentage too: '0.5' is 0.5 %),
    above 0 and below 100."""
    raw = str(text).strip()
    try:
        value = float(raw.removesuffix("%").strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5% or 2.5, got {raw[:40]!r}") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"must be above 0 and below 100 (a percentage), got {raw[:40]}")
    return value


class Baseline(BaseModel):
    """One baseline: what a kernel, shape and dtype took on one GPU model when it was set."""

    id: int
    """Row id (``tui baseline clear ID``)."""
    kernel: str
    """Kernel name."""
    shape: str
    """Shape as 'k=2560,m=8192,n=2560'."""
    dtype: str
    """Element type."""
    gpu: str
    """GPU model: the device's name, or 'SIMULATED <profile>'."""
    median_ms: float
    """The baseline's median time per launch, in milliseconds."""
    tolerance_pct: float | None = None
    """Tolerance set with the baseline (None: the default, or the one a comparison asks for)."""
    run_id: int | None = None
    """The stored run it was taken from (None for a tuning cache entry)."""
    source: str
    """'run' (a stored run) or 'tuned' (the tuning cache's best)."""
    simulated: bool
    """Set from the simulated device: it judges only simulated runs."""
    fingerprint: dict[str, Any]
    """What the baseline run ran on (``COMPARED``'s keys; a tuned entry knows only some)."""
    set_at: str
    """When it was set (UTC, ISO 8601)."""
    host: str
    """The host that set it."""

    @property
    def key(self) -> str:
        """'kernel/shape/dtype/GPU model': the key ``tui baseline clear`` takes."""
        return f"{self.kernel}/{self.shape}/{self.dtype}/{self.gpu}"


@dataclass
class Verdict:
    """A run against its baseline."""

    baseline: Baseline
    median_ms: float | None
    tolerance_pct: float
    ratio: float | None = None
    """The run's median time over the baseline's (above 1: slower)."""
    regression: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)
    """Fingerprint differences: {field, what, area, baseline, now}."""
    note: str | None = None

    @property
    def slower_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    def to_json(self) -> dict[str, Any]:
        return {"baseline_id": self.baseline.id, "key": self.baseline.key, "baseline_ms": self.baseline.median_ms,
                "baseline_run_id": self.baseline.run_id, "median_ms": self.median_ms, "ratio": self.ratio,
                "slower_pct": self.slower_pct, "tolerance_pct": self.tolerance_pct, "regression": self.regression,
                "changed": sorted({c["area"] for c in self.changes}), "changes": self.changes, "note": self.note}

    def lines(self) -> list[str]:
        """The verdict in words, first line the judgement."""
        b = self.baseline
        if self.ratio is None:
            head = f"baseline #{b.id} ({b.median_ms:.4f} ms): not compared: {self.note}"
        else:
            word = "REGRESSION" if self.regression else "within tolerance"
            head = (f"baseline #{b.id}: {word}: median {self.median_ms:.4f} ms vs {b.median_ms:.4f} ms "
                    f"({self.slower_pct:+.1f} %, tolerance {self.tolerance_pct:g} %)")
        out = [head]
        if self.changes:
            out.append("changed since the baseline (" + ", ".join(sorted({c["area"] for c in self.changes})) + "):")
            out += [f"  {c['what']}: {c['baseline']} -> {c['now']}" for c in self.changes]
        elif self.regression:
            out.append("nothing in the fingerprint changed: look at the GPU's state (other processes, clocks, "
                       "temperature: tui check) and rerun with --rest")
        return out


def compare(baseline: Baseline, result: Any, tolerance_pct: float | None = None) -> Verdict:
    """``result`` (a RunResult) against ``baseline``: the ratio of medians and what changed."""
    tol = tolerance_pct if tolerance_pct is not None else (baseline.tolerance_pct or DEFAULT_TOLERANCE_PCT)
    median = result.timing.median_ms if result.timing is not None else None
    v = Verdict(baseline=baseline, median_ms=median, tolerance_pct=tol)
    now = fingerprint_of(result)
    for key, what, area in COMPARED:
        was, is_ = baseline.fingerprint.get(key), now.get(key)
        if was is None or is_ is None or was == is_:
            continue
        if key.startswith("sm_clock") and isinstance(was, (int, float)) and isinstance(is_, (int, float)) \
                and abs(is_ - was) <= CLOCK_CHANGE * max(abs(was), 1.0):
            continue
        v.changes.append({"field": key, "what": what, "area": area, "baseline": was, "now": is_})
    if not result.ok or not median:
        v.note = f"the run did not finish ({result.status.value})" if not result.ok else "the run has no median"
        return v
    v.ratio = median / baseline.median_ms
    v.regression = v.ratio > 1.0 + tol / 100.0
    return v


class Baselines:
    """The baselines in one results store."""

    COLUMNS = ("id", "kernel", "shape", "dtype", "gpu", "median_ms", "tolerance_pct", "run_id", "source",
               "simulated", "fingerprint", "set_at", "host")

    def __init__(self, store: Any) -> None:
        self.store = store

    def _row(self, r: tuple[Any, ...]) -> Baseline:
        d = dict(zip(self.COLUMNS, r, strict=True))
        try:
            d["fingerprint"] = json.loads(d["fingerprint"])
            return Baseline.model_validate(d)
        except (ValueError, TypeError) as exc:
            from engine.store_file import store_error

            raise store_error(self.store.path, f"baselines row {r[0]}: not a baseline ({str(exc).splitlines()[0]})",
                              fix=f"tui baseline clear {r[0]}") from None

    def find(self, **where: Any) -> list[Baseline]:
        """Baselines whose key columns equal ``where``'s values, by kernel, shape, dtype, GPU."""
        cols = [c for c in ("kernel", "shape", "dtype", "gpu") if where.get(c) is not None]
        sql = (f"SELECT {', '.join(self.COLUMNS)} FROM baselines"
               + (" WHERE " + " AND ".join(f"{c} = ?" for c in cols) if cols else "")
               + " ORDER BY kernel, shape, dtype, gpu")
        rows = self.store.read_rows(sql, [where[c] for c in cols])  # no write: history reads on a full disk
        return [self._row(r) for r in rows]

    def get(self, kernel: str, shape: Any, dtype: str, gpu: str) -> Baseline | None:
        rows = self.find(kernel=kernel, shape=shape_text(shape), dtype=dtype, gpu=gpu)
        return rows[0] if rows else None

    def _put(self, b: dict[str, Any]) -> Baseline:
        cols = [c for c in self.COLUMNS if c != "id"]
        vals = [json.dumps(b[c], sort_keys=True) if c == "fingerprint" else b[c] for c in cols]
        with self.store.transaction() as conn:
            conn.execute(f"INSERT INTO baselines ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                         "ON CONFLICT(kernel, shape, dtype, gpu) DO UPDATE SET "
                         + ", ".join(f"{c}=excluded.{c}" for c in cols if c not in ("kernel", "shape", "dtype", "gpu")),
                         vals)
        got = self.get(b["kernel"], b["shape"], b["dtype"], b["gpu"])
        assert got is not None
        return got

    def set_from_run(self, run_id: int, tolerance_pct: float | None = None) -> Baseline:
        """Mark stored run ``run_id`` as the baseline of its key (replacing the one there was)."""
        res = self.store.get(run_id)
        if res is None:
            raise InputError(f"run={run_id}: no such run in the results store {self.store.path}",
                             fix="tui history lists the stored runs and their ids")
        if not res.ok or res.timing is None:
            raise InputError(f"run={run_id}: its status is {res.status.value}; only a run that finished correctly "
                             "can be a baseline", fix="pick an ok run from tui history")
        if res.validity.soak is not None:
            raise InputError(f"run={run_id}: a soak, whose times are of a card held busy for its duration; a "
                             "baseline is a bench", fix="pick a bench from tui history (status without 'soak')")
        t = res.task
        return self._put({
            "kernel": t.kernel or "", "shape": shape_text(t.shape), "dtype": str(t.dtype),
            "gpu": gpu_model(res.fingerprint.gpu_name, res.profile, res.simulated),
            "median_ms": res.timing.median_ms, "tolerance_pct": tolerance_pct, "run_id": run_id, "source": "run",
            "simulated": int(res.simulated), "fingerprint": fingerprint_of(res), "set_at": _now(),
            "host": res.fingerprint.host or socket.gethostname()})

    def set_from_tuned(self, tolerance_pct: float | None = None, **where: Any) -> Baseline:
        """Mark the tuning cache's best for ``where`` (kernel, shape, dtype, gpu; those given) as the
        baseline; exactly one cache entry must match."""
        key = {k: v for k, v in where.items() if v is not None}
        if "shape" in key:
            key["shape"] = shape_text(key["shape"])
        entries = self.store.list_tuned(**key)
        if not entries:
            raise InputError("no tuning cache entry matches " + (", ".join(f"{k}={v}" for k, v in key.items()) or
                             "(the cache is empty)"), fix="run tui tune first, or pick a stored run: tui baseline set RUN_ID")
        if len(entries) > 1:
            shown = "; ".join(f"{e['kernel']} {e['shape']} {e['dtype']} on {e['gpu']} ({e['regime']})" for e in entries[:6])
            raise InputError(f"{len(entries)} tuning cache entries match: {shown}",
                             fix="narrow it with --kernel, --shape, --dtype and --gpu")
        e = entries[0]
        return self._put({
            "kernel": e["kernel"], "shape": e["shape"], "dtype": e["dtype"], "gpu": e["gpu"],
            "median_ms": float(e["median_ms"]), "tolerance_pct": tolerance_pct, "run_id": None, "source": "tuned",
            "simulated": int(bool(e["simulated"])),
            "fingerprint": {} if e["simulated"] else {"gpu_name": e["gpu"]},
            "set_at": _now(), "host": str(e.get("host") or socket.gethostname())})

    def clear(self, key: str) -> list[Baseline]:
        """Remove the baseline with id ``key``, or with key 'kernel/shape/dtype/GPU', or every one
        ('all'); returns what was removed."""
        text = key.strip()
        if text == "all":
            gone = self.find()
        elif text.lstrip("#").isdigit():
            gone = [b for b in self.find() if b.id == int(text.lstrip("#"))]
        else:
            parts = text.split("/", 3)
            if len(parts) != 4:
                raise InputError(f"key={text[:80]!r}: expected a baseline id or kernel/shape/dtype/GPU model",
                                 fix="tui baseline list shows both")
            gone = self.find(kernel=parts[0], shape=parts[1], dtype=parts[2], gpu=parts[3])
        if not gone:
            raise InputError(f"key={text[:80]!r}: no such baseline", fix="tui baseline list shows the baselines")
        with self.store.transaction() as conn:
            conn.executemany("DELETE FROM baselines WHERE id = ?", [(b.id,) for b in gone])
        return gone

    def table(self) -> dict[tuple[str, str, str, str], Baseline]:
        """(kernel, shape, dtype, GPU model) -> its baseline."""
        return {(b.kernel, b.shape, b.dtype, b.gpu): b for b in self.find()}


def marks(store: Any, records: list[Any]) -> dict[int, dict[str, Any]]:
    """Run id -> {baseline_id, ratio, regression} for the records that have a baseline and a
    median: what History shows beside each run (the baseline's own tolerance, else the default)."""
    table = Baselines(store).table()
    out: dict[int, dict[str, Any]] = {}
    if not table:
        return out
    for r in records:
        b = table.get((r.kernel, shape_text(r.shape), r.dtype or "", gpu_model(r.gpu_name, r.profile, r.simulated)))
        if b is None or not r.median_ms or r.status != "ok" or getattr(r, "kind", "bench") != "bench":
            continue  # a soak's median is of a card held busy for minutes: no bench to judge
        ratio = r.median_ms / b.median_ms
        tol = b.tolerance_pct or DEFAULT_TOLERANCE_PCT
        out[r.id] = {"baseline_id": b.id, "ratio": ratio, "regression": ratio > 1.0 + tol / 100.0}
    return out


@dataclass
class Guard:
    """``tui bench --against-baseline``: the baseline found before the run, judged after it."""

    baseline: Baseline
    tolerance_pct: float | None

    def judge(self, result: Any) -> Verdict:
        return compare(self.baseline, result, self.tolerance_pct)


def guard_for(store: Any, prep: Any, tolerance_pct: float | None) -> Guard:
    """The baseline a prepared run will be judged against; InputError (before anything runs) when
    there is none for its kernel, shape, dtype and GPU model, naming the GPU models that have one."""
    task = prep.task
    gpu = gpu_model(prep.device_name, prep.profile.name, prep.simulated)
    book = Baselines(store)
    shape, dtype = shape_text(task.shape), task.dtype.value
    found = book.get(task.kernel, shape, dtype, gpu)
    others = book.find(kernel=task.kernel, shape=shape, dtype=dtype)
    if found is None and not prep.simulated:  # NVML's name against CUDA's, should they ever differ in case or spaces
        found = next((b for b in others if " ".join(b.gpu.lower().split()) == " ".join(gpu.lower().split())), None)
    if found is None:
        where = f"; baselines exist for {', '.join(b.gpu for b in others)}" if others else ""
        raise InputError(f"--against-baseline: no baseline for {task.kernel} {shape} {dtype} on {gpu}{where}",
                         fix="set one from a stored run: tui baseline set RUN_ID (tui history lists them), "
                             "or from the tuning cache: tui baseline set --tuned")
    return Guard(baseline=found, tolerance_pct=tolerance_pct)
