"""``--cold-duel``: the seed-shape candidates as the issue times them (10 + 100 launches after a
rest, shuffled rounds)."""

from __future__ import annotations

import re
import time

import cupy as cp

from bench.sm90.gemm import (
    SEED,
    Runner,
    cublas_gemm,
    time_fn,
)
from bench.sm90.report import write_table
from bench.sm90.variants import Variant, for_dtype, variant

COLD_DUEL = {  # name: variant (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    "pp 128x128 s5 no cluster": ("128x128", 5, "{dt}", True, True, True, 1),
    "pp 128x128 s5 cl2 (default)": ("128x128", 5, "{dt}", True, False, True, 2),
    # the tile that reaches past M moved back to end at M (TAIL_SHIFT; ADR-0007: M = 7976 took
    # 2.5 % more cycles than 8192 under Nsight Compute, 8064 with a wholly empty tile did not)
    "pp 128x128 s5 cl2, tail shifted": Variant("128x128", 5, "{dt}", True, False, True, 2,
                                               tail_shift=True),
    "pp 128x160 s4": ("128x160", 4, "{dt}", True, True, True, 1),
    "pp 128x160 s4 cl2": ("128x160", 4, "{dt}", True, False, True, 2),
    "coop 128x256 s3": ("128x256", 3, "{dt}", True, True, False, 1),
    "coop 128x256 s3 cl2": ("128x256", 3, "{dt}", True, False, False, 2),
    # (1x2 and 2x2 clusters, A multicast: slower everywhere (ADR-0007))
    # (the grouped tile order, groups of 2, 4, 8 cluster pairs on the default: 2-5 % slower,
    # ADR-0007)
    # the two ping-pong consumers sharing one epilogue buffer: one stage more in the same shared
    # memory (ADR-0007)
    "pp 128x128 s6 cl2, shared epilogue": Variant("128x128", 6, "{dt}", True, False, True, 2,
                                                  epi_shared=True),
    "pp 128x128 s6, shared epilogue": Variant("128x128", 6, "{dt}", True, False, True, 1,
                                              epi_shared=True),
    "pp 128x160 s5 cl2, shared epilogue": Variant("128x160", 5, "{dt}", True, False, True, 2,
                                                  epi_shared=True),
    "pp 128x160 s5, shared epilogue": Variant("128x160", 5, "{dt}", True, False, True, 1,
                                              epi_shared=True),
    "pp 128x128 s5 cl2, shared epilogue": Variant("128x128", 5, "{dt}", True, False, True, 2,
                                                  epi_shared=True),
    # what MEMORY_PIPELINING 6 on 128x128 and 5 on 128x160 ran before they became ping-pong with the
    # shared buffer (cooperative, one buffer)
    "coop 128x128 s6": ("128x128", 6, "{dt}", True, True, False, 1),
    "coop 128x160 s5": ("128x160", 5, "{dt}", True, True, False, 1),
    # (when the producer stages each item's R: after k-block STAGES of the item; k-block 0 +2.9 %,
    # 16 +3.4 %, 4 level, 3 and 6-8 slower in bf16 (ADR-0007))
    # (R's two chunks one per k-block from k-block 4 or 5: 0.4-1.3 % slower, removed again)
    # 128 CTAs instead of 132: 1280 tiles = 5 full rounds of 256 consumers (132 CTAs also take 5,
    # the last 85 % full); 4 idle SMs, 3 % less L2 traffic at a time (ADR-0007)
    "pp 128x128 s5 cl2, grid 128": Variant("128x128", 5, "{dt}", True, False, True, 2, grid=128),
    # cuBLAS's big tiles (ADR-0007): cooperative, the 80 KB epilogue tile staged in the ring
    # and its slots returned after each store (the ring goes on), 4 stages (3: no room beside the
    # tile's two slots, released at once); 128x320's consumers split N; 2 stages fit a buffer
    **{f"coop {t} s{st} ring" + (" cl2" if c > 1 else ""):
       Variant(t, st, "{dt}", True, False if c > 1 else None, False, c, epi_ring=True)
       for t, st in (("128x320", 4), ("256x160", 4), ("128x256", 4), ("128x320", 3)) for c in (1, 2)},
    "coop 128x320 s2 cl2": Variant("128x320", 2, "{dt}", True, False, False, 2),
}
COLD_ODD = [(7976, 2560, 2560), (333, 1032, 520), (1, 2560, 2560), (4096, 1032, 2560)]
"""Shapes every clustered cold-duel candidate is checked at first: tile blocks past M and N."""
RING_ODD = [(2000, 2600, 704), (4096, 2560, 64), (5000, 1000, 200)]
"""And every candidate with the epilogue tile in the ring: 11 k-blocks on 4 stages (the tile's slots
wrap round the ring), one k-block, and few k-blocks with tiles past N, each CTA several tiles."""


