"""The soak's plot: launch time per window over the soak (left axis) and the SM clock (right axis),
with the re-verifications that failed marked, drawn with textual-plotext (a PlotextPlot)."""

from __future__ import annotations

from typing import Any

from textual_plotext import PlotextPlot

MAX_DRAWN = 600
"""Windows drawn at most (a long soak is thinned evenly; the store keeps every one)."""


def thin(series: list[dict[str, Any]], most: int = MAX_DRAWN) -> list[dict[str, Any]]:
    """At most ``most`` windows, evenly spaced, the last always kept."""
    if len(series) <= most:
        return list(series)
    step = len(series) / most
    out = [series[int(k * step)] for k in range(most)]
    out[-1] = series[-1]
    return out


class SoakPlot(PlotextPlot):
    """Set the data with ``show`` (attributes down); ``series`` holds what is drawn, for tests."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series: list[dict[str, Any]] = []

    def show(self, series: list[dict[str, Any]]) -> None:
        """Replace the data and redraw; a no-op when nothing was added."""
        if len(series) == len(self.series) and (not series or series[-1] is self.series[-1]):
            return
        self.series = list(series)
        self.draw()

    def draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        pts = [w for w in thin(self.series) if w.get("ms")]
        if pts:
            ts = [w["t_s"] for w in pts]
            plt.plot(ts, [w["ms"] for w in pts], label="ms per launch", color="cyan", marker="braille")
            clocks = [(w["t_s"], w["sm_clock_mhz"]) for w in pts if w.get("sm_clock_mhz") is not None]
            if clocks:
                plt.plot([t for t, _ in clocks], [c for _, c in clocks], label="SM clock MHz", color="orange",
                         marker="braille", yside="right")
            bad = [w for w in self.series if w.get("verified") is False]
            if bad:
                plt.scatter([w["t_s"] for w in bad], [w["ms"] for w in bad], label="verification failed",
                            color="red", marker="x")
            plt.xlabel("seconds")
        self.refresh()
