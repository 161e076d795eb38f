"""Pure renderers of the cockpit's widgets, tested without an app."""

from __future__ import annotations

from types import SimpleNamespace

from engine.run_records import SolRecord
from tui.widgets.format import fmt, fmt_delta_pct, fmt_kbps, fmt_mib, fmt_ms
from tui.widgets.gauge import bar_cells, level_style, render_gauge
from tui.widgets.solbar import render_sol_bar, render_sol_bars, sol_rows
from tui.widgets.sparkline import BLOCKS, spark_text
from tui.widgets.stages import StageTracker, render_stages


def test_bar_cells_clamp_and_round():
    assert bar_cells(0.5, 10) == (5, 5)
    assert bar_cells(1.7, 10) == (10, 0)
    assert bar_cells(-1, 10) == (0, 10)
    assert bar_cells(None, 4) == (0, 4)
    assert bar_cells(0.5, 0) == (0, 0)


def test_gauge_fits_width_and_says_na():
    line = render_gauge("GPU util", 60.0, 100.0, "60 %", 60)
    assert len(line.plain) <= 60 and "60 %" in line.plain and "█" in line.plain
    na = render_gauge("Tensor", None, 100.0, "ignored", 60)
    assert "N/A" in na.plain and "█" not in na.plain and "ignored" not in na.plain


def test_gauge_with_history_adds_a_sparkline_when_there_is_room():
    wide = render_gauge("Power", 300, 700, "300 W", 100, history=[0, 350, 700])
    assert wide.plain.rstrip().endswith(BLOCKS[0] + BLOCKS[4] + BLOCKS[-1])
    narrow = render_gauge("Power", 300, 700, "300 W", 40, history=[0, 350, 700])
    assert BLOCKS[-1] not in narrow.plain.split("300 W")[-1]


def test_level_style_thresholds():
    assert level_style(None) == "dim"
    assert level_style(0.5) == "green"
    assert level_style(0.85) == "yellow"
    assert level_style(0.99) == "bold red"


def test_spark_text_scales_pads_and_blanks_missing():
    assert spark_text([0, 5, 10], 3) == BLOCKS[0] + BLOCKS[4] + BLOCKS[-1]
    assert spark_text([1, None, 1], 5, lo=0, hi=1) == "  " + BLOCKS[-1] + " " + BLOCKS[-1]
    assert spark_text([None, None], 3) == "   "
    assert spark_text(list(range(100)), 4) == spark_text([96, 97, 98, 99], 4)
    assert spark_text([5, 5], 2) == BLOCKS[0] * 2  # flat series: bottom, not a division by zero
    assert spark_text([1], 0) == ""


def test_sol_rows_and_bars():
    sol = SolRecord(flops=1, bytes=1, t_sol_ms=1.0, t_compute_ms=1.0, t_memory_ms=0.4, sol_bound="compute",
                    compute_util_pct=60.2, bandwidth_util_pct=23.0, sol_pct=60.2)
    rows = sol_rows(sol, 0.622)
    assert [r[0] for r in rows] == ["Compute", "Bandwidth", "SOL", "Score"]
    assert rows[3][1] == 62.2
    bars = render_sol_bars(sol, None, 80).plain.splitlines()
    assert len(bars) == 4 and "N/A" in bars[3]
    widths = {line.index(" 6") for line in bars[:1]} | {bars[2].index(" 6")}
    assert len(widths) == 1  # the bars line up
    over = render_sol_bar("SOL", 130.0, "note", 40)
    assert "░" not in over.plain and "130.0 %" in over.plain


def test_sol_bar_drops_the_note_when_narrow():
    assert "T_SOL" not in render_sol_bar("SOL", 50, "T_SOL / T_measured", 40).plain
    assert "T_SOL" in render_sol_bar("SOL", 50, "T_SOL / T_measured", 100).plain


def test_stages_render_states_and_progress():
    tr = StageTracker()
    tr.apply(SimpleNamespace(kind="stage", stage="compile", state="done"))
    tr.apply(SimpleNamespace(kind="stage", stage="timed", state="start"))
    tr.apply(SimpleNamespace(kind="progress", stage="timed", done=60, total=100))
    text = tr.render().plain
    assert "✓ compile" in text and "▶ timed 60/100" in text and "· verify" in text
    assert tr.fraction() == 1 / 8
    assert "✗ load" in render_stages({"load": "fail"}).plain


def test_formatters():
    assert fmt(None) == "N/A" and fmt(52.4, "%") == "52 %" and fmt(1.234, digits=2) == "1.23"
    assert fmt_ms(0.1804) == "180.4 us" and fmt_ms(2.5) == "2.500 ms" and fmt_ms(None) == "N/A"
    assert fmt_delta_pct(90, 100) == "-10.0 % (better)"
    assert fmt_delta_pct(90, 100, lower_is_better=False) == "-10.0 % (worse)"
    assert fmt_delta_pct(None, 1) == "" and fmt_delta_pct(1, 1) == "same"
    assert fmt_mib(2048) == "2.0 GiB" and fmt_mib(600) == "600 MiB"
    assert fmt_kbps(1200) == "1.2 MB/s" and fmt_kbps(2e6) == "2.0 GB/s" and fmt_kbps(None) == "N/A"


def test_the_score_bar_shows_the_score_not_a_percentage():
    """Issue 47, defect 20: a 0.728 score was drawn as "72.8 %"."""
    sol = SolRecord(flops=1, bytes=1, t_sol_ms=1.0, t_compute_ms=1.0, t_memory_ms=0.4, sol_bound="compute",
                    compute_util_pct=60.2, bandwidth_util_pct=23.0, sol_pct=60.2)
    score = render_sol_bars(sol, 0.728, 80).plain.splitlines()[3]
    assert "0.728" in score and "72.8 %" not in score
