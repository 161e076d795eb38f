"""Where fp16's few percent at the seed go: the data's switching (GPU machine).

    python3 -m bench.seed_probe [--m-list 8192] [--data normal,ints] [--rounds 5]

For each M (N = K = 2560) and dtype (bf16, fp16), on each ``--data`` set (``normal``: N(0,1), as the
issue times; ``ints``: integers in [-2, 2], exact in both dtypes, whose mantissas switch far less
in the tensor cores' multipliers), times
- the engine's default build, and
- cuBLAS gemmEx with the residual in place (beta=1, R restored before each run),
as the issue times them (10 warm-ups + 100 launches after ``--idle`` s of rest, shuffled, median of
``--rounds`` runs), and beside each, from ``--energy-s`` s of back-to-back launches right after the timing, the energy
per launch, the time per launch and the SM clock under that load (``engine.energy.measure``, as
``tui bench --energy``: the NVML energy counter read edge to edge, with its uncertainty). cuBLAS
adds into C in place: C is set back to R before each timing, not during the load. Every build is checked against the float64 reference on its data
first; exits 1 if any is wrong. A measurement, not a test: nothing here ships a default.
"""

from __future__ import annotations

import argparse
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
    to_bits,
)
from engine import energy, nvml

ITERS = 100


def int_inputs(m: int, n: int, k: int, dtype: str, seed: int) -> dict[str, cp.ndarray]:
    """A, W, R of integers in [-2, 2] (exact in bf16 and fp16; |out| stays far below fp16's range)."""
    rs = cp.random.RandomState(seed)

    def ints(shape):
        return to_bits(rs.randint(-2, 3, size=shape).astype(cp.float32), dtype)

    return {"a": ints((m, k)), "w": ints((n, k)), "r": ints((m, n)),
            "out": cp.full((m, n), 0xFFFF, dtype=cp.uint16)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m-list", default="8192")
    ap.add_argument("--data", default="normal,ints")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle", type=float, default=1.0)
    ap.add_argument("--energy-s", type=float, default=2.0,
                    help="seconds of back-to-back launches after each timing, for the energy per launch "
                         f"(engine.energy.measure; {energy.MIN_SECONDS:g} to {energy.MAX_SECONDS:g})")
    args = ap.parse_args()
    try:
        ms = [int(x) for x in args.m_list.split(",")]
        if not ms or min(ms) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--m-list {args.m_list!r}: positive M")
    datas = args.data.split(",")
    if not set(datas) <= {"normal", "ints"}:
        ap.error(f"--data {args.data!r}: normal and/or ints")
    if not set(args.dtypes.split(",")) <= {"bf16", "fp16"}:
        ap.error(f"--dtypes {args.dtypes!r}: bf16 and/or fp16")
    if args.rounds < 1 or args.idle < 0 or not energy.MIN_SECONDS <= args.energy_s <= energy.MAX_SECONDS:
        ap.error(f"--rounds >= 1, --idle >= 0, --energy-s {energy.MIN_SECONDS:g} to {energy.MAX_SECONDS:g}")
    limits = limits_of_device()
    nvml.init()
    reader = energy.NvmlReader(0)
    bad = 0
    for m in ms:
        shape = {"m": m, "n": 2560, "k": 2560}
        for dt in args.dtypes.split(","):
            _, bs, st = product_build(limits, shape, dt)
            runs: dict[str, object] = {}
            resets: dict[str, tuple] = {}
            for data in datas:
                bufs = (make_inputs if data == "normal" else int_inputs)(m, 2560, 2560, dt, seed=3)
                ref = reference(bufs, dt)
                b, _, _ = product_build(limits, shape, dt)
                run = Runner(b, bufs, dt)
                bufs["out"].fill(0xFFFF)
                run()
                c = compare(bufs["out"], ref, dt)
                nm = f"ours {data}"
                print(f"check {dt} M={m} {nm} ({bs} s{st}): {'ok' if c['ok'] else 'WRONG'} {c}", flush=True)
                bad += not c["ok"]
                runs[nm] = run
                c = cp.array(bufs["r"])
                runs[f"cuBLAS b1 {data}"] = cublas_gemm(bufs, c, dt, 1.0)
                resets[f"cuBLAS b1 {data}"] = (c, bufs["r"])
            for fn in runs.values():
                fn()
            cp.cuda.runtime.deviceSynchronize()
            per: dict[str, dict[str, list[float]]] = {nm: {"ms": [], "mj": [], "load_ms": [], "mhz": [], "unc": []}
                                                      for nm in runs}
            names = list(runs)
            for _ in range(args.rounds):
                random.shuffle(names)
                for nm in names:
                    if nm in resets:
                        cp.copyto(*resets[nm])
                        cp.cuda.runtime.deviceSynchronize()
                    time.sleep(args.idle)
                    ts = sorted(launch_times(runs[nm], 10, ITERS))
                    per[nm]["ms"].append(ts[len(ts) // 2])
                    # then back to back for the energy (the counter moves in ~100 ms steps: too coarse
                    # for the 100 timed launches), read edge to edge as `tui bench --energy` reads it
                    fig = energy.measure(energy.CupyLoad(cp, runs[nm]), reader, args.energy_s)
                    if "note" in fig:
                        print(f"energy not measured: {fig['note']}", flush=True)
                        return 1
                    per[nm]["mj"].append(fig["mj_per_launch"])
                    per[nm]["load_ms"].append(fig["ms_per_launch"])
                    per[nm]["mhz"].append(fig["sm_clock_mhz"] or 0.0)
                    per[nm]["unc"].append(fig["uncertainty_pct"])
            print(f"{dt} M={m} ({bs} s{st}), median of {args.rounds}: ms as the issue times it | under "
                  f"{args.energy_s:g} s of back-to-back load: mJ per launch (+-% of one reading), ms, SM MHz",
                  flush=True)
            for nm, v in per.items():
                med = {key: statistics.median(x) for key, x in v.items()}
                print(f"  {nm:24s} {med['ms']:.4f} | {med['mj']:.1f} (+-{med['unc']:.0f} %) {med['load_ms']:.4f} "
                      f"{med['mhz']:.0f}", flush=True)
            cp.get_default_memory_pool().free_all_blocks()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
