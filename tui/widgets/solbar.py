"""SOL bars: how close a run came to the speed of light, in four bars."""

from __future__ import annotations

from rich.text import Text

from engine import SolRecord
from tui.widgets.format import NA
from tui.widgets.gauge import EMPTY, FULL


def sol_rows(sol: SolRecord | None, score: float | None) -> list[tuple[str, float | None, str]]:
    """(label, percent 0..100 or None, note) for the four SOL bars of a result."""
    score_pct = None if score is None else 100.0 * score
    return [
        ("Compute", sol and sol.compute_util_pct, "of peak FLOP/s"),
        ("Bandwidth", sol and sol.bandwidth_util_pct, "of peak DRAM B/W"),
        ("SOL", sol and sol.sol_pct, "T_SOL / T_measured"),
        ("Score", score_pct, "SOL-ExecBench (0.5 = baseline)"),
    ]


def sol_style(pct: float | None) -> str:
    if pct is None:
        return "dim"
    if pct >= 70:
        return "green"
    if pct >= 40:
        return "yellow"
    return "red"


NOTE_WIDTH = 30


def render_sol_bar(label: str, pct: float | None, note: str, width: int, label_width: int = 10,
                   shown: str | None = None) -> Text:
    """``SOL       ████████░░░░  61.2 %  T_SOL / T_measured`` in ``width`` cells; the note is dropped
    when there is no room. Values over 100 % (measured ceilings above datasheet) fill the bar.
    ``shown``: the figure printed beside the bar where it is no percentage (the score, 0.728)."""
    value = NA if pct is None else shown if shown is not None else f"{pct:5.1f} %"
    note_part = f"  {note:<{NOTE_WIDTH}}" if width - label_width - 9 - NOTE_WIDTH - 2 >= 12 else ""
    bar_width = max(4, width - label_width - 9 - len(note_part))
    filled = 0 if pct is None else round(max(0.0, min(100.0, pct)) / 100.0 * bar_width)
    out = Text(no_wrap=True, overflow="crop")
    out.append(f"{label:<{label_width}}", style="bold")
    out.append(FULL * filled, style=sol_style(pct))
    out.append(EMPTY * (bar_width - filled), style="dim")
    out.append(f" {value:>7} ")
    if note_part:
        out.append(note_part.rstrip(), style="dim")
    return out


def render_sol_bars(sol: SolRecord | None, score: float | None, width: int, valid: bool = True) -> Text:
    """The four bars; ``valid=False`` (a run whose output failed verification) draws them dim and
    says that its speed is not a result: a wrong kernel's time measures nothing."""
    lines = [render_sol_bar(label, pct, note, width,
                            shown=f"{score:.3f}" if label == "Score" and score is not None else None)
             for label, pct, note in sol_rows(sol, score)]  # the score is a ratio: 0.728, not "72.8 %"
    if not valid:
        for line in lines:
            line.stylize("dim strike")
        lines.append(Text("not valid: the output failed verification, so these figures are no result",
                          style="bold red", no_wrap=True, overflow="crop"))
    return Text("\n", no_wrap=True).join(lines)
