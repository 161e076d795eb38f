"""Power and energy per launch of the seed-shape defaults, from NVML (GPU machine).

    python3 -m bench.energy_probe [--seconds 2] [--passes 2] [--shape 8192,2560,2560]

Asks whether the fp16 seed time is set by the board's power cap: at the cap, time per launch is
energy per launch divided by the capped power, so fp16 should draw the same watts as bf16 and
spend more joules per launch.

1. The NVML total-energy counter's update interval: the counter is polled every ~1 ms for 1 s
   while the bf16 default runs back to back; prints the distinct updates' spacing.
2. Each candidate (our default build in bf16 and fp16, cuBLAS gemmEx GEMM alone in bf16 and fp16)
   runs back to back for --seconds, in --passes passes of alternating order, measured by
   ``engine.energy.measure`` (what ``tui bench --energy`` reports): power edge to edge on the
   energy counter, time per launch from CUDA events, energy per launch = watts x time per launch;
   SM clock, instantaneous power (NVML_FI_DEV_POWER_INSTANT) and clock-event reasons sampled.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path

import cupy as cp

from bench.sm90.gemm import (
    Runner,
    compare,
    cublas_gemm,
    hopper_build,
    limits_of_device,
    make_inputs,
    reference,
)
from engine import energy, nvml
from kernels.gemm_residual_experiments import hopper_knobs

TILES = {  # --tiles: other builds of ours, (tile, stages, ping-pong, cluster[, source prefix])
    "pp 128x128 s5 cl2": ("128x128", 5, True, 2),
    "pp 128x160 s4": ("128x160", 4, True, 1),
    "pp 128x160 s4 cl2": ("128x160", 4, True, 2),
}


def counter_interval(index: int, fn) -> dict:
    """The energy counter's update spacing while `fn` runs back to back for 1 s."""
    load = energy.CupyLoad(cp, fn)
    t_end = time.perf_counter() + 1.0
    last = nvml.energy_mj(index)
    edges = []
    while time.perf_counter() < t_end:
        if load.ready():
            load.step()
        e = nvml.energy_mj(index)
        if e != last:
            edges.append((time.perf_counter(), e - last))
            last = e
        time.sleep(0.0005)
    load.ms_per_launch(0, load.batches())
    gaps = [b[0] - a[0] for a, b in zip(edges, edges[1:], strict=False)]
    return {"updates": len(edges), "median_gap_ms": 1e3 * statistics.median(gaps) if gaps else None,
            "median_step_mj": statistics.median(d for _, d in edges) if edges else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--shape", default="8192,2560,2560")
    ap.add_argument("--tiles", action="store_true",
                    help="also our other tile / consumer / cluster builds (checked against the "
                         "float64 reference first)")
    args = ap.parse_args()
    try:
        m, n, k = (int(x) for x in args.shape.split(","))
        if min(m, n, k) < 1 or n % 8 or k % 8:
            raise ValueError
    except ValueError:
        ap.error(f"--shape {args.shape!r}: expected M,N,K (positive; N and K multiples of 8)")
    if args.seconds <= 0 or args.passes < 1:
        ap.error("--seconds must be > 0 and --passes >= 1")
    limits = limits_of_device()
    index = 0
    reader = energy.NvmlReader(index)
    shape = {"m": m, "n": n, "k": k}
    flops = 2 * m * n * k
    runs = {}
    for dt in ("bf16", "fp16"):
        bufs = make_inputs(m, n, k, dt, seed=3)
        bs, st = hopper_knobs(limits, dt, shape)
        build = hopper_build(limits, shape, dt, bs, st)
        runs[f"ours {dt} ({bs} s{st})"] = Runner(build, bufs, dt)
        if args.tiles:
            ref = reference(bufs, dt)
            for name, (tb, ts, pp, cl, *prefix) in TILES.items():
                b = hopper_build(limits, shape, dt, tb, ts, pingpong=pp,
                               cluster=cl, streamk=cl == 1)
                if prefix:
                    b = dataclasses.replace(b, source=prefix[0] + b.source)
                run = Runner(b, bufs, dt)
                bufs["out"].fill(0xFFFF)
                run()
                c = compare(bufs["out"], ref, dt)
                if not c["ok"]:
                    print(f"WRONG {name} {dt}: {c}", flush=True)
                    return 1
                runs[f"{name} {dt}"] = run
            # our default's GEMM kernel alone (FUSE=0, the add launch dropped): as cuBLAS's GEMM
            # alone, no residual read; not checked (it leaves out = A @ W^T)
            b = hopper_build(limits, shape, dt, bs, st, fuse=False)
            run = Runner(b, bufs, dt)
            run.calls = run.calls[:1]
            runs[f"ours GEMM only {dt}"] = run
        runs[f"cuBLAS GEMM alone {dt}"] = cublas_gemm(bufs, cp.empty_like(bufs["r"]), dt, 0.0)
    first = next(iter(runs.values()))
    for _ in range(20):
        first()
    cp.cuda.runtime.deviceSynchronize()
    ci = counter_interval(index, first)
    lines = [f"energy counter: {ci['updates']} updates in 1 s under load, median spacing "
             f"{ci['median_gap_ms']} ms, median step {ci['median_step_mj']} mJ"]
    print(lines[0], flush=True)
    res: dict[str, list[dict]] = {nm: [] for nm in runs}
    names = list(runs)
    for p in range(args.passes):
        order = names if p % 2 == 0 else names[::-1]
        for nm in order:
            r = energy.measure(energy.CupyLoad(cp, runs[nm]), reader, args.seconds)
            if "note" in r:
                print(f"pass {p} {nm}: {r['note']}", flush=True)
                return 1
            res[nm].append(r)
            print(f"pass {p} {nm}: {json.dumps(r)}", flush=True)
    lines.append(f"{m}x{n}x{k}, {args.passes} passes of {args.seconds} s each, alternating order")
    lines.append(f"   {'candidate':34s} {'ms/launch':>9} {'W':>6} {'mJ/launch':>9} {'GFLOP/J':>8} "
                 f"{'inst W':>6} {'SM MHz':>6}  reasons")
    for nm, rs in res.items():
        ms = statistics.median(r["ms_per_launch"] for r in rs)
        w = statistics.median(r["watts"] for r in rs)
        mj = statistics.median(r["mj_per_launch"] for r in rs)
        iw = [r["instant_w"] for r in rs if r["instant_w"] is not None]
        mhz = [r["sm_clock_mhz"] for r in rs if r["sm_clock_mhz"] is not None]
        reasons = sorted({x for r in rs for x in r["throttle_reasons"]})
        lines.append(f"   {nm:34s} {ms:9.4f} {w:6.0f} {mj:9.1f} {flops / (mj / 1e3) / 1e9:8.0f} "
                     f"{statistics.median(iw) if iw else float('nan'):6.0f} "
                     f"{statistics.median(mhz) if mhz else float('nan'):6.0f}  {', '.join(reasons)}")
    print("\n".join(lines), flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "energy.txt").write_text("\n".join(lines) + "\n")
        Path(out, "energy.json").write_text(json.dumps({"counter": ci, "runs": res}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
