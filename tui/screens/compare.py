"""Two stored runs side by side, over the History list (``c``): the task (kernel, shape, dtype,
iterations), the knobs, the figures and the change from the older to the newer. ``esc`` closes it."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from engine import RecordedTask
from tui.widgets.format import fmt, fmt_delta_pct, fmt_ms, fmt_shape, fmt_value
from tui.widgets.run_report import pipe_text

COMPARE_FIELDS = (
    ("status", "status", None), ("task.kernel", "kernel", None), ("task.shape", "shape", None),
    ("task.dtype", "dtype", None), ("task.iterations", "iterations", None),
    ("task.block_size", "BLOCK_SIZE", None), ("task.memory_pipelining", "MEMORY_PIPELINING", None),
    ("task.schedule", "schedule", None), ("task.fusion", "fusion", None),
    ("time_ms.median", "median", True), ("time_ms.p10", "p10", True), ("time_ms.p90", "p90", True),
    ("tflops", "TFLOP/s", False), ("gbps", "GB/s", False), ("sol_pct", "SOL %", False),
    ("solexec_score", "score", False), ("bound", "bound", None), ("correct", "correct", None),
    ("profile", "profile", None), ("simulated", "simulated", None),
)
"""(path in the run's summary, label, lower is better: True/False, None = not a figure)."""


def _get(summary: dict[str, Any], task: RecordedTask, path: str) -> Any:
    if path.startswith("task."):
        return getattr(task, path[5:])
    d: Any = summary
    for part in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def _text(path: str, value: Any) -> str:
    if path.startswith("time_ms"):
        return fmt_ms(value)
    if path == "task.shape":
        return fmt_shape(value)
    if path == "task.memory_pipelining":
        return pipe_text(value)
    if isinstance(value, float):
        return fmt(value, digits=3 if path == "solexec_score" else 2)
    return fmt_value(value)


def compare_runs(a: Any, b: Any) -> Table:
    """Two stored results side by side with the change from ``a`` to ``b``."""
    ja, jb = a.summary_json(), b.summary_json()
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("", no_wrap=True)
    t.add_column(f"#{a.run_id}", justify="right", no_wrap=True)
    t.add_column(f"#{b.run_id}", justify="right", no_wrap=True)
    t.add_column("change", no_wrap=True)
    for path, label, lower_better in COMPARE_FIELDS:
        va, vb = _get(ja, a.task, path), _get(jb, b.task, path)
        if path == "task.schedule" and not va and not vb:
            continue
        if lower_better is not None:
            change = fmt_delta_pct(vb, va, lower_better)
        else:
            change = "differs" if va != vb else ""
        t.add_row(label, _text(path, va), _text(path, vb), change,
                  style="yellow" if va != vb and lower_better is None else "")
    return t


class CompareScreen(ModalScreen[None]):
    """The comparison over the run list, which stays as it was underneath."""

    BINDINGS = [
        Binding("escape", "close", "Close", tooltip="Close the comparison (back to the run list)"),
        Binding("c", "close", "Close", show=False, tooltip="Close the comparison (back to the run list)"),
    ]

    def __init__(self, a: Any, b: Any) -> None:
        super().__init__()
        self.a, self.b = a, b

    def compose(self) -> ComposeResult:
        with Vertical(id="compare-box", classes="overlay"):
            yield Static(Text(f"Run #{self.a.run_id} vs #{self.b.run_id}  (esc closes)", style="bold"),
                         classes="overlay-title")
            with VerticalScroll():
                yield Static(compare_runs(self.a, self.b), id="compare-table")

    def action_close(self) -> None:
        self.dismiss(None)
