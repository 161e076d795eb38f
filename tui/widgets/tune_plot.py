"""The tune's plot: time per timed candidate in timing order, the best one marked, and the default's
and each peer's time as horizontal lines, drawn with textual-plotext (a PlotextPlot)."""

from __future__ import annotations

from textual_plotext import PlotextPlot

LINE_COLORS = ("orange", "magenta", "red", "blue", "green", "yellow")
"""Colours of the horizontal lines in legend order (the default's first, then the peers')."""
LINE_MARKERS = ("=", "-", "+", "~", ":", "^")
"""Each line's own character, in the same order: the legend reads without colour too."""


def line_label(label: str, ms: float) -> str:
    """A legend entry that says what the line is and its time: 'default 128x128/5: 0.1412 ms',
    'peer cublas_gemmex_beta1: 0.1520 ms'."""
    name = label if label.startswith("default") else f"peer {label}"
    return f"{name}: {ms:.4f} ms"


class TunePlot(PlotextPlot):
    """Set the data with ``show`` (attributes down); the screen calls it at most a few times a
    second. ``points``, ``best`` and ``lines`` hold what is drawn, for tests and for redraws."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.points: list[tuple[int, float]] = []
        """(timing order, median ms) of every correct timed candidate."""
        self.best: tuple[int, float] | None = None
        self.lines: list[tuple[str, float]] = []
        """(label, ms) of each horizontal line: the default's time and each peer's."""

    def show(self, points: list[tuple[int, float]], best: tuple[int, float] | None,
             lines: list[tuple[str, float]]) -> None:
        """Replace the data and redraw; a no-op when nothing changed."""
        if (points, best, lines) == (self.points, self.best, self.lines):
            return
        self.points, self.best, self.lines = list(points), best, list(lines)
        self.draw()

    def draw(self) -> None:
        """Lines first, then the points over them. The y range spans the best point to the slowest
        line (peers, default), so the close calls stay readable; slower candidates are left off
        and counted in the legend."""
        plt = self.plt
        plt.clear_figure()
        if not self.points and not self.lines:
            self.refresh()
            return
        last = max([x for x, _ in self.points] + [2])
        ys = [y for _, y in self.points] + [ms for _, ms in self.lines]
        lo = min(ys)
        hi = max(ms for _, ms in self.lines) if self.lines else max(ys)
        pad = (hi - lo) * 0.06 or hi * 0.02
        top = hi + pad
        for i, (label, ms) in enumerate(self.lines):
            plt.plot([1, last], [ms, ms], label=line_label(label, ms), color=LINE_COLORS[i % len(LINE_COLORS)],
                     marker=LINE_MARKERS[i % len(LINE_MARKERS)])
        shown = [(x, y) for x, y in self.points if y <= top]
        if shown:
            off = len(self.points) - len(shown)
            plt.scatter([x for x, _ in shown], [y for _, y in shown], color="cyan", marker="o",
                        label="candidate (x: #)" + (f", {off} slower off the plot" if off else ""))
        if self.best is not None:
            plt.scatter([self.best[0]], [self.best[1]], label="best", color="green", marker="*")
        plt.xlim(0, last + 1)
        step = max(1, (last + 4) // 5)
        plt.xticks(list(range(0, last + 1, step)))  # whole candidate numbers, never "42.2"
        plt.xlabel("candidate # (timing order)")
        plt.ylabel("ms")
        plt.ylim(lo - pad, top)
        self.refresh()
