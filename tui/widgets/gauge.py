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


def gauge_layout(width: int, history: bool, label_width: int = 11, text_width: int = 16) -> tuple[int, int]:
    """(bar cells, sparkline cells) of a gauge ``width`` cells wide; the sparkline needs at least 7
    cells (else it is left out and the bar takes its room) and starts at column ``label_width +
    bar + text_width + 1``."""
    bar_width = max(4, min(30, width - label_width - text_width - 2))
    spark_width = width - label_width - bar_width - text_width - 2
    if history and spark_width < 8:
        return max(4, width - label_width - text_width - 2), 0
    return bar_width, max(0, spark_width - 1) if history else 0


def render_gauge(label: str, value: float | None, maximum: float | None, value_text: str, width: int,
                 history: list[float | None] | None = None, label_width: int = 11, text_width: int = 16,
                 warn: float = 0.8, crit: float = 0.95) -> Text:
    """``GPU util   ██████░░░░  60 %  ▁▂▅▇`` in exactly ``width`` cells (or fewer when too narrow).

    ``value`` None means the GPU does not support the metric: the bar is empty and the text 'N/A'.
    ``history`` adds a sparkline after the text when there is room (at least 8 cells)."""
    fraction = None if value is None or not maximum else value / maximum
    text = NA if value is None else value_text
    bar_width, spark_cells = gauge_layout(width, history is not None, label_width, text_width)
    out = Text(no_wrap=True, overflow="crop")
    out.append(f"{label[:label_width]:<{label_width}}", style="bold")
    filled, empty = bar_cells(fraction, bar_width)
    out.append(FULL * filled, style=level_style(fraction, warn, crit))
    out.append(EMPTY * empty, style="dim")
    out.append(f" {text:>{text_width - 1}} ")
    if history is not None and spark_cells:
        out.append(spark_text(history, spark_cells, lo=0.0, hi=maximum), style="cyan")
    return out


def fmt_age(seconds: float) -> str:
    """How long ago, for the time axis: '-9 s', '-2.5 min'."""
    if seconds >= 120:
        return f"-{seconds / 60:.3g} min"
    return f"-{seconds:.3g} s"


def time_axis(cells: int, interval_s: float, samples: int) -> str:
    """The time axis under sparklines of ``cells`` cells, one sample every ``interval_s`` seconds
    and at most ``samples`` kept: ``-9 s ────┴──── now``, right-aligned as the sparklines are; the
    middle is labelled where there is room (``-29 s ──── -14.5 s ──── now``). '' without room."""
    shown = min(cells, samples)
    if shown < 8 or interval_s <= 0:
        return ""
    left, right = fmt_age(shown * interval_s), "now"
    fill = shown - len(left) - len(right) - 2
    if fill < 1:
        return ""
    mid = fmt_age(shown * interval_s / 2)
    if fill >= 2 * len(mid) + 6:
        a = (shown - len(mid)) // 2 - len(left) - 1
        b = fill - a - len(mid)
        line = f"{left} {'─' * (a - 1)} {mid} {'─' * (b - 1)} {right}"
    else:
        half = fill // 2
        line = f"{left} {'─' * half}┴{'─' * (fill - half - 1)} {right}"
    return " " * (cells - shown) + line


def time_scale_line(width: int, interval_s: float, samples: int, label_width: int = 11,
                    text_width: int = 16, averaged: int = 1) -> Text:
    """The line under a panel of gauges ``width`` cells wide: the span the sparklines cover in the
    bar's columns (``last 9 s, a sample every 0.5 s``; ``averaged`` samples a cell: ``a cell every
    2 s``) and the time axis under them."""
    bar_width, cells = gauge_layout(width, True, label_width, text_width)
    out = Text(no_wrap=True, overflow="crop")
    if not cells:
        return out
    span = min(cells, samples) * interval_s
    out.append(f"{'':<{label_width}}")
    what = (f"last {fmt_age(span)[1:]}, a sample every {interval_s:g} s" if averaged <= 1 else
            f"last {fmt_age(span)[1:]}, a cell every {interval_s:g} s")
    out.append(f"{what[: bar_width + text_width]:<{bar_width + text_width}} ", style="dim")
    out.append(time_axis(cells, interval_s, samples), style="dim cyan")
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