def cold_duel_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """The seed-shape candidates the way the issue times them: each run is 10 warm-ups and 100
    timed launches (the median) after ``--idle`` seconds of rest, candidates in a fresh random order
    every round, ``--rounds`` rounds; NVML's SM clock and throttle reasons right after each run. The
    alternating duel (20 launches per turn, no rest) measures the hot card instead."""
    import random

    from engine import nvml

    m, n, k = SEED
    rng = random.Random(1)
    duel = {nm: v for nm, v in COLD_DUEL.items()
            if args.only is None or "(default)" in nm or re.search(args.only, nm)}
    lines = [f"seed, cold runs: {args.rounds} rounds, {args.idle:g} s idle before each run of "
             "10 warm-ups + 100 timed (median ms / p10; SM MHz and reasons right after)"]
    wrong0 = len(failures)
    for dt in ("bf16", "fp16"):
        for v in duel.values():
            if v[6] != 1 or variant(v).epi_shared or variant(v).epi_ring:
                print(f"checking {dt} {v}", flush=True)  # a hang shows where
                for shape in COLD_ODD + (RING_ODD if variant(v).epi_ring else []):
                    verify(*shape, for_dtype(v, dt), label="cold duel odd shape")
    lines.append(f"odd shapes {COLD_ODD} (ring: and {RING_ODD}): clustered, shared-epilogue and "
                 f"ring candidates in bf16 and fp16, {len(failures) - wrong0} wrong")
    print(lines[-1], flush=True)
    for dt in ("bf16", "fp16"):
        bufs, _ref = get(m, n, k, dt)
        runs = {}
        for name, v in duel.items():
            v = for_dtype(v, dt)
            verify(m, n, k, v, label="cold duel")
            b = build(m, n, k, v)
            runs[name] = Runner(b, bufs, dt)
            runs[name]()  # compile and load outside the timed runs
            if runs[name].grid != b.info["grid"]:
                print(f"{dt} {name}: grid {b.info['grid']} -> {runs[name].grid} "
                      "(clusters resident at once)", flush=True)
        runs["cuBLAS GEMM only (b=0)"] = cublas_gemm(bufs, cp.empty_like(bufs["r"]), dt, 0.0)
        runs["cuBLAS beta=1 (in place)"] = cublas_gemm(bufs, bufs["r"].copy(), dt, 1.0)
        cp.cuda.runtime.deviceSynchronize()
        per: dict[str, list[tuple[float, float, int | None, str]]] = {nm: [] for nm in runs}
        for _r in range(args.rounds):
            for nm in rng.sample(list(runs), len(runs)):
                time.sleep(args.idle)
                t = time_fn(runs[nm], warmup=10, iters=100)
                try:
                    clk = nvml.sm_clock_mhz(0)
                    reasons = ",".join(nvml.decode_throttle((nvml.clocks_event_mask(0) or 0) & ~0x1))
                except Exception:  # noqa: BLE001
                    clk, reasons = None, "?"
                per[nm].append((t["median_ms"], t["p10_ms"], clk, reasons))
        lines.append(f"{dt}:")
        for nm, rs in per.items():
            meds = sorted(r[0] for r in rs)
            lines.append(f"   {nm:28s} median of runs {meds[len(meds) // 2]:.4f}  runs "
                         + " ".join(f"{r[0]:.4f}/{r[1]:.4f}@{r[2]}" for r in rs)
                         + f"  reasons {sorted({r[3] for r in rs})}")
            report["seed"].append({"dtype": dt, "name": nm, "runs": rs})
        print("\n".join(lines[-len(per) - 1:]), flush=True)
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_cold_duel")
    return 0 if not failures else 1
