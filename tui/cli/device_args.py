"""The ``--device`` and ``--outlier-pct`` flags of the commands that run on one GPU, a list or all
of them (bench, soak, check, calibrate): argparse types over ``engine.multi_device``'s selection."""

from __future__ import annotations

import argparse

from engine import SPREAD_OUTLIER_PCT as OUTLIER_PCT
from engine import DeviceSelection


def device_arg(text: str) -> int | DeviceSelection:
    """argparse type of ``--device``: one index stays an int (one GPU, as before); ``all`` or a
    comma-separated list is a DeviceSelection."""
    raw = text.strip().lower()
    if raw == "all":
        return DeviceSelection("all")
    parts = [p.strip() for p in raw.split(",")]
    if not raw or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give a GPU index, a list such as 0,2,5, or all")
    out: list[int] = []
    for p in parts:
        if not p.isdigit():
            raise argparse.ArgumentTypeError(f"{p!r} is not a GPU index (0, 1, ...); use a list such as 0,2,5 or all")
        if int(p) in out:
            raise argparse.ArgumentTypeError(f"{text!r} names GPU {p} twice")
        out.append(int(p))
    if len(out) == 1 and "," not in raw:
        return out[0]
    return DeviceSelection(",".join(map(str, out)), tuple(out))


def outlier_pct_arg(text: str) -> float:
    """argparse type of ``--outlier-pct``: a percentage above 0 ('5' or '5%')."""
    try:
        v = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (e.g. 5 or 5%)") from None
    if not 0 < v < 1e6:
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage above 0")
    return v


def add_spread_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--outlier-pct", type=outlier_pct_arg, default=OUTLIER_PCT, metavar="PCT",
                   help=f"with --device all or a list: a GPU this many percent off the median of the others "
                        f"is the outlier, and the exit status is 1 (default {OUTLIER_PCT:g})")
