"""The one-line status header every screen shows, as nvitop's and k9s's top line:

``SIM · h100-sxm · GPU0 ▕███░░░▏ 41 % 312 W 1755 MHz · run #24 OK``

the device (SIM for the simulated one, GPU, or NO GPU with the key that fixes it), the profile runs
use, a mini-gauge of the GPU the task runs on from the telemetry the Live screen samples, and the
last run or the work in flight. It is one line at any width: parts are shortened, then left out,
least useful first (clocks, power, the bar), and a problem is cut with an ellipsis; its full text
is in the header's tooltip and the ``?`` help. A pure renderer: tested without an app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text

from tui.widgets.gauge import bar_cells, level_style

SEP = " · "
BAR_CELLS = 8


@dataclass(frozen=True)
class HeaderFacts:
    """What the header says, read from the app (attributes down)."""

    device: str
    """'sim', 'cuda' or 'none' (no usable backend)."""
    profile: str | None
    profile_how: str = ""
    """'auto' (detected) or 'chosen' (``u`` on Profile), shown where there is room."""
    problem: str | None = None
    """Why there is no usable GPU (with ``device='none'``)."""
    gpu_index: int = 0
    gpu_state: str = "waiting"
    """The telemetry's state of that GPU: 'ok', 'waiting' or 'not answering'."""
    util_pct: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    work: str = ""
    """What is in flight ('run', 'tune', 'soak', joined), '' when nothing is."""
    last_run: str = ""
    """The last run this session, e.g. 'run #24 OK' ('' before the first)."""


def _badge(f: HeaderFacts) -> Text:
    if f.device == "sim":
        return Text(" SIM ", style="bold reverse yellow")
    if f.device == "none":
        return Text(" NO GPU ", style="bold reverse red")
    return Text(" GPU ", style="bold reverse green")


def _gauge(f: HeaderFacts, level: int) -> Text:
    """The GPU in use at detail ``level``: 3 bar, % W MHz; 2 bar, % W; 1 %; 0 nothing."""
    out = Text(f"GPU{f.gpu_index} ")
    if f.gpu_state == "not answering":
        return out.append("NOT ANSWERING", style="bold red")
    if f.gpu_state != "ok":
        return out.append("waiting", style="dim")
    fraction = None if f.util_pct is None else f.util_pct / 100
    if level >= 2:
        filled, empty = bar_cells(fraction, BAR_CELLS)
        out.append("▕")
        out.append("█" * filled, style=level_style(fraction))
        out.append("░" * empty, style="dim")
        out.append("▏ ")
    out.append("N/A" if f.util_pct is None else f"{f.util_pct:.0f} %")
    if level >= 2 and f.power_w is not None:
        out.append(f" {f.power_w:.0f} W")
    if level >= 3 and f.sm_clock_mhz is not None:
        out.append(f" {f.sm_clock_mhz:.0f} MHz")
    return out


def _run(f: HeaderFacts) -> Text:
    if f.work:
        return Text(f"{f.work} in flight", style="bold yellow")
    if not f.last_run:
        return Text("no run yet", style="dim")
    style = "green" if f.last_run.endswith(" OK") else "bold red"
    return Text(f.last_run, style=style)


def _join(parts: list[Text]) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, p in enumerate(parts):
        if i:
            out.append(SEP, style="dim")
        out.append_text(p)
    return out


def render_status(f: HeaderFacts, width: int) -> Text:
    """The header in at most ``width`` cells (see the module's docstring)."""
    badge = _badge(f)
    profile = Text(f.profile or "no profile", style="bold")
    named = profile.copy()
    if f.profile_how:
        named.append(f" ({f.profile_how})", style="dim")
    if f.device == "none":
        parts = [badge, Text("S uses the SIMULATED device", style="bold"), profile,
                 Text(f.problem or "no usable GPU", style="red")]
        line = _join(parts)
        line.truncate(max(1, width), overflow="ellipsis")
        return line
    run = _run(f)
    candidates = [[badge, named, _gauge(f, 3), run]]
    candidates += [[badge, profile, _gauge(f, level), run] for level in (3, 2, 1)]
    candidates += [[badge, profile, run], [badge, run], [badge]]
    for parts in candidates:
        line = _join(parts)
        if line.cell_len <= width:
            return line
    line = _join(candidates[-1])
    line.truncate(max(1, width), overflow="ellipsis")
    return line


def run_status_word(r: Any) -> str:
    """'ok', 'incorrect', 'compile error', 'cancelled', ...: how a run (a RunResult) ended, in words."""
    status = r.status.value
    if status == "ok" and r.correctness is not None and not r.correctness.correct:
        return "incorrect"
    return str(status).replace("_", " ")


def last_run_label(r: Any) -> str:
    """'run #24 OK' for a run ('run OK' when it was not stored); '' for None (no run yet)."""
    if r is None:
        return ""
    status = run_status_word(r).upper()
    return f"run #{r.run_id} {status}" if r.run_id is not None else f"run {status}"


def header_facts(app: Any) -> HeaderFacts:
    """What the header says now, read from the cockpit app (``tui.app.CockpitApp``): its backend,
    profile, the telemetry of the GPU the task runs on, the work in flight and the last result."""
    choice = app.backend_choice
    prof = app.effective_profile()
    snap = app.telemetry.latest()
    index = app.task_spec.device
    gpu = next((g for g in snap.gpus if g.index == index), snap.gpus[0] if snap.gpus else None)
    sample = gpu.sample if gpu is not None else None
    work = " + ".join(name for name, ev in app.work.items() if not ev.is_set())
    if app.run_active and "run" not in work:
        work = " + ".join(w for w in ("run", work) if w)
    return HeaderFacts(
        device="none" if choice is None else choice.name, profile=prof.name if prof else None,
        profile_how="chosen" if app.profile_name else "auto",
        problem=app.backend_problem, gpu_index=gpu.index if gpu is not None else index,
        gpu_state=gpu.state if gpu is not None else "waiting",
        util_pct=sample.gpu_util_pct if sample else None, power_w=sample.power_w if sample else None,
        sm_clock_mhz=sample.sm_clock_mhz if sample else None, work=work, last_run=last_run_label(app.last_result))
