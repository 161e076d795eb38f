"""How the seed-shape time moves from a rested card to a busy one (GPU machine).

    python3 -m bench.ramp_probe [--rests 0.3,2,5] [--rounds 2] [--launches 400] [--shape 8192,2560,2560]

The issue times "10 warm-ups, then the median of 100 launches"; the figure it gives for our fp16
seed has read 0.147-0.154 ms across sessions with the same cubin. This probe asks where in a run
the time is set: after each rest (``--rests`` seconds idle), 10 warm-ups, then ``--launches``
launches queued back to back, each between its own CUDA event pair. For ours (the engine's default
build) and cuBLAS gemmEx with the residual in place (beta=1), in bf16 and fp16, in shuffled order:

- the median of launches 1-100 (the issue's window), 101-200, ... ;
- the median of each tenth of the first 100 (a clock ramp after the rest shows as slow first tenths,
  a power cap closing in as slow last ones);
- NVML's SM clock, temperature and clock-event reasons just before the warm-up and after the last
  launch.

Every build is checked against the float64 reference first. Writes ``ramp.txt`` and ``ramp.json``
under $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

import cupy as cp

from bench.sm90.gemm import (
    Runner,
    compare,
    cublas_gemm,
    launch_times,
    limits_of_device,
    make_inputs,
    product_build,
    reference,
)
from bench.sm90.report import write_table
from engine import nvml

WINDOW = 100
"""Launches per window: the issue's timed run."""


def card(index: int) -> dict:
    """NVML's SM clock, GPU temperature and clock-event reasons now."""
    temps = nvml.temperatures(index) or {}
    return {"sm_mhz": nvml.sm_clock_mhz(index), "temp_c": temps.get("current_c"),
            "reasons": nvml.decode_throttle(nvml.clocks_event_mask(index))}


def summarise(ts: list[float]) -> dict:
    windows = [statistics.median(ts[i:i + WINDOW]) for i in range(0, len(ts) - WINDOW + 1, WINDOW)]
    tenth = WINDOW // 10
    tenths = [statistics.median(ts[i:i + tenth]) for i in range(0, WINDOW, tenth)]
    return {"windows": windows, "tenths": tenths}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rests", default="0.3,2,5", help="seconds of idle before each run, comma-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--launches", type=int, default=400)
    ap.add_argument("--shape", default="8192,2560,2560")
    ap.add_argument("--dtypes", default="bf16,fp16")
    args = ap.parse_args()
    try:
        rests = [float(x) for x in args.rests.split(",")]
        m, n, k = (int(x) for x in args.shape.split(","))
        if min(m, n, k) < 1 or n % 8 or k % 8 or min(rests) < 0:
            raise ValueError
    except ValueError:
        ap.error(f"--rests {args.rests!r} / --shape {args.shape!r}: non-negative seconds; M,N,K positive, "
                 "N and K multiples of 8")
    if args.rounds < 1 or args.launches < WINDOW or args.launches % WINDOW:
        ap.error(f"--rounds >= 1 and --launches a multiple of {WINDOW}")
    dtypes = args.dtypes.split(",")
    if not set(dtypes) <= {"bf16", "fp16"}:
        ap.error(f"--dtypes {args.dtypes!r}: bf16 and/or fp16")
    limits = limits_of_device()
    shape = {"m": m, "n": n, "k": k}
    runs = {}
    resets = {}
    for dt in dtypes:
        bufs = make_inputs(m, n, k, dt, seed=3)
        build, bs, st = product_build(limits, shape, dt)
        run = Runner(build, bufs, dt)
        bufs["out"].fill(0xFFFF)
        run()
        c = compare(bufs["out"], reference(bufs, dt), dt)
        if not c["ok"]:
            print(f"WRONG ours {dt}: {c}", flush=True)
            return 1
        runs[f"ours {dt} ({bs} s{st})"] = run
        c = cp.array(bufs["r"])
        runs[f"cuBLAS beta=1 {dt}"] = cublas_gemm(bufs, c, dt, 1.0)
        resets[f"cuBLAS beta=1 {dt}"] = (c, bufs["r"])  # C += A W^T in place: back to R before a run
    for fn in runs.values():  # compile, load, first-touch
        fn()
    cp.cuda.runtime.deviceSynchronize()
    rng = random.Random(7)
    trials = [(nm, rest) for nm in runs for rest in rests]
    res: list[dict] = []
    for rnd in range(args.rounds):
        rng.shuffle(trials)
        for nm, rest in trials:
            if nm in resets:
                cp.copyto(*resets[nm])
                cp.cuda.runtime.deviceSynchronize()
            time.sleep(rest)
            before = card(0)
            ts = launch_times(runs[nm], 10, args.launches)
            after = card(0)
            rec = {"round": rnd, "name": nm, "rest_s": rest, "before": before, "after": after, **summarise(ts)}
            res.append(rec)
            print(json.dumps(rec), flush=True)
    lines = [f"{m}x{n}x{k}: after each rest, 10 warm-ups + {args.launches} launches back to back; "
             f"median of the rounds' medians, ms ({args.rounds} rounds, shuffled)",
             f"   {'candidate':28s} {'rest s':>6} " + " ".join(f"{f'{i * WINDOW + 1}-{(i + 1) * WINDOW}':>8}"
                                                         for i in range(args.launches // WINDOW))
             + "   tenths of 1-100 (ms)   MHz before/after  temp  reasons after"]
    for nm in runs:
        for rest in rests:
            rs = [r for r in res if r["name"] == nm and r["rest_s"] == rest]
            win = [statistics.median(r["windows"][i] for r in rs) for i in range(len(rs[0]["windows"]))]
            ten = [statistics.median(r["tenths"][i] for r in rs) for i in range(10)]
            mb = statistics.median(r["before"]["sm_mhz"] or 0 for r in rs)
            ma = statistics.median(r["after"]["sm_mhz"] or 0 for r in rs)
            tc = max((r["after"]["temp_c"] or 0) for r in rs)
            why = sorted({x for r in rs for x in r["after"]["reasons"]})
            lines.append(f"   {nm:28s} {rest:6g} " + " ".join(f"{w:8.4f}" for w in win) + "   "
                         + " ".join(f"{t:.4f}" for t in ten) + f"   {mb:.0f}/{ma:.0f}  {tc:.0f}  {', '.join(why)}")
    write_table(lines, {"runs": res}, os.environ.get("OUT"), "ramp")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
