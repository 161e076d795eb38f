"""fp32 FFMA variants side by side on one GPU: compile, verify against float64, time (CUDA events).

Usage (device machine, wheels installed as bench/gpu_session.sh does):
    python3 -m bench.fp32_variants [--iters 50] [--only NAME,NAME] [--orig PATH] [--waves]
(--orig: an older kernel file, e.g. `git show f5bd3c5:kernels/gemm_residual_fp32.cu > orig.cu`.)
Offline, no GPU: `--sass [--nvrtc libnvrtc.so.13 --cuobjdump PATH]` prints each variant's interior-loop
SASS statistics; pass the NVRTC of the device's version (13.0: the nvidia-cuda-nvrtc 13.0.88 wheel), whose
register-file read count ranked the FFMA orders' times (ADR-0008).

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
import re
import time
from concurrent.futures import ThreadPoolExecutor

import cupy as cp
import numpy as np
from cupy.cuda import driver

from kernels.gemm_residual import SPEC
from kernels.nvrtc_check import compile_cubin, complete_elf

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
    src = SPEC.source("fp32", (bm, bn, bk), stages, True)
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


# ---- offline SASS statistics (--sass; no GPU): what ranked the FFMA orders (ADR-0008) ----
_INS = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")


def nvrtc_compile(src: str, arch: str, lib: str) -> tuple[bool, str, bytes]:
    """Compile with the libnvrtc.so at `lib` (e.g. the nvidia-cuda-nvrtc wheel matching the device's
    NVRTC: the device's registers and SASS differ from a newer NVRTC's) through ctypes."""
    import ctypes
    d = os.path.dirname(lib)
    for f in sorted(os.listdir(d)):
        if f.startswith("libnvrtc-builtins.so"):
            ctypes.CDLL(os.path.join(d, f), mode=ctypes.RTLD_GLOBAL)
    nv = ctypes.CDLL(lib)
    prog = ctypes.c_void_p()
    nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"kernel.cu", 0, None, None)
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-Xptxas=-v"]
    ok = nv.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) == 0
    n = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetProgramLog(prog, log)
    cubin = b""
    if ok:
        nv.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        nv.nvrtcGetCUBIN(prog, buf)
        cubin = buf.raw
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return ok, log.value.decode(), cubin


def sass_stats(cubin: bytes, cuobjdump: str) -> dict:
    """Per 16-k tile of the interior main loop's steady-state path (the last loop with >= 256 FFMA;
    conditional branches fall through, unconditional ones are followed), one warp: instructions,
    FFMA, register-file reads (FFMA sources not served by the previous FFMA's reuse slot), FFMA with
    2 / 3 uncached sources of one parity, summed stall counts, LDS-to-first-use distances."""
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(complete_elf(cubin))
        f.flush()
        lines = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True).stdout.splitlines()
    ins, ctrl = [], {}
    on = False
    for x, line in enumerate(lines):
        if "Function : " in line:
            on = "gemm_residual_fp32" in line
            continue
        m = _INS.match(line) if on else None
        if m:
            a = int(m.group(1), 16)
            hx = re.search(r"/\* (0x[0-9a-f]{16}) \*/", lines[x + 1]) if x + 1 < len(lines) else None
            ctrl[a] = (int(hx.group(1), 16) >> 41) & 15 if hx else 0
            ins.append((a, re.sub(r"\s+", " ", m.group(2).strip())))
    op = lambda t: re.sub(r"^@!?U?P\w+ ", "", t).split()[0]  # noqa: E731
    at = {a: j for j, (a, _) in enumerate(ins)}
    loop = None
    for j, (a, t) in enumerate(ins):
        mm = re.search(r"BRA (0x[0-9a-f]+)", t)
        if mm and int(mm.group(1), 16) < a and int(mm.group(1), 16) in at:
            lo = at[int(mm.group(1), 16)]
            if sum(op(u).startswith("FFMA") for _, u in ins[lo:j + 1]) >= 256:
                loop = (lo, j)
    if loop is None:
        return {}
    path, j = [], loop[0]
    while True:
        path.append(ins[j])
        if j == loop[1]:
            break
        mm = re.match(r"BRA (0x[0-9a-f]+)", ins[j][1])
        j = at[int(mm.group(1), 16)] if mm else j + 1
    srcs = lambda t: [o.strip() for o in re.sub(r"^@!?U?P\w+ ", "", t).split(" ", 1)[1].split(",")]  # noqa: E731
    rf = b2 = b3 = nf = 0
    prev: dict[int, int] = {}
    for _, t in path:
        if not op(t).startswith("FFMA"):
            prev = {}
            continue
        nf += 1
        cur, fresh = {}, []
        for slot, o in enumerate(srcs(t)[1:4]):
            m = re.match(r"-?R(\d+)", o)
            if not m:
                continue
            r = int(m.group(1))
            if prev.get(slot) != r:
                fresh.append(r)
            if ".reuse" in o:
                cur[slot] = r
        prev = cur
        rf += len(fresh)
        b2 += len(fresh) != len({r % 2 for r in fresh})
        b3 += len(fresh) == 3 and len({r % 2 for r in fresh}) == 1
    dist = []
    for i, (_, t) in enumerate(path):
        if op(t).startswith("LDS") and "RZ" not in t.split(",")[0]:
            r0 = int(re.search(r"\bR(\d+)", t).group(1))
            regs = set(range(r0, r0 + (4 if ".128" in op(t) else 1)))
            for d in range(1, len(path)):
                u = path[(i + d) % len(path)][1]
                if " " in u and {int(x) for x in re.findall(r"\bR(\d+)", ",".join(srcs(u)[1:]))} & regs:
                    dist.append(d)
                    break
    dist.sort()
    return {"instr": len(path), "ffma": nf, "rf_reads": rf, "b2": b2, "b3": b3,
            "stalls": sum(ctrl.get(a, 0) for a, _ in path),
            "lds_min": dist[0] if dist else 0, "lds_med": dist[len(dist) // 2] if dist else 0}


def sass_report(variants: dict, arch: str, lib: str, cuobjdump: str) -> None:
    for name, cfg in variants.items():
        src = source(*cfg)
        if lib:
            ok, log, cubin = nvrtc_compile(src, arch, lib)
        else:
            rep = compile_cubin(src, arch, ("-std=c++17",))
            ok, log, cubin = rep.ok, rep.log, rep.cubin
        if not ok:
            print(f"{name}: COMPILE FAILED", flush=True)
            continue
        regs = re.search(r"Used (\d+) registers", log)
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        st = sass_stats(cubin, cuobjdump)
        print(f"{name:28s} regs {regs.group(1) if regs else '?'} spill {spill.group(1)}/{spill.group(2)} | "
              + " ".join(f"{k} {v}" for k, v in st.items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--only", default="")
    ap.add_argument("--waves", action="store_true",
                    help="also time the first variant at M = 8448 (1320 tiles of 128x128: 5 full waves of 264)")
    ap.add_argument("--rounds", type=int, default=0,
                    help="then time every correct variant and cuBLAS again in R interleaved rounds (rotating order)")
    ap.add_argument("--orig", default="", help="an older gemm_residual_fp32.cu to time as 'orig' (TN 8)")
    ap.add_argument("--sass", action="store_true",
                    help="offline (no GPU): SASS statistics of each variant's interior loop, then exit")
    ap.add_argument("--nvrtc", default="", help="--sass: compile with this libnvrtc.so (match the device's)")
    ap.add_argument("--cuobjdump", default="cuobjdump")
    ap.add_argument("--arch", default="sm_90a", help="--sass: target")
    args = ap.parse_args()
    variants = dict(VARIANTS)
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only.split(",")}
    if args.sass:
        sass_report(variants, args.arch, args.nvrtc, args.cuobjdump)
        return
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
