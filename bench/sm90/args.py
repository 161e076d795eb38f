"""The flag parsers of ``python -m bench.sm90_gemm`` (argparse reports the flag and the message) and
the row label of an ``--also`` entry."""

from __future__ import annotations

import argparse
from typing import Any

from kernels.gemm_residual_experiments import hopper_tiles


def m_list(text: str) -> list[int]:
    """'7976,8192' -> [7976, 8192]; argparse reports the flag and this message otherwise."""
    try:
        ms = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas") from None
    if not ms or min(ms) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every M must be >= 1")
    return ms


def knob_list(text: str) -> list[tuple[str, int, dict[str, Any]]]:
    """'128x160:4,128x160:5:coop:sk264' -> [('128x160', 4, {}), ('128x160', 5, {'pingpong': False,
    'streamk': True, 'dp_tiles': 264})]: a tile of ``TILES``, a stage count, then optionally
    ``coop`` (cooperative consumers, not the engine's choice), ``skN`` (stream-K compiled in, the
    tiles past the first N split over every SM) or ``dp`` (data-parallel, no stream-K code), and
    ``cl1`` / ``cl2`` (no cluster / 2x1 clusters, not ``use_cluster``'s choice), ``whole`` /
    ``halves`` (the last round's tiles whole / as 64-row halves, not ``use_half_tail``'s choice):
    the ``Variant`` fields each sets."""
    out = []
    for part in text.split(","):
        fields = part.split(":")
        tile, st, opts = fields[0], fields[1] if len(fields) > 1 else "", fields[2:]
        over: dict[str, Any] = {}
        bad = tile not in hopper_tiles() or not st.isdigit()
        for o in opts:
            if o == "coop":
                over["pingpong"] = False
            elif o == "dp" and "streamk" not in over:
                over["streamk"] = False
            elif o.startswith("sk") and o[2:].isdigit() and "streamk" not in over:
                over.update(streamk=True, dp_tiles=int(o[2:]))
            elif o in ("cl1", "cl2") and "cluster" not in over:
                over["cluster"] = int(o[2])
            elif o in ("whole", "halves") and "half_tail" not in over:
                over["half_tail"] = o == "halves"
            else:
                bad = True
        if bad:
            raise argparse.ArgumentTypeError(f"{part!r}: expected TILE:STAGES[:coop][:skN|:dp][:cl1|:cl2][:whole|:halves] with TILE "
                                             f"one of {', '.join(hopper_tiles())}")
        out.append((tile, int(st), over))
    return out


def also_label(tile: str, stages: int, over: dict[str, Any]) -> str:
    """The table row's name for one ``--also`` entry: 'engine 128x160 s5 coop sk264'."""
    return (f"engine {tile} s{stages}" + (" coop" if over.get("pingpong") is False else "")
            + (f" sk{over['dp_tiles']}" if "dp_tiles" in over else " dp" if over.get("streamk") is False else "")
            + (f" cl{over['cluster']}" if "cluster" in over else "")
            + ((" halves" if over["half_tail"] else " whole") if "half_tail" in over else ""))


def dtype_list(text: str) -> list[str]:
    """'bf16,fp16' -> ['bf16', 'fp16']: the 16-bit dtypes ``--torch-scan`` times."""
    dts = [x.strip() for x in text.split(",") if x.strip()]
    if not dts or any(d not in ("bf16", "fp16") for d in dts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected bf16 and/or fp16, separated by commas")
    return dts


def group_list(text: str) -> list[int]:
    """'2,4,8' -> [2, 4, 8]: M blocks per group, each 1..64."""
    try:
        gs = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected group sizes separated by commas") from None
    if not gs or min(gs) < 1 or max(gs) > 64:
        raise argparse.ArgumentTypeError(f"{text!r}: every group is 1..64 M blocks")
    return gs
