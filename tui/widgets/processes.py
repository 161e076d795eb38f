"""The processes on a GPU, as nvitop lists them: pid, user, GPU memory, command. Rows are dicts as
``engine.gpu_processes(index)`` returns them (``pid``, ``used_mib``, ``name``, and ``user``,
``command`` and ``ppid`` where known); on the simulated device one row stands for the simulated run's own process
while a run is active. Pure: tested without an app."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tui.widgets.format import NA, fmt_mib

LABEL_WIDTH = 11
"""Cells of the left label column, as the gauges above it have."""
MEMORY_FALLBACK_MIB = 1400.0
"""What the simulated card shows as used by a run it has no load model for (engine.telemetry's
generic load), so the process row and the Mem used gauge agree."""


def simulated_processes(source: Any, task_label: str, user: str) -> list[dict[str, Any]]:
    """The simulated run's process while the simulated source says a run is active, else none.
    ``source``: the sampler's ``sim_source`` (None: not a simulated sampler)."""
    if source is None or not getattr(source, "active", False):
        return []
    load = getattr(source, "load", None)
    mib = float(load.memory_mib) if load is not None else MEMORY_FALLBACK_MIB
    return [{"pid": None, "user": user, "used_mib": mib, "command": f"engine run {task_label}", "simulated": True}]


def _mem(row: dict[str, Any]) -> float:
    used = row.get("used_mib")
    return float(used) if isinstance(used, (int, float)) else -1.0


PROCESS_SORTS = ("memory", "pid", "user", "command")
"""The process list's orders, as ``o`` on Live cycles through them (largest GPU memory first)."""


def process_sort_key(order: str):
    """The key function of an order of ``PROCESS_SORTS`` over process rows."""
    if order == "pid":
        return lambda r: (r.get("pid") is None, r.get("pid") or 0)
    if order in ("user", "command"):
        return lambda r: str(r.get(order) or r.get("name") or "").lower()
    return lambda r: -_mem(r)


def render_processes(rows: list[dict[str, Any]] | None, width: int, note: str = "",
                     own_pid: int | None = None, order: str = "memory") -> Text:
    """``Processes`` and a table (largest GPU memory first) in at most ``width`` cells a line;
    ``rows`` None: the list is not available (``note`` says why); [] : none, with ``note`` after.
    A row whose parent is ``own_pid`` is this cockpit's engine process and says so."""
    out = Text(no_wrap=True, overflow="crop")
    out.append(f"{'Processes':<{LABEL_WIDTH}}", style="bold")
    if rows is None:
        out.append(f"{NA}: {note}" if note else NA, style="dim")
        return out
    if not rows:
        out.append("none on this GPU" + (f" ({note})" if note else ""), style="dim")
        return out
    marks = {o: ("▼" if o == order and order != "memory" else "") for o in PROCESS_SORTS}  # the default: unmarked
    head = (f"{'PID' + marks['pid']:>7}  {'USER' + marks['user']:<10} {'GPU MEM' + marks['memory']:>9}  "
            f"COMMAND{marks['command']}")
    out.append(head[: max(0, width - LABEL_WIDTH)], style="bold")
    if note:
        out.append(f"  {note}", style="dim")
    for row in sorted(rows, key=process_sort_key(order)):
        pid = row.get("pid")
        user = str(row.get("user") or NA)
        command = " ".join(str(row.get("command") or row.get("name") or NA).split())
        if own_pid is not None and row.get("ppid") == own_pid:
            command += "  (this cockpit's run)"
        sim = bool(row.get("simulated"))
        if sim:
            command += " [SIMULATED]"
        used = row.get("used_mib")
        line = (f"{'':<{LABEL_WIDTH}}{'-' if pid is None else pid:>7}  {user[:10]:<10} "
                f"{fmt_mib(used) if isinstance(used, (int, float)) else NA:>9}  {command}")
        out.append("\n")
        out.append(line[:width], style="magenta" if sim else "")
    return out
