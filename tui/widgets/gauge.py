"""A one-line gauge: label, bar, value text, and optionally a sparkline of recent values."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui.widgets.format import NA
from tui.widgets.sparkline import spark_text

FULL, EMPTY = "█", "░"


def bar_cells(fraction: float | None, width: int) -> tuple[int, int]:
    """(filled, empty) cell counts for ``fraction`` (clamped to 0..1) in ``width`` cells."""
    if width <= 0:
        return 0, 0
    if fraction is None:
        return 0, width
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return filled, width - filled


def level_style(fraction: float | None, warn: float = 0.8, crit: float = 0.95) -> str:
    if fraction is None:
        return "dim"
    if fraction >= crit:
        return "bold red"
    if fraction >= warn:
        return "yellow"
    return "green"


def render_gauge(label: str, value: float | None, maximum: float | None, value_text: str, width: int,
                 history: list[float | None] | None = None, label_width: int = 11, text_width: int = 16,
                 warn: float = 0.8, crit: float = 0.95) -> Text:
    """``GPU util   ██████░░░░  60 %  ▁▂▅▇`` in exactly ``width`` cells (or fewer when too narrow).

    ``value`` None means the GPU does not support the metric: the bar is empty and the text 'N/A'.
    ``history`` adds a sparkline after the text when there is room (at least 8 cells)."""
    fraction = None if value is None or not maximum else value / maximum
    text = NA if value is None else value_text
    bar_width = max(4, min(30, width - label_width - text_width - 2))
    spark_width = width - label_width - bar_width - text_width - 2
    if history is not None and spark_width < 8:
        bar_width = max(4, width - label_width - text_width - 2)
        spark_width = 0
    out = Text(no_wrap=True, overflow="crop")
    out.append(f"{label[:label_width]:<{label_width}}", style="bold")
    filled, empty = bar_cells(fraction, bar_width)
    out.append(FULL * filled, style=level_style(fraction, warn, crit))
    out.append(EMPTY * empty, style="dim")
    out.append(f" {text:>{text_width - 1}} ")
    if history is not None and spark_width >= 8:
        out.append(spark_text(history, spark_width - 1, lo=0.0, hi=maximum), style="cyan")
    return out


class Gauge(Widget):
    """A gauge line. The screen sets ``reading`` (attributes down); the widget only renders."""

    DEFAULT_CSS = "Gauge { height: 1; width: 1fr; }"

    reading: reactive[tuple | None] = reactive(None, layout=False)
    """(label, value, maximum, value_text, history) or None before the first sample."""

    def __init__(self, label: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.label = label

    def render(self) -> Text:
        if self.reading is None:
            return render_gauge(self.label, None, None, "", self.size.width)
        label, value, maximum, value_text, history = self.reading
        return render_gauge(label, value, maximum, value_text, self.size.width, history=history)
