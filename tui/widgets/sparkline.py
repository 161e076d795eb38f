"""Text sparklines: fixed characters, no colour ramps, missing values as blanks."""

from __future__ import annotations

BLOCKS = "▁▂▃▄▅▆▇█"


def spark_text(values: list[float | None], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """The last ``width`` values as block characters, right-aligned (padded with spaces on the
    left while the history is short). None (unsupported / not answering) is a space. The scale is
    ``lo``..``hi`` when given, else the min..max of the visible values."""
    if width <= 0:
        return ""
    vis = list(values)[-width:]
    nums = [v for v in vis if v is not None]
    if not nums:
        return " " * width
    low = min(nums) if lo is None else lo
    high = max(nums) if hi is None else hi
    span = high - low
    chars = []
    for v in vis:
        if v is None:
            chars.append(" ")
            continue
        frac = 0.0 if span <= 0 else (v - low) / span
        frac = max(0.0, min(1.0, frac))
        chars.append(BLOCKS[min(len(BLOCKS) - 1, int(frac * (len(BLOCKS) - 1) + 0.5))])
    return " " * (width - len(chars)) + "".join(chars)
