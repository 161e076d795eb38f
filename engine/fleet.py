"""The fleet view: the reports fleet jobs wrote into one folder (``engine.fleet_report``), read into
one table of GPUs, with the outliers marked. ``tui fleet`` prints it; the cockpit's Fleet screen
shows it.

An outlier is a GPU whose seed SOL % lies more than ``outlier_pct`` % below the median of the GPUs
that ran the same task on the same profile (comparing an H100 with an A100, or bf16 with fp32, says
nothing), a GPU whose bench failed, or a GPU on a host with failed checks.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from pydantic import BaseModel, Field

from engine.errors import InputError
from engine.fleet_report import HostReport, ReportProblem, read_report
from engine.text_safety import visible

MAX_FILES = 5000
"""Report files read at most from one folder (a fleet of 5000 hosts is a large one)."""
DEFAULT_OUTLIER_PCT = 10.0


class FleetRow(BaseModel):
    """One GPU of one host."""

    host: str
    """Host name from the report."""
    index: int = 0
    """Device index inside the job."""
    gpu: str
    """The GPU as the job saw it: its index, and the host's index or UUID it was bound to."""
    gpu_name: str | None = None
    """Product name ('SIMULATED ...' on the simulated device)."""
    uuid: str | None = None
    """NVML's GPU UUID (None on the simulated device)."""
    driver: str | None = None
    """Driver version (None on the simulated device)."""
    failed_checks: list[str] = Field(default_factory=list)
    """Ids of the host's checks that failed."""
    status: str = "-"
    """The bench's status ('ok', 'failed', ...) or why it did not start."""
    sol_pct: float | None = None
    """Seed bench SOL % against the profile's datasheet peaks (None when the bench failed)."""
    median_ms: float | None = None
    """The seed bench's median launch time on this GPU (None when the bench failed)."""
    task: str = ""
    """kernel shape dtype @ profile: the group this GPU is compared within."""
    group_median_pct: float | None = None
    """Median SOL % of the GPUs in the same group."""
    group_median_ms: float | None = None
    """Median of the seed bench's median times of the GPUs in the same group."""
    host_spread_pct: float | None = None
    """(fastest - slowest) / fastest SOL % among this host's GPUs of the same group."""
    simulated: bool = False
    """True for a report of the simulated device: never evidence about the host."""
    time: str = ""
    """When the report was written."""
    file: str = ""
    """The report file, relative to the folder."""
    outlier: bool = False
    """Marked: slow against its group, bench failed, or failed checks."""
    reasons: list[str] = Field(default_factory=list)
    """Why it is marked, in words."""


class FleetFileError(BaseModel):
    """A file in the folder that is not a readable report."""

    file: str
    """Relative to the folder."""
    problem: str
    """What is wrong with it."""


class FleetView(BaseModel):
    """The whole folder as one table."""

    directory: str
    """The folder read."""
    outlier_pct: float
    """Below the group median by more than this % marks a GPU slow."""
    rows: list[FleetRow] = Field(default_factory=list)
    """One per GPU, by host then GPU."""
    errors: list[FleetFileError] = Field(default_factory=list)
    """Files that are not readable reports (listed, never fatal)."""
    superseded: int = 0
    """Older reports of a GPU that a newer report of the same GPU replaced."""
    fleet_spread_pct: dict[str, float] = Field(default_factory=dict)
    """Per group (task): (fastest - slowest) / fastest SOL % across the fleet."""

    @property
    def hosts(self) -> list[str]:
        return sorted({r.host for r in self.rows})

    @property
    def outliers(self) -> list[FleetRow]:
        return [r for r in self.rows if r.outlier]

    @property
    def ok(self) -> bool:
        """Nothing marked and every file readable."""
        return not self.outliers and not self.errors

    def to_json(self) -> dict[str, object]:
        out = self.model_dump(mode="json")
        out.update(hosts=self.hosts, outliers=len(self.outliers), ok=self.ok,
                   simulated=any(r.simulated for r in self.rows))
        return out


SHOWN_CHARS = 200
"""Characters of one text field of a report shown (a status, a check id); the rest is cut."""


def _text(value: object) -> str:
    """Text from a report, as the view holds it: visible (``engine.text_safety``), one line, cut.
    Reports come from other machines: a host name may hold a terminal's title sequence."""
    text = visible(value, one_line=True)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _opt(value: str | None) -> str | None:
    return None if value is None else _text(value)


def _task_label(result: dict) -> str:
    shape = result.get("shape") or {}
    dims = "x".join(str(v) for v in shape.values()) if isinstance(shape, dict) else str(shape)
    return _text(f"{result.get('kernel', '?')} {dims} {result.get('dtype', '?')} @ {result.get('profile', '?')}")


