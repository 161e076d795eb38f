"""``--torch-scan``: the default build against torch matmul + add and cuBLAS beta=1 at many M."""

from __future__ import annotations

from pathlib import Path

from bench.sm90.args import also_label
from bench.sm90.gemm import (
    Runner,
    cublas_gemm,
    score,
    torch_matmul_add_fn,
)
from bench.sm90.report import alternate, make_sampler, write_table
from bench.sm90.variants import cluster_tag, engine_default
from kernels.gemm_residual_experiments import hopper_knobs

SCAN_M = tuple(sorted(set(range(256, 8193, 63)) | {512, 1024, 1571, 2048, 2400, 2500, 3000, 4096,
                                                       5000, 7488, 7976, 8192}))
"""``--torch-scan``'s M without ``--m-list``: every 63rd M from 256 (so the last tile's fill
varies: most are M no tile divides), the standard sweep's M and the ones earlier sessions found
weak (138 values)."""


def torch_scan_mode(args, limits, report, failures, verify, get, forget, out_dir, build) -> int:
    """The issue's "never slower than matmul + add" at many M (N = K = 2560; ``--m-list``, else
    ``SCAN_M``), in each of ``--scan-dtypes``: the engine's default build, checked against the
    float64 reference, then timed in alternation with torch matmul + add and cuBLAS beta=1
    (``--rounds`` rounds of 20 launches each, the hot card; a rested run per M would take an
    hour). Where the default plans a stream-K tail, the same knobs data-parallel too; ``--also``
    adds the engine's build of other knobs. Per M: medians, ours / torch (the median of the
    per-round ratios), the SOL-ExecBench score; at the end the M where ours is not faster."""
    n = k = 2560
    sampler = make_sampler()
    ms = args.m_list if args.m_list_given else list(SCAN_M)
    lines = [f"torch scan, N = K = 2560, {len(ms)} M, {args.rounds} alternating rounds x 20 launches "
             "(ms; ratio = ours / torch, median of the rounds' ratios)"]
    slower: list[str] = []
    for dt in args.scan_dtypes:
        lines.append(f"{dt}: {'M':>5} {'knobs':28s} {'ours':>7} {'dp':>7} {'torch':>7} {'cuBLAS1':>7} "
                     f"{'ratio':>6} {'score':>6}  also")
        scores = []
        for m in ms:
            shape = {"m": m, "n": n, "k": k}
            bs, st = hopper_knobs(limits, dt, shape)
            v = engine_default(bs, st, dt)
            b = build(m, n, k, v)
            knobs = f"{bs} s{st} {b.info['consumers'].split(' ')[0]} {cluster_tag(b.info)}".strip()
            cands = {"ours": v}
            if b.info["schedule"].startswith("stream-K"):  # a planned stream-K tail
                cands["dp"] = v._replace(streamk=False)
            for tile, st_, over in args.also:
                cands[also_label(tile, st_, over)] = engine_default(tile, st_, dt)._replace(**over)
            bufs = get(m, n, k, dt)[0]
            runs = {}
            for nm, cv in cands.items():
                if verify(m, n, k, cv, label=f"torch scan {nm}"):
                    runs[nm] = Runner(build(m, n, k, cv), bufs, dt)
            tfn = torch_matmul_add_fn(m, n, k, dt)
            if tfn is not None:
                runs["torch"] = tfn
            runs["cuBLAS beta=1"] = cublas_gemm(bufs, bufs["r"].copy(), dt, 1.0)
            per = alternate(runs, args.rounds, sampler, tag=f"{dt} {m} ")
            med = {nm: sorted(ts)[len(ts) // 2] for nm, ts in per.items()}
            ratio = (sorted(a / b_ for a, b_ in zip(per["ours"], per["torch"], strict=True))[args.rounds // 2]
                     if "ours" in per and "torch" in per else float("nan"))
            sc = score(med["ours"], med.get("torch"), m, n, k) if "ours" in med else None
            if sc is not None:
                scores.append(sc)
            if not ratio < 1.0:
                slower.append(f"{dt} M={m} {knobs}: ours {med.get('ours', float('nan')):.4f} vs torch "
                              f"{med.get('torch', float('nan')):.4f} (ratio {ratio:.3f})")
            also = " ".join(f"{nm}={t:.4f}" for nm, t in med.items()
                            if nm not in ("ours", "dp", "torch", "cuBLAS beta=1"))
            lines.append(f"      {m:5d} {knobs:28s} {med.get('ours', float('nan')):7.4f} "
                         f"{med.get('dp', float('nan')):7.4f} {med.get('torch', float('nan')):7.4f} "
                         f"{med['cuBLAS beta=1']:7.4f} {ratio:6.3f} {sc if sc is not None else float('nan'):6.3f}  {also}")
            report["sweep"].append({"dtype": dt, "m": m, "knobs": knobs, "rounds": per})
            print(lines[-1], flush=True)
            if out_dir:  # so far, in case the call's time runs out before the table
                Path(out_dir, "sm90_torch_scan.partial.txt").write_text("\n".join(lines) + "\n")
            forget()
        if scores:
            lines.append(f"{dt}: mean score {sum(scores) / len(scores):.3f} over {len(scores)} M")
    lines.append(f"M where ours is not faster than torch matmul + add: {len(slower)}")
    lines += slower
    if sampler:
        sampler.stop.set()
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_torch_scan")
    return 0 if not failures and not slower else 1
