"""The per-host report a fleet job writes (``tui fleet-report``) and ``tui fleet`` reads: the
host's environment checks as ``tui check --json`` prints them and one seed bench per GPU as
``tui bench --json`` prints it, with a schema name and version so a reader can refuse what it does
not know.

The report is built in one process rather than glued from two command outputs in a job script: the
container needs no shell tools (jq), the file is written atomically (a collector never reads half a
report), and the Kubernetes and Slurm jobs run the same command.
"""

from __future__ import annotations

import json
import math
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from engine.errors import InputError
from engine.safe_files import read_bytes, write_atomic
from engine.text_safety import visible

SCHEMA = "sol-cockpit.fleet-report"
VERSION = 1
"""Bumped when a field changes meaning or goes away; readers refuse newer major versions."""
MAX_REPORT_BYTES = 8 * 1024 * 1024
"""A report is a few tens of KiB; anything far larger is not one (and is not read whole)."""
MAX_INT_DIGITS = 19
"""Digits of the longest integer a report holds (64-bit); longer ones are refused, naming the field,
before Python converts them (a 5000-digit integer is a ValueError there)."""
MAX_STRING = 16_384
"""Characters of the longest string in a report (a check's detail is a few hundred)."""
MAX_NAME = 255
"""Characters of a host, GPU or driver name."""
MAX_GPUS = 1024
SOL_PCT_MAX = 10_000.0
"""The largest SOL % taken from a report: a kernel at 100x the speed of light is a damaged report."""


class GpuEntry(BaseModel):
    """One GPU the job benchmarked, as the job saw it."""

    index: int = Field(ge=0, le=MAX_GPUS)
    """Device index inside the job (after CUDA_VISIBLE_DEVICES / the scheduler's binding)."""
    uuid: str | None = Field(default=None, max_length=MAX_NAME)
    """NVML's GPU UUID (None on the simulated device): the stable identity across jobs."""
    name: str | None = Field(default=None, max_length=MAX_NAME)
    """Product name; 'SIMULATED ...' on the simulated device."""
    driver_version: str | None = Field(default=None, max_length=MAX_NAME)
    """The driver NVML reports (None on the simulated device)."""
    pci_bus_id: str | None = Field(default=None, max_length=MAX_NAME)
    """PCI bus id, to find the board in the chassis."""
    visible_as: str | None = Field(default=None, max_length=MAX_NAME)
    """The entry of CUDA_VISIBLE_DEVICES this index maps to (the host's own index or UUID), when
    the scheduler set it."""


class BenchEntry(BaseModel):
    """The seed bench on one GPU."""

    device: int = Field(ge=0, le=MAX_GPUS)
    """Device index the bench ran on (as ``GpuEntry.index``)."""
    result: dict[str, Any] | None = None
    """The object ``tui bench --json`` prints (None when the bench could not start)."""
    error: str | None = None
    """Why the bench could not start (bad task, no backend), in words."""

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.get("status") == "ok" and self.error is None

    @property
    def sol_pct(self) -> float | None:
        v = (self.result or {}).get("sol_pct")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class HostReport(BaseModel):
    """Everything one job learned about one host."""

    report_schema: Literal["sol-cockpit.fleet-report"] = Field(default="sol-cockpit.fleet-report", alias="schema")
    """Always 'sol-cockpit.fleet-report': what this JSON file is."""
    version: int = VERSION
    """Schema version (``VERSION``)."""
    host: str = Field(min_length=1, max_length=MAX_NAME)
    """Host name (a Kubernetes node name, a Slurm node name, or the machine's host name)."""
    time: str = Field(max_length=MAX_NAME)
    """When the report was written, ISO 8601 in UTC."""
    tool_version: str = Field(max_length=MAX_NAME)
    """sol-cockpit's version."""
    backend: str = Field(max_length=MAX_NAME)
    """'cuda' or 'sim'. Reports of the simulated device are labelled SIMULATED wherever shown."""
    simulated: bool
    """True when the benches ran on the simulated device: never evidence about the host's GPUs."""
    job: dict[str, str] = Field(default_factory=dict)
    """Scheduler facts when present: Slurm job and step ids, Kubernetes pod and node names."""
    gpus: list[GpuEntry] = Field(default_factory=list, max_length=MAX_GPUS)
    """The GPUs benchmarked."""
    check: dict[str, Any] | None = None
    """The object ``tui check --json`` prints (None with --no-checks)."""
    benches: list[BenchEntry] = Field(default_factory=list, max_length=MAX_GPUS)
    """One seed bench per GPU, in ``gpus`` order."""
    error: str | None = None
    """Why no GPU was benched (no driver, no device): the host still reports, so the fleet view
    shows it instead of leaving it out."""

    model_config = {"populate_by_name": True}

    @property
    def failed_checks(self) -> list[str]:
        checks = (self.check or {}).get("checks") or []
        return [str(c.get("id")) for c in checks if isinstance(c, dict) and c.get("status") == "fail"]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed_checks and all(b.ok for b in self.benches)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def now_utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def job_facts(env: dict[str, str] | os._Environ[str] | None = None) -> dict[str, str]:
    """The scheduler's ids from the environment (Slurm's, and the pod/node names the Kubernetes
    manifests pass through the downward API)."""
    env = os.environ if env is None else env
    keys = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODELIST", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES",
            "POD_NAME", "POD_NAMESPACE", "NODE_NAME")
    return {k: env[k] for k in keys if env.get(k)}