def _rows_of(report: HostReport, file: str) -> list[FleetRow]:
    rows = []
    failed = [_text(c) for c in report.failed_checks]
    benches = {b.device: b for b in report.benches}
    host, when, file = _text(report.host), _text(report.time), _text(file)
    if not report.gpus:  # nothing benched: one row, so the host is not left out of the view
        return [FleetRow(host=host, gpu="-", failed_checks=failed, status=_text(report.error or "no GPU benched"),
                         simulated=report.simulated, time=when, file=file)]
    for gpu in report.gpus:
        bench = benches.get(gpu.index)
        result = (bench.result if bench else None) or {}
        if bench is None:
            status = "not run"
        elif bench.error:
            status = bench.error
        else:
            status = str(result.get("status", "-"))
        label = str(gpu.index) + (f" (host {gpu.visible_as})" if gpu.visible_as and gpu.visible_as != str(gpu.index)
                                  else "")
        rows.append(FleetRow(host=host, index=gpu.index, gpu=_text(label), gpu_name=_opt(gpu.name),
                             uuid=_opt(gpu.uuid), driver=_opt(gpu.driver_version), failed_checks=failed,
                             status=_text(status), sol_pct=bench.sol_pct if bench and bench.ok else None,
                             median_ms=_median_ms(result) if bench and bench.ok else None,
                             task=_task_label(result) if result else "", simulated=report.simulated,
                             time=when, file=file))
    return rows


def _median_ms(result: dict) -> float | None:
    t = result.get("time_ms")
    v = t.get("median") if isinstance(t, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _identity(row: FleetRow) -> tuple[str, str]:
    return row.host, row.uuid or row.gpu


def _spread(values: list[float]) -> float | None:
    if len(values) < 2 or max(values) <= 0:
        return None
    return (max(values) - min(values)) / max(values) * 100.0


def _mark(rows: list[FleetRow], outlier_pct: float) -> dict[str, float]:
    """Fill each row's group median, host spread and outlier marks; return the fleet spreads."""
    groups: dict[str, list[FleetRow]] = {}
    for r in rows:
        if r.sol_pct is not None:
            groups.setdefault(r.task, []).append(r)
    spreads = {}
    for task, members in groups.items():
        values = [m.sol_pct for m in members if m.sol_pct is not None]
        median = statistics.median(values)
        spread = _spread(values)
        if spread is not None:
            spreads[task] = spread
        times = [m.median_ms for m in members if m.median_ms is not None]
        median_ms = statistics.median(times) if times else None
        for m in members:
            m.group_median_pct = median
            m.group_median_ms = median_ms
            on_host = [o.sol_pct for o in members if o.host == m.host and o.sol_pct is not None]
            m.host_spread_pct = _spread(on_host)
            if len(values) > 1 and m.sol_pct is not None and m.sol_pct < median * (1 - outlier_pct / 100.0):
                took = (f" ({m.median_ms:.4g} ms against the group's {median_ms:.4g} ms)"
                        if m.median_ms is not None and median_ms is not None else "")
                m.reasons.append(f"SOL {m.sol_pct:.1f} %{took} is {100 * (1 - m.sol_pct / median):.1f} % below "
                                 f"the median {median:.1f} % of {len(values)} GPUs running {task}")
    for r in rows:
        if r.status != "ok":
            r.reasons.append(f"bench {r.status}" if r.task else f"bench did not run: {r.status}")
        if r.failed_checks:
            r.reasons.append(f"failed checks: {', '.join(r.failed_checks)}")
        r.outlier = bool(r.reasons)
    return spreads


POINT_AT_FOLDER = ("tui fleet DIR reads the JSON reports that `tui fleet-report --output-dir DIR` writes, one per "
                   "host (the jobs of `tui export k8s` and `tui export slurm` run it on every node): run them, "
                   "then give that folder")
"""How to point the fleet view at its folder, said wherever it has none to read."""


def report_files(directory: Path) -> list[Path]:
    """The ``*.json`` files under ``directory`` (sub-folders too; hidden files, such as a report
    being written, left out), sorted."""
    found = []
    for p in sorted(directory.rglob("*.json")):
        rel = p.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        found.append(p)
        if len(found) > MAX_FILES:
            raise InputError(f"DIR={directory}: more than {MAX_FILES} JSON files",
                             fix="point tui fleet at the folder the fleet jobs write, not a parent of many")
    return found


def load_fleet(directory: Path | str, outlier_pct: float = DEFAULT_OUTLIER_PCT) -> FleetView:
    """Read every report under ``directory`` into one view. InputError when the folder is missing,
    not a folder, or holds no JSON file; unreadable files become ``errors``, never exceptions."""
    directory = Path(directory).expanduser()
    if not (0 <= outlier_pct < 100) or outlier_pct != outlier_pct:
        raise InputError(f"--outlier-pct={outlier_pct:g}: outside 0..100",
                         fix="give how far below the median marks a GPU, e.g. 10")
    if not directory.exists():
        raise InputError(f"DIR={directory}: no such folder", fix=POINT_AT_FOLDER)
    if not directory.is_dir():
        raise InputError(f"DIR={directory}: not a folder", fix="give the folder, not a file in it")
    files = report_files(directory)
    if not files:
        raise InputError(f"DIR={directory}: no *.json reports in it", fix=POINT_AT_FOLDER)
    view = FleetView(directory=str(directory), outlier_pct=outlier_pct)
    newest: dict[tuple[str, str], FleetRow] = {}
    for path in files:
        rel = path.relative_to(directory).as_posix()
        try:
            report = read_report(path)
        except ReportProblem as exc:
            view.errors.append(FleetFileError(file=_text(rel), problem=_text(exc)))
            continue
        for row in _rows_of(report, rel):
            key = _identity(row)
            old = newest.get(key)
            if old is not None:
                view.superseded += 1
                if old.time > row.time:
                    continue
            newest[key] = row
    view.rows = sorted(newest.values(), key=lambda r: (r.host, r.index, r.gpu))
    view.fleet_spread_pct = _mark(view.rows, outlier_pct)
    return view
