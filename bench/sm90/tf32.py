"""``--tf32``: tf32 on the wgmma path: correctness, then seed timings against cuBLAS FAST_TF32."""

from __future__ import annotations

from bench.sm90.gemm import (
    SEED,
    cublas_gemm,
    time_fn,
)
from bench.sm90.report import check_all
from bench.sm90.variants import CL_SHAPES
from kernels.gemm_residual_experiments import hopper_knobs

TF32_CHECKS = [  # (tile, stages, dtype, fuse, streamk, pingpong)
    ("128x128", 5, "tf32", True, True, False),
    ("128x128", 3, "tf32", True, True, True),
    ("128x128", 4, "tf32", False, True, False),
    ("128x256", 2, "tf32", True, True, False),
    ("256x128", 2, "tf32", True, False, False),
    ("128x128", 0, "tf32", True, True, False),
    ("128x128", 2, "tf32", False, False, True),
]
TF32_TIMED = {
    "coop 128x128 s5": ("128x128", 5, "tf32", True, True, False),
    "coop 128x128 s4": ("128x128", 4, "tf32", True, True, False),
    "pp 128x128 s3": ("128x128", 3, "tf32", True, True, True),
    "coop 128x256 s2": ("128x256", 2, "tf32", True, True, False),
    "coop 256x128 s2": ("256x128", 2, "tf32", True, True, False),
    "coop 128x128 s5 unfused": ("128x128", 5, "tf32", False, True, False),
}


def tf32_mode(args, limits, report, failures, forced_checks, timed, get, out_dir) -> int:
    """tf32 (fp32 data, wgmma .tf32): correctness over odd shapes and forced stream-K schedules,
    then the seed shape: each candidate twice, cuBLAS FAST_TF32 (beta=1 and GEMM alone)."""
    n_checks = check_all(TF32_CHECKS, CL_SHAPES, forced_checks, report, failures, "tf32")
    if failures:
        print("\n".join(failures[:20]))
        return 1
    m, n, k = SEED
    bufs = get(m, n, k, "tf32")[0]
    c = bufs["r"].copy()
    rec: dict = {"cublas_b1": time_fn(cublas_gemm(bufs, c, "tf32", 1.0), iters=args.iters)["median_ms"],
                 "cublas_b0": time_fn(cublas_gemm(bufs, c, "tf32", 0.0), iters=args.iters)["median_ms"]}
    for _round in range(2):
        for name, v in TF32_TIMED.items():
            t, info = timed(m, n, k, v)
            rec.setdefault(name, []).append(t)
    dk = hopper_knobs(limits, "tf32", {"m": m, "n": n, "k": k})
    rec["default_knobs"] = dk
    lines = [f"correctness (tf32): {n_checks} / {n_checks} ok",
             f"seed tf32: cuBLAS FAST_TF32 beta=1 {rec['cublas_b1']:.4f}, GEMM alone {rec['cublas_b0']:.4f}; "
             f"default knobs {dk}"]
    lines += [f"   {nm:26s} " + " ".join(f"{t:.4f}" for t in rec[nm]) for nm in TF32_TIMED]
