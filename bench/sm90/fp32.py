"""``--fp32``: fp32 by 3xTF32: correctness, accuracy against FFMA, cuBLAS fp32 and one tf32 product,
seed timings in alternation, an M sweep against cuBLAS fp32."""

from __future__ import annotations

import cupy as cp

from bench.sm90.gemm import (
    SEED,
    Runner,
    compare,
    cublas_gemm,
    time_fn,
)
from bench.sm90.report import alternate, alternation_rows, check_all, make_sampler, sweep_line, write_table
from bench.sm90.variants import CL_SHAPES, SWEEP
from kernels.gemm_residual_experiments import hopper_knobs
from kernels.spec import render_task

FP32_CHECKS = [  # (tile, stages, dtype, fuse, streamk, pingpong, cluster, split_hi, promote)
    ("128x128", 5, "fp32", True, True, False, 1, False, 1),
    ("128x128", 5, "fp32", True, True, False, 1, False, 0),
    ("128x128", 5, "fp32", True, True, False, 1, True, 4),
    ("128x128", 3, "fp32", True, True, True, 1, False, 0),
    ("128x128", 4, "fp32", False, True, False, 1, False, 2),
    ("128x256", 2, "fp32", True, True, False, 1, True, 0),
    ("128x160", 4, "fp32", True, True, False, 1, False, 1),
    ("128x128", 0, "fp32", True, False, False, 1, False, 1),
]
FP32_TIMED = {  # name: variant
    "3xTF32 128x128 s5 promote 4": ("128x128", 5, "fp32", True, True, False, 1, False, 4),
    "3xTF32 128x128 s5 promote 0": ("128x128", 5, "fp32", True, True, False, 1, False, 0),
    "3xTF32 128x128 s5 promote 1": ("128x128", 5, "fp32", True, True, False, 1, False, 1),
    "3xTF32 128x128 s5 promote 2": ("128x128", 5, "fp32", True, True, False, 1, False, 2),
    "3xTF32 128x128 s5 promote 8": ("128x128", 5, "fp32", True, True, False, 1, False, 8),
    "3xTF32 128x128 s5 promote 16": ("128x128", 5, "fp32", True, True, False, 1, False, 16),
    "3xTF32 128x160 s4 promote 4": ("128x160", 4, "fp32", True, True, False, 1, False, 4),
    "1xTF32 128x128 s5": ("128x128", 5, "tf32", True, True, False, 1),
}


def fp32_mode(args, limits, report, failures, forced_checks, timed, get, out_dir, build) -> int:
    """fp32 by 3xTF32: correctness (odd shapes, forced stream-K splits) at the fp32 bar; then, at
    the seed shape, each candidate's error against fp64 (max |out - ref| / rms(ref), normwise)
    beside our FFMA kernel, cuBLAS fp32 (COMPUTE_32F, beta=1) and one tf32 product; then all of
    them timed in alternation (rounds x 20 launches) with NVML clock and power; then an M sweep of
    the default against cuBLAS fp32 beta=1."""
    from engine.task import TaskSpec
    from kernels.gemm_residual_auto import PORTABLE_SPEC

    n_checks = check_all(FP32_CHECKS, CL_SHAPES, forced_checks, report, failures, "fp32 3xTF32")
    if failures:
        print("\n".join(failures[:20]))
        return 1
    m, n, k = SEED
    bufs, ref = get(m, n, k, "fp32")
    shape = {"m": m, "n": n, "k": k}
    runs: dict = {}
    errs: dict = {}

    def measure_err(name, fn, out):
        out.fill(cp.nan)
        fn()
        cp.cuda.runtime.deviceSynchronize()
        errs[name] = compare(out, ref, "fp32")

    for name, v in FP32_TIMED.items():
        runs[name] = Runner(build(m, n, k, v), bufs, "fp32")
        measure_err(name, runs[name], bufs["out"])
    bs, st = PORTABLE_SPEC.default_knobs(limits, "fp32", shape)
    ffma = render_task(PORTABLE_SPEC, TaskSpec(kernel="gemm_residual_mma", dtype="fp32", shape=shape,
                                        block_size=bs, memory_pipelining=st), limits)
    runs[f"FFMA {bs} s{st}"] = Runner(ffma, bufs, "fp32")
    measure_err(f"FFMA {bs} s{st}", runs[f"FFMA {bs} s{st}"], bufs["out"])
    c1 = bufs["r"].copy()
    b1 = cublas_gemm(bufs, c1, "fp32", 1.0)

    def cublas_b1():
        c1[...] = bufs["r"]  # beta=1 accumulates into C: restore R first (a copy, timed too)
        b1()
    runs["cuBLAS fp32 beta=1 (+copy of R)"] = cublas_b1
    measure_err("cuBLAS fp32 beta=1 (+copy of R)", cublas_b1, c1)
    c0 = cp.empty_like(bufs["r"])
    runs["cuBLAS fp32 GEMM alone (b=0)"] = cublas_gemm(bufs, c0, "fp32", 0.0)
    runs["cuBLAS fp32 beta=1 (no copy)"] = b1
    sampler = make_sampler()
    per = alternate(runs, args.rounds, sampler, warm=3)
    if sampler:
        sampler.stop.set()
    for name, v in FP32_TIMED.items():  # the workspace and output still right after all launches
        measure_err(name + " (after)", runs[name], bufs["out"])
        if v[2] == "fp32" and not errs[name + " (after)"]["ok"]:
            failures.append(f"after timing {name}: {errs[name + ' (after)']}")
    lines = [f"correctness (fp32 3xTF32, max |err|/rms < 1e-4, normwise < 1e-5): "
             f"{n_checks} / {n_checks} ok",
             f"seed fp32 ({args.rounds} rounds x 20 launches, alternating); error vs fp64",
             f"   {'candidate':34s} {'median':>8} {'best rnd':>8} {'ratio':>6} {'SM MHz':>7} {'W':>5} "
             f"{'max|err|/rms':>12} {'normwise':>9}"]
    for nm, med, best, ratio, clk, pw in alternation_rows(per, sampler):
        e = errs.get(nm)
        lines.append(f"   {nm:34s} {med:8.4f} {best:8.4f} {ratio:6.3f} {clk:7.0f} {pw:5.0f} "
                     + (f"{e['max_abs_over_rms']:12.2e} {e['rel_fro']:9.2e}" if e else ""))
        report["seed"].append({"name": nm, "rounds": per[nm], "err": e})
    print("\n".join(lines), flush=True)
    for mm in SWEEP:
        rec: dict = {"m": mm}
        bb = get(mm, n, k, "fp32")[0]
        c = bb["r"].copy()
        rec["cublas_fp32_b1"] = time_fn(cublas_gemm(bb, c, "fp32", 1.0), iters=20)["median_ms"]
        dk = hopper_knobs(limits, "fp32", {"m": mm, "n": n, "k": k})
        rec["default"], info = timed(mm, n, k, (dk[0], dk[1], "fp32", True, True))
        rec["default knobs"] = f"{dk[0]} s{dk[1]} {info['schedule']}"
        report["sweep"].append(rec)
        lines.append(sweep_line(rec))
        print(lines[-1], flush=True)
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_fp32")
    return 0 if not failures else 1
