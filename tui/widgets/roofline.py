"""The roofline of a run, log-log: the profile's compute roof (peak FLOP/s of the dtype) and
bandwidth roof (bytes/s) from the datasheet, the measured ceilings where the machine was calibrated,
and a point for the kernel and each peer at the task's arithmetic intensity (FLOPs / bytes) and
the FLOP/s each reached. ``roofline_data`` is pure; ``RooflinePlot`` draws it with textual-plotext."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from textual_plotext import PlotextPlot

from engine import RunResult, SolRecord


@dataclass(frozen=True)
class Roof:
    """One pair of roofs: flat at ``peak_flops``, a slope of ``bandwidth_bytes_per_s`` below the ridge."""

    label: str
    peak_flops: float
    """FLOP/s."""
    bandwidth_bytes_per_s: float
    measured: bool = False

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOP/byte) where the two roofs meet."""
        return self.peak_flops / self.bandwidth_bytes_per_s

    def flops_at(self, intensity: float) -> float:
        return min(self.peak_flops, self.bandwidth_bytes_per_s * intensity)


@dataclass(frozen=True)
class RoofPoint:
    """An implementation's place under the roofs."""

    label: str
    intensity: float
    """FLOP/byte."""
    flops_per_s: float
    valid: bool = True
    """False for a wrong result (or a peer that failed its check): drawn as not valid."""
    ours: bool = False


def _ceilings(sol: SolRecord | None) -> tuple[float, float] | None:
    """(FLOP/s, bytes/s) a run's SOL figures were computed against, from its FLOPs, bytes and terms."""
    if sol is None or not sol.t_compute_ms or not sol.t_memory_ms:
        return None
    return sol.flops / (sol.t_compute_ms * 1e-3), sol.bytes / (sol.t_memory_ms * 1e-3)


def roofline_data(result: RunResult, profile: Any = None) -> tuple[list[Roof], list[RoofPoint]]:
    """The roofs and points of ``result``; ([], []) when it has no FLOPs, bytes or time. The
    datasheet roofs come from ``profile`` when it is the one the run used (else from the ceilings
    the run's SOL figures were computed against); the measured ones from ``result.sol_measured``."""
    sol = result.sol
    if sol is None or not sol.flops or not sol.bytes or result.timing is None:
        return [], []
    flops, nbytes = sol.flops, sol.bytes
    dtype = result.task.dtype or "bf16"
    roofs: list[Roof] = []
    sheet = None
    if profile is not None and profile.name == result.profile:
        try:
            sheet = (profile.sol_peak_flops(dtype), profile.bandwidth_bytes_per_s)
        except Exception:  # a profile without this dtype: use what the run's figures say
            sheet = None
    sheet = sheet or _ceilings(sol)
    if sheet is not None:
        roofs.append(Roof(f"datasheet {result.profile}", sheet[0], sheet[1]))
    measured = _ceilings(result.sol_measured)
    if measured is not None:
        roofs.append(Roof(f"measured {result.measured_profile or ''}".strip(), measured[0], measured[1], measured=True))
    intensity = flops / nbytes
    valid = result.correctness is None or result.correctness.correct
    points = [RoofPoint("ours", intensity, flops / (result.timing.median_ms * 1e-3), valid=valid, ours=True)]
    for p in result.peers:
        if p.timing is None or p.timing.median_ms <= 0:
            continue
        points.append(RoofPoint(p.name, intensity, flops / (p.timing.median_ms * 1e-3),
                                valid=p.correct is not False and not p.error))
    return roofs, points


def fmt_flops(flops_per_s: float) -> str:
    """687e12 -> '687 TFLOP/s'; 1.2e15 -> '1.2 PFLOP/s'."""
    t = flops_per_s / 1e12
    return f"{t / 1000:.2g} PFLOP/s" if t >= 1000 else f"{t:.3g} TFLOP/s"


def fmt_bandwidth(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e12:.3g} TB/s" if bytes_per_s >= 1e12 else f"{bytes_per_s / 1e9:.3g} GB/s"


