"""The default mode: correctness of ``VARIANTS`` at odd and regular shapes (stream-K forced too),
then the bf16 M sweep of every stream-K schedule of 128x256 s3, the data-parallel kernel, 128x128 s4
and the default knobs, with torch matmul + add and cuBLAS beta=1; the seed shape in bf16 and fp16."""

from __future__ import annotations

import json
from pathlib import Path

from bench.sm90.gemm import (
    cublas_gemm,
    score,
    time_fn,
    torch_matmul_add,
)
from bench.sm90.report import check_all
from bench.sm90.variants import SWEEP
from kernels.gemm_residual_experiments import hopper_knobs, hopper_schedules

VARIANTS = [  # (block, stages, dtype, fuse, streamk)
    ("128x256", 3, "bf16", True, True),
    ("128x256", 3, "bf16", True, False),
    ("128x256", 3, "fp16", True, True),
    ("128x256", 0, "bf16", True, True),
    ("128x256", 3, "bf16", False, True),
    ("128x128", 4, "bf16", True, True),
    ("256x128", 3, "bf16", True, True),
    ("128x128", 0, "fp16", False, True),
]


def sweep_mode(args, limits, report, failures, forced_checks, timed, get, out_dir) -> int:
    """The default mode (no mode flag); tables to $OUT as sm90_table.txt and sm90_results.json."""
    sms = limits.sm_count
    # ---- 1. correctness ----
    shapes = [(1, 2560, 2560), (586, 2560, 2560), (1571, 2560, 2560), (2048, 2560, 2560),
              (7976, 2560, 2560), (8192, 2560, 2560), (300, 136, 200), (130, 264, 72)]
    n_checks = check_all(VARIANTS, shapes, forced_checks, report, failures)

    # ---- 2. timing ----
    base = ("128x256", 3, "bf16", True, True)
    dp_only = ("128x256", 3, "bf16", True, False)
    for m in SWEEP:
        n = k = 2560
        rec: dict = {"m": m}
        rec["torch"] = None if args.no_torch else torch_matmul_add(m, n, k, "bf16", args.iters)
        c = get(m, n, k, "bf16")[0]["r"].copy()
        rec["cublas_b1"] = time_fn(cublas_gemm(get(m, n, k, "bf16")[0], c, "bf16", 1.0),
                                   iters=args.iters)["median_ms"]
        rec["dp"], _ = timed(m, n, k, dp_only)
        cands = {}
        for sch in hopper_schedules(m, n, k, 128, 256, sms):
            cands[f"{sch[0]}/{sch[1]}"], _ = timed(m, n, k, base, sch)
        rec["sk_cands"] = cands
        rec["auto_128x256"], info = timed(m, n, k, base)
        rec["auto_sched"] = info["schedule"] + f" grid {info['grid']}"
        rec["auto_128x128s4"], _ = timed(m, n, k, ("128x128", 4, "bf16", True, True))
        dk = hopper_knobs(limits, "bf16", {"m": m, "n": n, "k": k})
        rec["default_knobs"] = dk
        rec["default"], _ = timed(m, n, k, (dk[0], dk[1], "bf16", True, True))
        rec["score_default"] = score(rec["default"], rec["torch"], m, n, k)
        rec["score_dp"] = score(rec["dp"], rec["torch"], m, n, k)
        report["sweep"].append(rec)
        print(json.dumps(rec, default=str), flush=True)

    m, n, k = 8192, 2560, 2560
    for dt in ("bf16", "fp16"):
        rec = {"dtype": dt}
        rec["torch"] = None if args.no_torch else torch_matmul_add(m, n, k, dt, args.iters)
        for name, v in (("sk", ("128x256", 3, dt, True, True)), ("dp", ("128x256", 3, dt, True, False))):
            rec[name], _ = timed(m, n, k, v)
            rec[name + "_again"], _ = timed(m, n, k, v)
        for sch in hopper_schedules(m, n, k, 128, 256, sms)[1:]:
            rec[f"sk {sch[0]}/{sch[1]}"], _ = timed(m, n, k, ("128x256", 3, dt, True, True), sch)
        rec["unfused"], _ = timed(m, n, k, ("128x256", 3, dt, False, True))
        rec["off"], _ = timed(m, n, k, ("128x256", 0, dt, True, True))
        report["seed"].append(rec)
        print(json.dumps(rec, default=str), flush=True)

    lines = [f"correctness: {n_checks - len(failures)} / {n_checks} ok (+ re-checks after timing)",
             f"{'M':>5} {'torch':>7} {'cuBLAS1':>7} {'dp':>7} {'auto':>7} {'128x128':>7} "
             f"{'default':>7} {'S_dp':>5} {'S_def':>5}  knobs / schedule / candidates"]
    for r in report["sweep"]:
        lines.append(f"{r['m']:5d} {r['torch'] or 0:7.4f} {r['cublas_b1']:7.4f} {r['dp']:7.4f} "
                     f"{r['auto_128x256']:7.4f} {r['auto_128x128s4']:7.4f} {r['default']:7.4f} "
                     f"{r['score_dp'] or 0:5.3f} {r['score_default'] or 0:5.3f}  "
                     f"{r['default_knobs']} {r['auto_sched']} "
                     + " ".join(f"{kk}:{vv:.4f}" for kk, vv in r["sk_cands"].items()))
    sd = [r["score_default"] for r in report["sweep"] if r["score_default"] is not None]
    if sd:
        lines.append(f"mean score default {sum(sd) / len(sd):.3f}")
    for r in report["seed"]:
        lines.append("seed " + " ".join(f"{kk}={vv:.4f}" if isinstance(vv, float) else f"{kk}={vv}"
                                        for kk, vv in r.items()))
    lines += failures[:20]
    table = "\n".join(lines)
    print(table)
    if out_dir:
        Path(out_dir, "sm90_table.txt").write_text(table + "\n")
        Path(out_dir, "sm90_results.json").write_text(json.dumps(report, indent=1, default=str))
    return 0 if not failures else 1
