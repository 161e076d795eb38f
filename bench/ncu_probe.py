"""Launch the default gemm_residual configurations for Nsight Compute to profile (GPU machine).

    ncu --clock-control none -k regex:gemm_residual_sm90 --section SpeedOfLight ... \
        python3 -m bench.ncu_probe [--cases seed-bf16,seed-fp16,m256-bf16] [--launches 2]

Each case builds the Hopper path with the engine's default knobs for its shape (as `tui bench`
would), fills N(0,1) inputs and launches it `--launches` times, synchronising after each; nothing
is timed here (ncu measures). Prints one line per case with its knobs and schedule so that the
profile's launches can be told apart (they come in the order printed).
"""

from __future__ import annotations

import argparse
import sys

import cupy as cp

from bench.sm90.gemm import Runner, cublas_gemm, hopper_build, limits_of_device, make_inputs
from kernels.gemm_residual_experiments import hopper_knobs

CASES = {  # name: (m, n, k, dtype[, build overrides]); "cublas" = cuBLAS gemmEx GEMM alone,
    # "cublas-b1" = cuBLAS gemmEx adding into a copy of R in place (beta=1), the peer that beats
    # ours at small M
    "seed-bf16": (8192, 2560, 2560, "bf16"),
    "seed-fp16": (8192, 2560, 2560, "fp16"),
    "seed-fp32": (8192, 2560, 2560, "fp32"),
    "m256-bf16": (256, 2560, 2560, "bf16"),
    "m512-bf16": (512, 2560, 2560, "bf16"),
    "seed-bf16-gemm": (8192, 2560, 2560, "bf16", {"fuse": False}),
    "seed-bf16-coop256-cl2": (8192, 2560, 2560, "bf16",
                              {"block": "128x256", "stages": 3, "pingpong": False, "cluster": 2,
                               "streamk": False}),
    "seed-bf16-pp160": (8192, 2560, 2560, "bf16", {"block": "128x160", "stages": 4, "pingpong": True}),
    "seed-bf16-pp160-cl2": (8192, 2560, 2560, "bf16",
                            {"block": "128x160", "stages": 4, "pingpong": True, "cluster": 2,
                             "streamk": False}),
    "seed-bf16-cublas": (8192, 2560, 2560, "bf16", "cublas"),
    "seed-fp16-cublas": (8192, 2560, 2560, "fp16", "cublas"),
    "seed-bf16-cublas-b1": (8192, 2560, 2560, "bf16", "cublas-b1"),
    "seed-fp16-cublas-b1": (8192, 2560, 2560, "fp16", "cublas-b1"),
    # the narrow defaults against their clustered form (W multicast 2x1): multicast gained nothing
    # on them (ADR-0007) while cuBLAS uses it there
    "m256-bf16-cl2": (256, 2560, 2560, "bf16", {"cluster": 2, "streamk": False}),
    "m256-bf16-cublas-b1": (256, 2560, 2560, "bf16", "cublas-b1"),
    "m512-bf16-cublas-b1": (512, 2560, 2560, "bf16", "cublas-b1"),
    # M = 1571, where ours trails cuBLAS beta=1 most (one wave of 128x256)
    "m1571-bf16": (1571, 2560, 2560, "bf16"),
    "m1571-bf16-cublas-b1": (1571, 2560, 2560, "bf16", "cublas-b1"),
    "m1571-bf16-cublas": (1571, 2560, 2560, "bf16", "cublas"),
    # the other M where ours trails cuBLAS beta=1 by 4-5 %
    "m2048-bf16": (2048, 2560, 2560, "bf16"),
    "m2048-bf16-cublas-b1": (2048, 2560, 2560, "bf16", "cublas-b1"),
    # M = 2400-3000, where ours trails cuBLAS beta=1 by 7-18 % on the hand-fitted defaults: which kernel,
    # tile, grid and cluster does cuBLAS run there?
    "m2400-bf16": (2400, 2560, 2560, "bf16"),
    "m2400-bf16-cublas-b1": (2400, 2560, 2560, "bf16", "cublas-b1"),
    "m2500-bf16": (2500, 2560, 2560, "bf16"),
    "m2500-bf16-cublas-b1": (2500, 2560, 2560, "bf16", "cublas-b1"),
    "m3000-bf16": (3000, 2560, 2560, "bf16"),
    "m3000-bf16-cublas-b1": (3000, 2560, 2560, "bf16", "cublas-b1"),
    # the swapped defaults (R x 128, out^T = W A^T), 7-8 % behind cuBLAS beta=1 there
    "m2083-bf16": (2083, 2560, 2560, "bf16"),
    "m2083-bf16-cublas-b1": (2083, 2560, 2560, "bf16", "cublas-b1"),
    "m7976-bf16": (7976, 2560, 2560, "bf16"),
    "m7976-bf16-cublas-b1": (7976, 2560, 2560, "bf16", "cublas-b1"),
    # around 7976: one M tile fewer (7936: the last cluster pair full), one more full tile and a
    # wholly empty partner (8064): which of the partial tile and the empty one costs
    "m7936-bf16": (7936, 2560, 2560, "bf16"),
    "m8064-bf16": (8064, 2560, 2560, "bf16"),
    "m7937-bf16": (7937, 2560, 2560, "bf16"),
    "m8000-bf16": (8000, 2560, 2560, "bf16"),
    "m8063-bf16": (8063, 2560, 2560, "bf16"),
    "m7976-bf16-shift": (7976, 2560, 2560, "bf16", {"tail_shift": True}),
    "m8000-bf16-shift": (8000, 2560, 2560, "bf16", {"tail_shift": True}),
    # the two ping-pong consumers on one shared epilogue buffer, at the default's depth and one
    # deeper: slower than the default in the cold duel (ADR-0007), where from?
    "seed-bf16-pp5": (8192, 2560, 2560, "bf16", {"block": "128x128", "stages": 5, "pingpong": True,
                                                 "cluster": 2, "streamk": False, "epi_shared": False}),
    "seed-bf16-pp5-shared": (8192, 2560, 2560, "bf16", {"block": "128x128", "stages": 5, "pingpong": True,
                                                        "cluster": 2, "streamk": False, "epi_shared": True}),
    "seed-bf16-pp6-shared": (8192, 2560, 2560, "bf16", {"block": "128x128", "stages": 6, "pingpong": True,
                                                        "cluster": 2, "streamk": False, "epi_shared": True}),
    # held-out shapes where ours trails cuBLAS beta=1 most: one round of 110 128x256 tiles on 132
    # SMs (1337), and 3072x3584; the stream-K form of 1337 (all 110 tiles' K over the whole grid)
    "m1337-bf16": (1337, 2560, 2560, "bf16"),
    "m1337-bf16-cublas-b1": (1337, 2560, 2560, "bf16", "cublas-b1"),
    "m1337-bf16-sk": (1337, 2560, 2560, "bf16", {"block": "128x256", "stages": 3, "streamk": True,
                                                 "schedule": (132, 0)}),
    "p3072x3584-bf16-cublas-b1": (3072, 3584, 3584, "bf16", "cublas-b1"),
}
"""Overrides: fuse=False launches only the GEMM kernel (no residual read, like cuBLAS's GEMM alone);
the rest are the Hopper planner's choices (``hopper_plan``)."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="seed-bf16,seed-fp16,m256-bf16")
    ap.add_argument("--launches", type=int, default=2)
    args = ap.parse_args()
    names = args.cases.split(",")
    unknown = [nm for nm in names if nm not in CASES]
    if unknown:
        ap.error(f"--cases: unknown {', '.join(unknown)}; known: {', '.join(CASES)}")
    limits = limits_of_device()
    for name in names:
        m, n, k, dt, *extra = CASES[name]
        over = extra[0] if extra else {}
        over = over if isinstance(over, str) else dict(over)
        shape = {"m": m, "n": n, "k": k}
        bufs = make_inputs(m, n, k, dt, seed=1)
        if over == "cublas":
            run = cublas_gemm(bufs, cp.empty_like(bufs["r"]), dt, 0.0)
            print(f"{name}: cuBLAS gemmEx, beta 0 (GEMM alone)", flush=True)
        elif over == "cublas-b1":
            run = cublas_gemm(bufs, bufs["r"].copy(), dt, 1.0)
            print(f"{name}: cuBLAS gemmEx, beta 1 in place on a copy of R", flush=True)
        else:
            bs, st = hopper_knobs(limits, dt, shape)
            bs, st = over.pop("block", bs), over.pop("stages", st)
            build = hopper_build(limits, shape, dt, bs, st, **over)
            run = Runner(build, bufs, dt)
            if over.get("fuse") is False:
                run.calls = run.calls[:1]  # the GEMM kernel only
            print(f"{name}: {bs} s{st} {build.info['consumers']}, {build.info['schedule']}, "
                  f"cluster {build.info['cluster']}, grid {build.info['grid']}, "
                  f"{len(run.calls)} launch(es)",
                  flush=True)
        for _ in range(args.launches):
            run()
            cp.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
