"""Where fp16's few percent at the seed go: the mbarrier polling and the data's switching (GPU machine).

    python3 bench/seed_probe.py [--m-list 8192] [--suspend 0,20000] [--data normal,ints] [--rounds 5]

For each M (N = K = 2560) and dtype (bf16, fp16), on each ``--data`` set (``normal``: N(0,1), as the
issue times; ``ints``: integers in [-2, 2], exact in both dtypes, whose mantissas switch far less
in the tensor cores' multipliers), times
- the engine's default build with each ``--suspend`` value as the mbarrier try_wait's suspend-time
  hint in ns (``sm90.MBAR_SUSPEND_NS``; 0 = the hint off, the shipped kernel), and
- cuBLAS gemmEx with the residual in place (beta=1, R restored before each run),
as the issue times them (10 warm-ups + 100 launches after ``--idle`` s of rest, shuffled, median of
``--rounds`` runs), and beside each the NVML energy per launch and the SM clock (median of reads), both over
``--energy-s`` s of back-to-back launches right after the timing. Every build is checked against the float64 reference on its data
first; exits 1 if any is wrong. A measurement, not a test: nothing here ships a default.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cupy as cp  # noqa: E402
from sm90_gemm import (  # noqa: E402
    Runner,
    compare,
    cublas_gemm,
    launch_times,
    limits_of_device,
    make_inputs,
    reference,
    to_bits,
)

from engine import nvml  # noqa: E402
from kernels import gemm_residual_sm90 as sm90  # noqa: E402

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
    ap.add_argument("--suspend", default="0,20000", help="suspend-time hints in ns, comma-separated; 0 = off")
    ap.add_argument("--data", default="normal,ints")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle", type=float, default=1.0)
    ap.add_argument("--energy-s", type=float, default=0.5,
                    help="seconds of back-to-back launches after each timing, for the energy per launch")
    args = ap.parse_args()
    try:
        ms = [int(x) for x in args.m_list.split(",")]
        hints = [int(x) for x in args.suspend.split(",")]
        if not ms or min(ms) < 1 or not hints or min(hints) < 0:
            raise ValueError
    except ValueError:
        ap.error(f"--m-list {args.m_list!r} / --suspend {args.suspend!r}: positive M, hints >= 0")
    datas = args.data.split(",")
    if not set(datas) <= {"normal", "ints"}:
        ap.error(f"--data {args.data!r}: normal and/or ints")
    if not set(args.dtypes.split(",")) <= {"bf16", "fp16"}:
        ap.error(f"--dtypes {args.dtypes!r}: bf16 and/or fp16")
    if args.rounds < 1 or args.idle < 0 or args.energy_s <= 0:
        ap.error("--rounds >= 1, --idle >= 0, --energy-s > 0")
    limits = limits_of_device()
    nvml.init()
    bad = 0
    for m in ms:
        shape = {"m": m, "n": 2560, "k": 2560}
        for dt in args.dtypes.split(","):
            bs, st = sm90.default_knobs(limits, dt, shape)
            runs: dict[str, object] = {}
            resets: dict[str, tuple] = {}
            for data in datas:
                bufs = (make_inputs if data == "normal" else int_inputs)(m, 2560, 2560, dt, seed=3)
                ref = reference(bufs, dt)
                for h in hints:
                    sm90.MBAR_SUSPEND_NS = h
                    try:
                        b = sm90.build(SimpleNamespace(shape=shape, dtype=dt), limits, bs, st)
                    finally:
                        sm90.MBAR_SUSPEND_NS = 0
                    run = Runner(b, bufs, dt, False)
                    bufs["out"].fill(0xFFFF)
                    run()
                    c = compare(bufs["out"], ref, dt)
                    nm = f"ours {data} hint {h}"
                    print(f"check {dt} M={m} {nm} ({bs} s{st}): {'ok' if c['ok'] else 'WRONG'} {c}", flush=True)
                    bad += not c["ok"]
                    runs[nm] = run
                c = cp.array(bufs["r"])
                runs[f"cuBLAS b1 {data}"] = cublas_gemm(bufs, c, dt, 1.0)
                resets[f"cuBLAS b1 {data}"] = (c, bufs["r"])
            for fn in runs.values():
                fn()
            cp.cuda.runtime.deviceSynchronize()
            per: dict[str, dict[str, list[float]]] = {nm: {"ms": [], "mj": [], "mhz": []} for nm in runs}
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
                    # then the energy of back-to-back launches for args.energy_s seconds (the counter
                    # moves in steps of tens of ms, too coarse for the 100 timed launches)
                    e0, t0, count, mhz = nvml.energy_mj(0), time.perf_counter(), 0, []
                    while time.perf_counter() - t0 < args.energy_s:
                        for _ in range(50):
                            runs[nm]()
                        count += 50
                        mhz.append(nvml.sm_clock_mhz(0) or 0.0)
                        cp.cuda.runtime.deviceSynchronize()
                    e1 = nvml.energy_mj(0)
                    per[nm]["mhz"].append(statistics.median(mhz))
                    if e0 is not None and e1 is not None:
                        per[nm]["mj"].append((e1 - e0) / count)
            print(f"{dt} M={m} ({bs} s{st}), median of {args.rounds}: ms | mJ per launch | SM MHz under load",
                  flush=True)
            for nm, v in per.items():
                mj = f"{statistics.median(v['mj']):.2f}" if v["mj"] else "-"
                print(f"  {nm:24s} {statistics.median(v['ms']):.4f} | {mj} | {statistics.median(v['mhz']):.0f}",
                      flush=True)
            cp.get_default_memory_pool().free_all_blocks()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
