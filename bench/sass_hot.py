"""Summarise Nsight Compute's per-SASS-line stall samples (the CSV `gpu_session.sh ncu-source`
writes, gzipped or not): for each profiled kernel, its total samples, the share of the top lines
and their main stall reasons, and the share of samples on barrier waits (SYNCS ... TRYWAIT), on
HGMMA and its waits (WARPGROUP.DEPBAR / ARRIVES), and on everything else
(a branch right after a try-wait counts as the wait: it stalls on the try-wait's result).

    python3 -m bench.sass_hot out/src-sass.csv.gz [--top 12]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import sys


def kernels(path: str) -> list[tuple[str, list[dict[str, str]]]]:
    """The CSV's kernels in order, each with its rows as dicts (the header follows each name)."""
    raw = gzip.open(path, "rt") if path.endswith(".gz") else open(path, newline="")
    with raw as f:
        rows = list(csv.reader(io.StringIO(f.read())))
    out: list[tuple[str, list[dict[str, str]]]] = []
    i = 0
    while i < len(rows):
        r = rows[i]
        if r and r[0] == "Kernel Name":
            name, header = r[1], rows[i + 1]
            body = []
            i += 2
            while i < len(rows) and not (rows[i] and rows[i][0] == "Kernel Name"):
                if len(rows[i]) == len(header):
                    body.append(dict(zip(header, rows[i], strict=True)))
                i += 1
            out.append((name, body))
        else:
            i += 1
    return out


SAMPLES = "Warp Stall Sampling (All Samples)"


def num(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return 0.0


def category(src: str) -> str:
    s = src.strip()
    if "SYNCS" in s and ("TRYWAIT" in s or "PHASECHK" in s or "NANOSLEEP" in s):
        return "barrier wait"
    if "HGMMA" in s or "WARPGROUP" in s:
        return "wgmma"
    if s.startswith("BAR") or " BAR." in s:
        return "named barrier"
    if "UTMA" in s or "UBLKCP" in s:
        return "tma issue"
    return "other"


def summary(name: str, body: list[dict[str, str]], top: int) -> str:
    key = SAMPLES
    total = sum(num(r[key]) for r in body) or 1.0
    stall_cols = [c for c in (body[0] if body else {}) if c.startswith("stall_") and "Not Issued" not in c]
    lines = [f"== {name}: {int(total)} samples, {len(body)} SASS lines"]
    cats: dict[str, float] = {}
    prev = ""
    for r in body:
        kind = category(r["Source"])
        if kind == "other" and "BRA" in r["Source"] and category(prev) == "barrier wait":
            kind = "barrier wait"  # the retry branch right after a try-wait waits on its result
        cats[kind] = cats.get(kind, 0.0) + num(r[key])
        prev = r["Source"]
    lines.append("   by kind: " + ", ".join(f"{k} {100 * v / total:.1f} %"
                                           for k, v in sorted(cats.items(), key=lambda kv: -kv[1])))
    for r in sorted(body, key=lambda r: -num(r[key]))[:top]:
        st = sorted(((num(r[c]), c[6:]) for c in stall_cols), reverse=True)[:2]
        why = ", ".join(f"{c} {100 * v / max(num(r[key]), 1):.0f}%" for v, c in st if v)
        lines.append(f"   {100 * num(r[key]) / total:5.1f} %  {r['Address'][-5:]}  "
                     f"{r['Source'].strip()[:60]:60s}  {why}")
    return "\n".join(lines)


def positive(text: str) -> int:
    """--top: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: a whole number >= 1")
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=positive, default=12)
    args = ap.parse_args()
    try:
        found = kernels(args.csv)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:  # gzip: BadGzipFile, EOFError
        ap.error(f"csv {args.csv}: cannot read it ({exc})")
    if not found:
        ap.error(f"csv {args.csv}: no \"Kernel Name\" rows (ncu --page source --print-source sass --csv)")
    need = {"Address", "Source", SAMPLES}
    for name, body in found:
        missing = need - set(body[0]) if body else set()
        if missing:
            ap.error(f"csv {args.csv}: kernel {name} has no {', '.join(sorted(missing))} column")
    for name, body in found:
        print(summary(name, body, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