def log_ticks(lo: float, hi: float, most: int) -> list[float]:
    """Round values (1, 2, 5 times a power of ten) between ``lo`` and ``hi``, at most ``most`` of
    them: decades first, the 2s and 5s where they fit."""
    if hi <= lo or most <= 0:
        return []
    decades = [10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    ticks = [d for d in decades if lo <= d <= hi]
    for m in (5.0, 2.0):
        more = sorted(ticks + [d * m for d in decades if lo <= d * m <= hi])
        if len(more) > most:
            break
        ticks = more
    while len(ticks) > most:
        ticks = ticks[::2]
    return ticks


def tick_label(value: float) -> str:
    """10 -> '10', 1000 -> '1k', 2e4 -> '20k'."""
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


ROOF_COLORS = ("red", "magenta")
"""Datasheet roofs, then measured ones."""
OURS, PEER, WRONG = ("cyan", "●"), ("orange", "◆"), ("red", "✗")
"""(colour, marker) of our point, a peer's, and a point whose result is wrong."""


class RooflinePlot(PlotextPlot):
    """Set the data with ``show`` (attributes down). The labels are laid out for the size the plot
    has when it is drawn, so a point's label and the roofs' stay apart; points that would share a
    row share one label. ``roofs`` and ``points`` hold what is drawn, for tests and redraws."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.roofs: list[Roof] = []
        self.points: list[RoofPoint] = []
        self.labels: list[str] = []
        """The text labels of the last drawing (roofs, then points), for tests."""

    @property
    def has_data(self) -> bool:
        return bool(self.points)

    def show(self, roofs: list[Roof], points: list[RoofPoint]) -> None:
        """Replace the data and redraw; a no-op when nothing changed."""
        if (roofs, points) == (self.roofs, self.points):
            return
        self.roofs, self.points = list(roofs), list(points)
        self.refresh()

    def render(self):
        self.draw(self.size.width, self.size.height)
        return super().render()

    def draw(self, width: int, height: int) -> None:
        """Draw for a ``width`` x ``height`` widget. Plotext takes axis limits in log10 units on a
        log axis (and ticks and text in data units); the layout of the labels works on cells."""
        plt = self.plt
        plt.clear_figure()
        self.labels = []
        if not self.points or width < 20 or height < 6:
            return
        plt.xscale("log")
        plt.yscale("log")
        intensities = [r.ridge for r in self.roofs] + [p.intensity for p in self.points]
        x_lo, x_hi = min(intensities) / 8, max(intensities) * 8
        ys = [p.flops_per_s / 1e12 for p in self.points]
        top = max([r.peak_flops / 1e12 for r in self.roofs] + ys)
        y_lo, y_hi = min(ys) / 2, top * 1.5
        rows, cols = max(2, height - 4), max(10, width - 8)  # borders, x ticks and label; y ticks
        lx, hx, ly, hy = (math.log10(v) for v in (x_lo, x_hi, y_lo, y_hi))

        def col(x: float) -> int:
            return round((math.log10(x) - lx) / (hx - lx) * (cols - 1))

        def row(y: float) -> int:
            return round((math.log10(y) - ly) / (hy - ly) * (rows - 1))

        def x_at(c: float) -> float:
            return 10 ** (lx + c / (cols - 1) * (hx - lx))

        def y_at(r: float) -> float:
            return 10 ** (ly + r / (rows - 1) * (hy - ly))

        taken: list[tuple[int, int, int]] = []  # (row, first col, last col) of each label placed

        def free(r: int, c0: int, c1: int) -> bool:
            return 0 <= r < rows and all(r != tr or c1 < t0 or c0 > t1 for tr, t0, t1 in taken)

        def put(text: str, r: int, c0: int, color: str) -> None:
            taken.append((r, c0, c0 + len(text) - 1))
            self.labels.append(text)  # the flat roofs are taken too (below), so no label hides one
            plt.text(text, x_at(c0), y_at(r), alignment="left", color=color)

        taken += [(row(r.peak_flops / 1e12), col(r.ridge), cols - 1) for r in self.roofs]
        for roof in self.roofs:
            color = ROOF_COLORS[1] if roof.measured else ROOF_COLORS[0]
            peak = roof.peak_flops / 1e12
            x0 = max(x_lo, y_lo / (roof.bandwidth_bytes_per_s / 1e12))
            plt.plot([x0, roof.ridge, x_hi], [roof.bandwidth_bytes_per_s / 1e12 * x0, peak, peak],
                     color=color, marker="braille")
            text = f"{roof.label}: {fmt_flops(roof.peak_flops)}, {fmt_bandwidth(roof.bandwidth_bytes_per_s)}"
            text = text[: cols - 1]
            c0 = max(0, cols - len(text))
            for r in (row(peak) + 1, row(peak) - 1, row(peak) + 2, row(peak) - 2):
                if free(r, c0, cols - 1):
                    put(text, r, c0, color)
                    break
        for group in _rows_of(self.points, row):
            r = row(group[0].flops_per_s / 1e12)
            c = col(group[0].intensity)
            for p in reversed(group):  # ours last, over a peer on the same cell
                color, marker = OURS if p.ours and p.valid else PEER if p.valid else WRONG
                plt.scatter([p.intensity], [p.flops_per_s / 1e12], color=color, marker=marker)
            head = group[0]
            color = (OURS if head.ours else PEER)[0] if all(p.valid for p in group) else WRONG[0]
            room = cols - c - 3
            text = _group_label(group, room) if room >= 12 else ""
            if text and free(r, c + 2, c + 1 + len(text)):
                put(text, r, c + 2, color)
            else:
                text = _group_label(group, max(12, c - 3))
                start = max(0, c - 2 - len(text))
                if free(r, start, c - 2):
                    put(text, r, start, color)
        plt.xlim(lx, hx)
        plt.ylim(ly, hy)
        xt = log_ticks(x_lo, x_hi, max(2, cols // 12))
        plt.xticks(xt, [tick_label(v) for v in xt])
        yt = log_ticks(y_lo, y_hi, max(2, rows // 3))
        plt.yticks(yt, [tick_label(v) for v in yt])
        plt.xlabel("FLOP/byte (x) · TFLOP/s (y), log-log")


def _rows_of(points: list[RoofPoint], row: Any) -> list[list[RoofPoint]]:
    """Points grouped by the row they fall on, ours first in its group, the highest group first."""
    groups: dict[int, list[RoofPoint]] = {}
    for p in points:
        groups.setdefault(row(p.flops_per_s / 1e12), []).append(p)
    return [sorted(g, key=lambda p: not p.ours) for _, g in sorted(groups.items(), reverse=True)]


def _group_label(group: list[RoofPoint], room: int) -> str:
    """'ours 687 (NOT VALID)' or 'torch_addmm 644, cublas_gemm 643 +1' in at most ``room`` cells."""
    def one(p: RoofPoint) -> str:
        return f"{p.label} {p.flops_per_s / 1e12:.0f}" + ("" if p.valid else " (NOT VALID)")

    text = ""
    for i, p in enumerate(group):
        more = f" +{len(group) - i}" if i else ""
        cand = (text + ", " if text else "") + one(p)
        rest = f" +{len(group) - i - 1}" if i < len(group) - 1 else ""
        if len(cand + rest) > room:
            return (text + more) if text else cand[: max(0, room - 1)] + "…"
        text = cand
    return text
