"""Write a profile's table of tuned defaults (``profiles/tuned/<profile>.toml``, read by
``engine.tuned_defaults``) from `tui tune --json` outputs: one entry per tuned shape, the best
correct trial's knobs with its time, the default's and cuBLAS beta=1's beside it for the record.

    python -m bench.product_data.tuned_defaults --profile h200 tune.json [more.json ...] > profiles/tuned/h200.toml
    python -m bench.product_data.tuned_defaults --profile h200 --update profiles/tuned/h200.toml new.json > t && mv t ...

A file may hold one JSON document or one per line (``bench/tune_each.sh``'s JSONL). Among the given
files the fastest trial of a shape wins; with ``--update`` the table's entries are kept except where
the files tuned the same shape again: the new tune replaces the entry (a re-tune after a kernel or
tuner change must not lose to an older, now stale, time).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tomli_w
import tomllib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--update", type=Path, help="an existing table whose entries the files' shapes replace")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    entries: dict[tuple, dict] = {}
    for f in args.files:
        text = f.read_text()
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        for s in (s for d in docs for s in d.get("shapes", [])):
            best = s.get("best")
            if not best or s.get("simulated") or s.get("profile") != args.profile:
                continue
            shape = ",".join(f"{k}={v}" for k, v in sorted(s["shape"].items()))
            key = (s["kernel"], s["dtype"], shape, bool(s["fusion"]))
            e = {"kernel": s["kernel"], "dtype": s["dtype"], "shape": shape, "fusion": bool(s["fusion"]),
                 "gpu": s["gpu"], "sm_count": s["sm_count"], "regime": s["regime"],
                 "block_size": best["block_size"], "memory_pipelining": best["memory_pipelining"],
                 "schedule": best.get("schedule") or {}, "median_ms": best["median_ms"],
                 "timed": s.get("timed", 0)}
            if (s.get("default") or {}).get("median_ms"):
                e["default_ms"] = s["default"]["median_ms"]
            b1 = (s.get("peers") or {}).get("cublas_gemm_beta1", {}).get("median_ms")
            if b1:
                e["cublas_beta1_ms"] = b1
            if key not in entries or e["median_ms"] < entries[key]["median_ms"]:
                entries[key] = e
    if args.update:
        try:
            old = tomllib.loads(args.update.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            ap.error(f"--update: {args.update}: {exc}")
        for e in old.get("entry", []):
            entries.setdefault((e["kernel"], e["dtype"], e["shape"], bool(e.get("fusion", True))), e)
    doc = {"version": 1, "profile": args.profile,
           "note": "tuned defaults: written by bench/product_data/tuned_defaults.py from `tui tune --json`",
           "entry": sorted(entries.values(), key=lambda e: (e["kernel"], e["dtype"], e["shape"]))}
    sys.stdout.write(tomli_w.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
