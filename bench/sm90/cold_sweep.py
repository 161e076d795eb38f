"""``--cold-duel --m-list``: a rested M sweep of the default build against its twins, cuBLAS and
torch, with the rested SOL-ExecBench scores."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import cupy as cp

from bench.sm90.args import also_label
from bench.sm90.cold_duel import COLD_DUEL
from bench.sm90.gemm import (
    Runner,
    cublas_gemm,
    score,
    time_fn,
    torch_matmul_add_fn,
)
from bench.sm90.report import write_table
from bench.sm90.variants import Variant, engine_default, for_dtype
from kernels.gemm_residual_experiments import hopper_knobs, hopper_plan


def cold_sweep_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """``--cold-duel --m-list ...``: for each M (N = K = 2560, bf16), the default build, ping-pong
    128x128 s5 in 2x1 clusters, cuBLAS beta=1, cuBLAS's GEMM alone and torch matmul + add, each run
    (10 warm-ups + 100 timed, the median) after ``--idle`` s of rest, shuffled, ``--rounds`` rounds;
    the SOL-ExecBench score of ours against the rested torch; with ``--only``, the cold-duel rows
    that match too; with ``--tail-alt``, the default build with ``tail_shift=False`` instead of
    its clustered twin. Decides whether clusters become the default at large M, and what the rested
    scores are."""
    import random

    n = k = 2560
    dt = args.sweep_dtype
    rng = random.Random(2)
    lines = [f"{dt} M sweep, cold runs: {args.rounds} rounds, {args.idle:g} s idle before each run "
             "(median of the runs' medians, ms; score against the rested torch)"]
    scores: dict[str, list[float]] = {}
    for m in args.m_list:
        bufs, _ref = get(m, n, k, dt)
        shape = {"m": m, "n": n, "k": k}
        bs, st = hopper_knobs(limits, dt, shape)
        cm, cn = hopper_plan(SimpleNamespace(shape=shape, dtype=dt), limits, bs, st).detail.cluster
        cl = cm * cn  # the default's cluster size
        cands = {f"default {bs} s{st}" + (" cl2" if cl > 1 else ""): engine_default(bs, st, dt)}
        for tile, st_, over in args.also:  # other knobs, built as the engine would build them
            cands[also_label(tile, st_, over)] = engine_default(tile, st_, dt)._replace(**over)
        if "halves" in build(m, n, k, engine_default(bs, st, dt)).info["schedule"]:
            # the default runs its last round in halves: the same build with that round whole
            cands["default, last round whole"] = Variant(bs, st, dt, True, False, half_tail=False)
        if args.tail_alt:  # the same build with its partial last tiles clipped (no tail shift)
            cands["default, tiles clipped"] = Variant(bs, st, dt, True, None, tail_shift=False)
        elif cl > 1:  # the default is clustered: time the same schedule without
            cands["pp 128x128 s5 no cluster"] = ("128x128", 5, dt, True, True, True, 1)
        else:
            cands["pp 128x128 s5 cl2"] = ("128x128", 5, dt, True, False, True, 2)
        if args.only is not None:  # --only: the cold-duel rows that match, at this M too
            cands.update({nm: for_dtype(v, dt) for nm, v in COLD_DUEL.items()
                          if "(default)" not in nm and re.search(args.only, nm)})
        runs = {}
        for name, v in cands.items():
            verify(m, n, k, v, label="cold sweep")
            runs[name] = Runner(build(m, n, k, v), bufs, dt)
            runs[name]()
        c1 = bufs["r"].copy()
        runs["cuBLAS beta=1"] = cublas_gemm(bufs, c1, dt, 1.0)
        runs["cuBLAS GEMM alone"] = cublas_gemm(bufs, cp.empty_like(bufs["r"]), dt, 0.0)
        tfn = torch_matmul_add_fn(m, n, k, dt)
        if tfn is not None:
            runs["torch matmul + add"] = tfn
        cp.cuda.runtime.deviceSynchronize()
        per: dict[str, list[float]] = {nm: [] for nm in runs}
        for _r in range(args.rounds):
            for nm in rng.sample(list(runs), len(runs)):
                time.sleep(args.idle)
                per[nm].append(time_fn(runs[nm], warmup=10, iters=100)["median_ms"])
        med = {nm: sorted(ts)[len(ts) // 2] for nm, ts in per.items()}
        t_b = med.get("torch matmul + add")
        parts = []
        for nm, t in med.items():
            sc = score(t, t_b, m, n, k) if nm in cands else None
            if sc is not None:
                scores.setdefault(nm.split(" ")[0] if nm.startswith("default") else nm, []).append(sc)
            parts.append(f"{nm} {t:.4f}" + (f" (score {sc:.3f})" if sc is not None else ""))
        lines.append(f"M={m}: " + "; ".join(parts))
        report["sweep"].append({"m": m, "runs": per})
        print(lines[-1], flush=True)
    for nm, sc in scores.items():
        lines.append(f"mean rested score, {nm}: {sum(sc) / len(sc):.3f} over {len(sc)} M")
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_cold_sweep")
    return 0 if not failures else 1