def default_host(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """The node the job runs on: Kubernetes' node name, Slurm's node, else the host name (a pod's
    host name is the pod's, so the manifests pass NODE_NAME)."""
    env = os.environ if env is None else env
    return clean_host(env.get("NODE_NAME") or env.get("SLURMD_NODENAME") or socket.gethostname())


def clean_host(text: str) -> str:
    """A host name as a report holds it: one line of visible text, no markup brackets (host names
    have none), at most ``MAX_NAME`` characters."""
    return visible(text, one_line=True).replace("[", "(").replace("]", ")")[:MAX_NAME] or "host"


def safe_file_name(text: str) -> str:
    """``text`` usable as a file name: letters, digits, '.', '-' and '_' kept, the rest '_'."""
    out = "".join(c if c.isalnum() or c in ".-_" else "_" for c in text).strip(".")
    return out or "host"


def write_report(report: HostReport, path: Path) -> Path:
    """Write atomically (``engine.safe_files.write_atomic``: a temporary file in the same folder, then
    a rename, never through a link), so that a collector reading the folder never sees half a
    report. The folder is created when missing."""
    text = json.dumps(report.to_json(), indent=2, allow_nan=False, default=str) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text, mode=0o644)
    except OSError as exc:
        raise InputError(f"--output={path}: cannot write into {path.parent}: {exc.strerror or exc}",
                         fix=f"make {path.parent} writable by uid {os.getuid()} (on a Kubernetes node: "
                             f"install -d -o {os.getuid()} {path.parent}), or pass another --output") from None
    return path


class ReportProblem(Exception):
    """A file in a fleet folder that is not a readable report: the reason, in words."""


class _Refused:
    """A value ``json.loads`` met that a report never holds: replaced by this, then named."""

    def __init__(self, why: str) -> None:
        self.why = why


def _int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    return _Refused(f"an integer of {digits} digits") if digits > MAX_INT_DIGITS else int(text)


def _float(text: str) -> float | _Refused:
    value = float(text)
    return value if math.isfinite(value) else _Refused(f"{text[:20]}{'...' if len(text) > 20 else ''}: too large a number")


def _constant(name: str) -> _Refused:
    return _Refused(f"{name}: not a JSON number")


def _first_refusal(data: Any) -> str | None:
    """'field: why' for the first value of ``data`` no report holds (a huge integer, an infinite or
    NaN number, a string longer than ``MAX_STRING``); None when there is none. Iterative: a deep
    document cannot exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _Refused):
            return f"{where or '(top level)'}: {value.why}"
        if isinstance(value, str) and len(value) > MAX_STRING:
            return f"{where or '(top level)'}: a string of {len(value)} characters (at most {MAX_STRING})"
        if isinstance(value, dict):
            for k, v in value.items():
                if len(k) > MAX_NAME:
                    return f"{where or '(top level)'}: a key of {len(k)} characters"
                stack.append((f"{where}.{k}" if where else k, v))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return None


def parse_report(raw: bytes) -> HostReport:
    """The report in ``raw``, or ReportProblem naming the field at fault (never a traceback)."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_int=_int, parse_float=_float, parse_constant=_constant)
    except UnicodeDecodeError:
        raise ReportProblem("not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ReportProblem(f"not JSON: {getattr(exc, 'msg', exc)}"
                            + (f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "")) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ReportProblem(f"not a fleet report (no \"schema\": \"{SCHEMA}\")")
    version = data.get("version")
    if isinstance(version, _Refused) or not isinstance(version, int) or isinstance(version, bool) \
            or version > VERSION or version < 1:
        shown = version.why if isinstance(version, _Refused) else repr(version)[:40]
        raise ReportProblem(f"report version {shown} is not one this tool reads (1..{VERSION}): update sol-cockpit")
    problem = _first_refusal(data)
    if problem is not None:
        raise ReportProblem(visible(problem, one_line=True))
    try:
        report = HostReport.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ReportProblem(visible(f"{where}: {err['msg']}", one_line=True)) from None
    for i, bench in enumerate(report.benches):
        v = (bench.result or {}).get("sol_pct")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not 0 <= v <= SOL_PCT_MAX:
            raise ReportProblem(f"benches[{i}].result.sol_pct: {v:.6g} is outside 0..{SOL_PCT_MAX:g}")
    return report


def read_report(path: Path) -> HostReport:
    """One report file, or ReportProblem saying what is wrong with it and where (never a traceback).
    Read through ``engine.safe_files``: a FIFO, a device or a file over ``MAX_REPORT_BYTES`` is
    refused without being read."""
    try:
        raw = read_bytes(path, "fleet report", MAX_REPORT_BYTES)
    except InputError as exc:
        raise ReportProblem(exc.message.removeprefix(f"fleet report {path}: ")) from None
    return parse_report(raw)


