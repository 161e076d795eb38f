"""``--duel``: seed-shape candidates timed in alternation (drift-free ratios), NVML clock and power
per candidate."""

from __future__ import annotations

import cupy as cp

from bench.sm90.gemm import (
    SEED,
    Runner,
    cublas_gemm,
)
from bench.sm90.report import alternate, alternation_rows, make_sampler, write_table
from bench.sm90.variants import for_dtype

DUEL = {  # name: variant (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    "pp 128x128 s5 no cluster": ("128x128", 5, "{dt}", True, True, True, 1),
    "coop 128x256 s3": ("128x256", 3, "{dt}", True, True, False, 1),
    "coop 128x256 s3 cl2": ("128x256", 3, "{dt}", True, False, False, 2),
    "coop 128x160 s5": ("128x160", 5, "{dt}", True, True, False, 1),
    "pp 128x128 s5 cl2 (default)": ("128x128", 5, "{dt}", True, False, True, 2),
}


def duel_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """Seed-shape candidates in alternation: each round runs every candidate for 20 launches
    (events around each launch), so slow drift (power, temperature) hits all alike. Reports the
    median per candidate, the median of its per-round ratio to the first, and NVML SM clock and
    power sampled while it ran."""
    m, n, k = SEED
    sampler = make_sampler()
    lines = []
    for dt in ("bf16", "fp16"):
        bufs, ref = get(m, n, k, dt)
        runs = {}
        for name, v in DUEL.items():
            v = for_dtype(v, dt)
            if v[3]:
                verify(m, n, k, v, label="duel")
            runs[name] = Runner(build(m, n, k, v), bufs, dt)
        c = cp.empty_like(bufs["r"])
        runs["cuBLAS GEMM only (b=0)"] = cublas_gemm(bufs, c, dt, 0.0)
        per = alternate(runs, args.rounds, sampler, tag=f"{dt} ")
        lines.append(f"seed {dt} ({args.rounds} rounds x 20 launches, alternating)")
        lines.append(f"   {'candidate':28s} {'median':>8} {'best rnd':>8} {'ratio':>6} {'SM MHz':>7} {'W 1s':>6}")
        for nm, med, best, ratio, clk, pw in alternation_rows(per, sampler, tag=f"{dt} "):
            lines.append(f"   {nm:28s} {med:8.4f} {best:8.4f} {ratio:6.3f} {clk:7.0f} {pw:6.0f}")
            report["seed"].append({"dtype": dt, "name": nm, "rounds": per[nm]})
        print("\n".join(lines[-len(per) - 2:]), flush=True)
    if sampler:
        sampler.stop.set()
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_duel")
    return 0 if not failures else 1
