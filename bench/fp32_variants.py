"""fp32 FFMA variants side by side on one GPU: compile, verify against float64, time (CUDA events).

Usage (device machine, wheels installed as bench/gpu_session.sh does):
    python3 bench/fp32_variants.py [--iters 50] [--only NAME,NAME] [--orig PATH] [--waves]
(--orig: an older kernel file, e.g. `git show f5bd3c5:kernels/gemm_residual_fp32.cu > orig.cu`.)

Each variant is the rendered fp32 source (kernels/gemm_residual.py) for a tile, stage count and
extra #defines (GR_TN outputs per thread along N, GR_KUNROLL k steps per unrolled body). For each:
NVRTC for the device's arch (as the engine compiles), registers and spills from ptxas, correctness at
the seed shape and at edge shapes (M, N tails; K % 32 = 8, 16, 24) with the engine's rule
|out - ref| <= 1e-4 (|ref| + rms(ref)), then the median of --iters timed launches after a warm-up, at
the seed shape (8192 x 2560 x 2560), next to cuBLAS SGEMM (cupy.matmul on float32, plus the add).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from cupy.cuda import driver  # noqa: E402

from kernels.gemm_residual import SPEC  # noqa: E402
from kernels.nvrtc_check import compile_cubin  # noqa: E402

SEED = (8192, 2560, 2560)
EDGES = [(777, 1000, 1000), (1571, 2560, 1016), (333, 1048, 1040), (129, 264, 2048)]
RTOL = 1e-4

# name: (BM, BN, BK, stages, {define: value})
VARIANTS: dict[str, tuple[int, int, int, int, dict[str, int]]] = {
    "t8_128x128x16_s4": (128, 128, 16, 4, {"GR_TN": 8}),
    "t8_128x128x16_s4_u8": (128, 128, 16, 4, {"GR_TN": 8, "GR_KUNROLL": 8}),
    "t8_128x128x16_s4_u4": (128, 128, 16, 4, {"GR_TN": 8, "GR_KUNROLL": 4}),
    "t8_128x128x32_s3_u8": (128, 128, 32, 3, {"GR_TN": 8, "GR_KUNROLL": 8}),
    "t8_128x128x32_s3_u4": (128, 128, 32, 3, {"GR_TN": 8, "GR_KUNROLL": 4}),
    "t16_128x128x16_s4_u4": (128, 128, 16, 4, {"GR_TN": 16, "GR_KUNROLL": 4}),
    "t16_128x128x16_s4_u8": (128, 128, 16, 4, {"GR_TN": 16, "GR_KUNROLL": 8}),
    "t16_128x128x32_s3_u2": (128, 128, 32, 3, {"GR_TN": 16, "GR_KUNROLL": 2}),
    "t16_128x128x32_s3_u4": (128, 128, 32, 3, {"GR_TN": 16, "GR_KUNROLL": 4}),
    "t16_128x128x32_s3_u8": (128, 128, 32, 3, {"GR_TN": 16, "GR_KUNROLL": 8}),
    "t16_128x128x16_s3_u4": (128, 128, 16, 3, {"GR_TN": 16, "GR_KUNROLL": 4}),
    "t16_256x128x32_s3_u4": (256, 128, 32, 3, {"GR_TN": 16, "GR_KUNROLL": 4}),
    "t16_128x256x32_s3_u4": (128, 256, 32, 3, {"GR_TN": 16, "GR_KUNROLL": 4}),
    "t16_256x128x16_s4_u4": (256, 128, 16, 4, {"GR_TN": 16, "GR_KUNROLL": 4}),
    # 8x8 per thread, 512 threads, one block (16 warps) per SM: fewer copies per FFMA
    "t8_256x128x16_s4": (256, 128, 16, 4, {"GR_TN": 8}),
    "t8_128x256x16_s4": (128, 256, 16, 4, {"GR_TN": 8}),
    # FFMA emission order within a k step (GF_ORDER, default 3; results are bit-identical: each accumulator
    # sees the same k sequence): 1 j-outer, 2 i-outer snake, 3 j-outer snake. ptxas' register
    # allocation, hence the register-bank pairs, follows the order.
    "t8_128x128x16_s4_o0": (128, 128, 16, 4, {"GR_TN": 8, "GF_ORDER": 0}),
    "t8_128x128x16_s4_o1": (128, 128, 16, 4, {"GR_TN": 8, "GF_ORDER": 1}),
    "t8_128x128x16_s4_o2": (128, 128, 16, 4, {"GR_TN": 8, "GF_ORDER": 2}),
    "t8_128x128x16_s4_o3": (128, 128, 16, 4, {"GR_TN": 8, "GF_ORDER": 3}),
    # GF_COPY 1: interior copy rows from two advancing 64-bit pointers, one IMAD.WIDE per further row
    # (1158 instead of 1172 instructions per tile), with FFMA orders 2-10 (see the kernel's gf_pos)
    **{f"t8_128x128x16_s4_c1_o{o}": (128, 128, 16, 4, {"GR_TN": 8, "GF_COPY": 1, "GF_ORDER": o})
       for o in (2, 3, 5, 6, 7, 8, 9, 10)},
}


def source(bm: int, bn: int, bk: int, stages: int, defs: dict[str, int], orig: str | None = None) -> str:
    src = SPEC.render("fp32", (bm, bn, bk), stages, True)
    if orig:
        i = src.index("// fp32 path of gemm_residual")
        src = src[:i] + open(orig).read()
    rendered = src[:src.index("// out[M,N]")]       # the spec's #define lines
    head = "".join(f"#define {k} {v}\n" for k, v in defs.items() if f"#define {k} " not in rendered)
    return head + src


def threads(bm: int, bn: int, defs: dict[str, int]) -> int:
    return bm * bn // (8 * defs.get("GR_TN", 8))


def smem(bm: int, bn: int, bk: int, stages: int) -> int:
    return max(1, stages) * bk * (bm + 4 + bn + 4) * 4


def run_kernel(fn, cfg, a, w, r, out, m, n, k):
    bm, bn, bk, stages, defs = cfg
    grid = (math.ceil(n / bn), math.ceil(m / bm), 1)
    fn(grid, (threads(bm, bn, defs), 1, 1), (a, w, r, out, np.int32(m), np.int32(n), np.int32(k)),
       shared_mem=smem(bm, bn, bk, stages))


_CASES: dict[tuple[int, int, int], tuple] = {}


def case(m: int, n: int, k: int):
    """Inputs (standard normal, generated on the GPU) and the float64 reference, made once per shape."""
    if (m, n, k) not in _CASES:
        g = cp.random.default_rng(m * 7 + n * 13 + k)
        a = g.standard_normal((m, k), dtype=cp.float32)
        w = g.standard_normal((n, k), dtype=cp.float32)
        r = g.standard_normal((m, n), dtype=cp.float32)
        ref = a.astype(cp.float64) @ w.astype(cp.float64).T + r.astype(cp.float64)
        scale = float(cp.sqrt(cp.mean(ref * ref)))
        _CASES[(m, n, k)] = (a, w, r, ref, cp.abs(ref) + scale)
    return _CASES[(m, n, k)]


def check(fn, cfg, m, n, k) -> float:
    """Largest |out - ref| / (|ref| + rms(ref)); inf if any output is NaN (never written)."""
    a, w, r, ref, den = case(m, n, k)
    out = cp.full((m, n), cp.nan, dtype=cp.float32)
    run_kernel(fn, cfg, a, w, r, out, m, n, k)
    e = float(cp.max(cp.abs(out.astype(cp.float64) - ref) / den))
    return e if not math.isnan(e) else float("inf")


def timeit(call, iters: int, warm: int = 5) -> list[float]:
    for _ in range(warm):
        call()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(iters):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        call()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return ts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--only", default="")
    ap.add_argument("--waves", action="store_true",
                    help="also time the first variant at M = 8448 (1320 tiles of 128x128: 5 full waves of 264)")
    ap.add_argument("--rounds", type=int, default=0,
                    help="then time every correct variant and cuBLAS again in R interleaved rounds (rotating order)")
    ap.add_argument("--orig", default="", help="an older gemm_residual_fp32.cu to time as 'orig' (TN 8)")
    args = ap.parse_args()
    variants = dict(VARIANTS)
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only.split(",")}
    srcs = {name: source(*cfg) for name, cfg in variants.items()}
    if args.orig:
        variants["orig_128x128x16_s4"] = (128, 128, 16, 4, {})
        srcs["orig_128x128x16_s4"] = source(128, 128, 16, 4, {}, args.orig)
    dev = cp.cuda.Device()
    cc = dev.compute_capability
    arch = f"sm_{cc}a" if cc == "90" else f"sm_{cc}"
    t0 = time.time()
    with ThreadPoolExecutor(min(16, len(srcs))) as pool:
        reps = dict(zip(srcs, pool.map(lambda s: compile_cubin(s, arch, ("-std=c++17",)), srcs.values()), strict=True))
    print(f"compiled {len(srcs)} variants for {arch} in {time.time() - t0:.1f} s", flush=True)
    m, n, k = SEED
    a, w, r = case(m, n, k)[:3]
    out = cp.empty((m, n), dtype=cp.float32)
    flop = 2 * m * n * k
    rows = []
    mods = []
    fns = {}
    for name, cfg in variants.items():
        rep = reps[name]
        if not rep.ok:
            print(f"{name}: COMPILE FAILED\n{rep.log[-800:]}", flush=True)
            continue
        f = rep.functions.get("gemm_residual_fp32")
        mod = cp.cuda.function.Module()
        mod.load(rep.cubin)
        mods.append(mod)
        fn = mod.get_function("gemm_residual_fp32")
        fns[name] = fn
        sm = smem(*cfg[:4])
        if sm > 48 * 1024:
            driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, sm)
        try:
            errs = [check(fn, cfg, *shape) for shape in [SEED, *EDGES]]
            ts = timeit(lambda fn=fn, cfg=cfg: run_kernel(fn, cfg, a, w, r, out, m, n, k), args.iters)
        except Exception as exc:  # noqa: BLE001
            print(f"{name}: FAILED {exc!r}", flush=True)
            continue
        med = float(np.median(ts))
        ok = all(e <= RTOL for e in errs)
        rows.append((med, name))
        print(f"{name:24s} regs {f.registers:3d} spill {f.spill_store_bytes}/{f.spill_load_bytes} smem {sm:6d} "
              f"thr {threads(*cfg[:2], cfg[4]):3d} | median {med:.4f} ms p10 {np.percentile(ts, 10):.4f} "
              f"p90 {np.percentile(ts, 90):.4f} | {flop / med / 1e9:.1f} TFLOP/s | "
              f"{'OK' if ok else 'WRONG'} maxerr {max(errs):.2e}", flush=True)
    mm = timeit(lambda: cp.matmul(a, w.T, out=out), args.iters)
    mma = timeit(lambda: (cp.matmul(a, w.T, out=out), cp.add(out, r, out=out)), args.iters)
    print(f"{'cuBLAS matmul (cupy)':24s} median {np.median(mm):.4f} ms p10 {np.percentile(mm, 10):.4f} "
          f"p90 {np.percentile(mm, 90):.4f} | {flop / np.median(mm) / 1e9:.1f} TFLOP/s")
    print(f"{'cuBLAS matmul + add':24s} median {np.median(mma):.4f} ms | {flop / np.median(mma) / 1e9:.1f} TFLOP/s")
    if args.waves and rows:
        name = next(iter(fns))
        fn, cfg = fns[name], variants[name]
        for mw in (8448, 8192):
            aw, ww, rw = case(mw, n, k)[:3]
            ow = cp.empty((mw, n), dtype=cp.float32)
            ts = timeit(lambda fn=fn, cfg=cfg, aw=aw, ww=ww, rw=rw, ow=ow, mw=mw:
                        run_kernel(fn, cfg, aw, ww, rw, ow, mw, n, k), args.iters)
            print(f"waves {name} M={mw}: median {np.median(ts):.4f} ms, {2 * mw * n * k / np.median(ts) / 1e9:.1f} "
                  f"TFLOP/s, max err {check(fn, cfg, mw, n, k):.2e}")
    if args.rounds and rows:
        calls = {nm: (lambda fn=fns[nm], cfg=variants[nm]: run_kernel(fn, cfg, a, w, r, out, m, n, k))
                 for _, nm in rows}
        calls["cuBLAS matmul + add"] = lambda: (cp.matmul(a, w.T, out=out), cp.add(out, r, out=out))
        names = list(calls)
        per: dict[str, list[float]] = {nm: [] for nm in names}
        for rd in range(args.rounds):
            for nm in names[rd % len(names):] + names[:rd % len(names)]:
                per[nm].append(float(np.median(timeit(calls[nm], args.iters, warm=2))))
        for nm in sorted(names, key=lambda x: np.median(per[x])):
            print(f"rounds {nm:28s} median of {args.rounds} medians {np.median(per[nm]):.4f} ms "
                  f"[{' '.join(f'{t:.3f}' for t in per[nm])}]")
    # the three fastest again, after the peers (drift check)
    for med, name in sorted(rows)[:3]:
        fn, cfg = fns[name], variants[name]
        ts = timeit(lambda fn=fn, cfg=cfg: run_kernel(fn, cfg, a, w, r, out, m, n, k), args.iters)
        print(f"again {name:24s} median {np.median(ts):.4f} ms (first {med:.4f})")
    print("ranking:", ", ".join(f"{nm} {md:.4f}" for md, nm in sorted(rows)))


if __name__ == "__main__":
    main()