def _visible_entries(env: dict[str, str] | os._Environ[str]) -> list[str]:
    text = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    return [p.strip() for p in text.split(",") if p.strip()] if text else []


def _nvml_index(entry: str | None, cuda_index: int, infos: list[Any]) -> int | None:
    """The NVML index of the GPU CUDA numbers ``cuda_index``: NVML ignores CUDA_VISIBLE_DEVICES,
    whose ``entry`` (an index or a UUID) says which GPU it is; None when it cannot be told (MIG)."""
    if entry is None:
        return cuda_index
    if entry.isdigit():
        return int(entry)
    return next((d.index for d in infos if d.uuid and d.uuid.startswith(entry)), None)


def _cuda_gpus(devices: list[int], env: dict[str, str] | os._Environ[str]) -> list[GpuEntry]:
    from engine import nvml

    driver = nvml.driver_version()
    visible = _visible_entries(env) if env.get("CUDA_VISIBLE_DEVICES") is not None else []
    infos = nvml.devices()
    by_index = {d.index: d for d in infos}
    out = []
    for i in devices:
        entry = visible[i] if i < len(visible) else None
        info = by_index.get(_nvml_index(entry, i, infos))  # type: ignore[arg-type]
        out.append(GpuEntry(index=i, uuid=info.uuid if info else None, name=info.name if info else None,
                            driver_version=driver, pci_bus_id=info.pci_bus_id if info else None, visible_as=entry))
    return out


def check_json(profile: str | None, only: list[str] | None) -> dict[str, Any]:
    """The object ``tui check --json`` prints (the checklist is not touched: a job's checks are
    the fleet's, not this machine's operator's)."""
    from engine.checks import run_checks, summary

    results = run_checks(profile_name=profile, only=only)
    return {"checks": [{"id": r.id, "title": r.title, "status": r.status, "detail": r.detail, "fix": r.fix,
                        "rules": r.rules} for r in results],
            "summary": summary(results), "ok": not any(r.status == "fail" for r in results)}


def collect(task: Any, profile: str | None, devices: Any = None, *, checks: bool = True,
            only: list[str] | None = None, host: str | None = None, on_event: Any = None,
            env: dict[str, str] | os._Environ[str] | None = None) -> HostReport:
    """Run the checks, then the seed bench (``task``, a TaskSpec) on each GPU in turn: ``devices``
    (an index or a ``--device`` selection, as ``engine.multi_device`` reads it), else every GPU
    CUDA numbers (on the simulated device, its ``SOL_COCKPIT_SIM_DEVICES``). Knobs are the kernel's
    defaults, not this host's tuning cache: the fleet compares like with like. Raises InputError
    for a GPU that does not exist, BackendUnavailable without a GPU."""
    from engine import __version__
    from engine.backends.select import choose_backend
    from engine.errors import BackendUnavailable, CockpitError
    from engine.multi_device import DeviceSelection, device_count, resolve
    from engine.runner import prepare, run_prepared
    from engine.task import BackendName

    env = os.environ if env is None else env
    try:
        choice = choose_backend(task.backend.value, devices if isinstance(devices, int) else 0)
    except BackendUnavailable as exc:  # a GPU node without a working driver is a finding, not silence
        return HostReport(host=clean_host(host) if host else default_host(env), time=now_utc(), tool_version=__version__,
                          backend=task.backend.value, simulated=False, job=job_facts(env),
                          check=check_json(profile, only) if checks else None,
                          error=exc.message + (f" (fix: {exc.fix})" if exc.fix else ""))
    simulated = choice.name == "sim"
    indices = resolve(DeviceSelection("all") if devices is None else devices, device_count(choice.name), simulated)
    if simulated:
        visible = _visible_entries(env)
        gpus = [GpuEntry(index=i, visible_as=visible[i] if i < len(visible) else None) for i in indices]
    else:
        gpus = _cuda_gpus(indices, env)
    report = HostReport(host=clean_host(host) if host else default_host(env), time=now_utc(), tool_version=__version__,
                        backend=choice.name, simulated=simulated, job=job_facts(env),
                        check=check_json(profile, only) if checks else None, gpus=gpus)
    for gpu in gpus:
        one = task.model_copy(update={"device": gpu.index, "backend": BackendName(choice.name)})
        try:
            prep = prepare(one, profile)
            res = run_prepared(prep, on_event=on_event)
        except CockpitError as exc:
            report.benches.append(BenchEntry(device=gpu.index, error=exc.message))
            continue
        out = res.summary_json()
        out["notices"] = prep.notices
        out["knobs_from"] = prep.plan.source_label if prep.plan else "default"
        report.benches.append(BenchEntry(device=gpu.index, result=out))
        if simulated:
            gpu.name = res.fingerprint.gpu_name
        elif gpu.name is None:
            gpu.name = res.fingerprint.gpu_name
    report.time = now_utc()
    return report
