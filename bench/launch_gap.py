"""Time decode-path builds and cuBLAS three ways (GPU machine): each launch between its own event
pair, batches of launches between one pair, and the engine's queued timer; plus the host's time to
queue one launch. Where a kernel's per-launch time exceeds its batched time by more than a peer's,
the difference lies outside the kernel's work (launch, start-up, tail).

    python3 -m bench.launch_gap --shape 16x8192x8192 [--plans 16x16/4/4/1/128/2,...] [--dtype bf16]

Builds as ``bench.skinny_probe --plans`` (the default plan first), each launched plainly and with
programmatic dependent launch ("pdl"), each checked against the float64 reference before it is
timed. Exits 1 if a build is wrong, 2 on malformed arguments.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import skinny_probe as sp
from kernels import gemm_residual_skinny as sk

BATCH = 50
REPEATS = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sp.add_shape_and_plans(ap)
    ap.add_argument("--dtype", default="bf16", choices=sk.DTYPES)
    args = ap.parse_args(argv)
    sp.read_shape_and_plans(ap, args)
    return args


def main(args: argparse.Namespace) -> int:
    import cupy as cp

    from engine import Blas, device_limits, queued_timer, time_queued

    limits, _ = device_limits(0, "device")
    m, n, k = args.shape
    bench = sp.Bench(cp, m, n, k, args.dtype, 10, 100)
    plans = sp.listed(m, n, k, args.dtype, limits, args.plans)
    built = sp.compile_all([sk.source(p, args.dtype) for p in plans], limits.arch, 4)
    timer = queued_timer()
    sets = len(bench.sets)

    def batched(run) -> float:
        out = []
        for _ in range(REPEATS):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            for i in range(BATCH):
                run(i % sets)
            e1.record()
            e1.synchronize()
            out.append(cp.cuda.get_elapsed_time(e0, e1) / BATCH)
        return statistics.median(out)

    def host_us(run) -> float:
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i in range(BATCH):
            run(i % sets)
        t = (time.perf_counter() - t0) / BATCH
        cp.cuda.Device().synchronize()
        return t * 1e6

    def report(name: str, run) -> None:
        single = bench.time(run)
        queued = statistics.median(time_queued(timer, name, lambda i: run(i % sets), 100))
        print(f"{name:>24} {single * 1e3:9.2f} {batched(run) * 1e3:9.2f} {queued * 1e3:9.2f} {host_us(run):8.1f}",
              flush=True)

    print(f"{m}x{n}x{k} {args.dtype}: us a launch (single event pairs, batches of {BATCH}, queued timer), "
          f"host us to queue one")
    print(f"{'build':>24} {'single':>9} {'batch':>9} {'queued':>9} {'host':>8}")
    blas = Blas(args.dtype)
    calls = [blas.bind(a, w, r.copy(), 1.0, 1.0) for a, w, r in bench.sets]
    report("cuBLAS gemmEx beta=1", lambda i: calls[i]())
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for p, dependent in ((p, d) for p in plans for d in (False, True)):
            run = sp.launcher(cp, bench, p, built[sk.source(p, args.dtype)][0], Path(tmp), dependent)
            bench.out.fill(0xFFFF)
            run(0)
            cp.cuda.get_current_stream().synchronize()
            err = bench.error()
            name = f"{p.block_size}/{p.stages}/{p.warps}/{p.split_k}/{p.bulk_k}" + (" pdl" if dependent else "")
            if not err < sp.TOL[args.dtype]:
                print(f"{name:>24} wrong (error {err:.3g})")
                bad += 1
                continue
            report(name, run)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(parse_args()))
