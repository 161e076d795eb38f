"""Standalone GPU check of gemm_residual: correctness over shapes and every knob, then timings.

Run on a machine with a GPU: ``PYTHONPATH=$PWD python3 tests/gpu/check_gemm_residual.py [--quick]``.
Compiles each Build through NVRTC (kernels.nvrtc_check), loads the cubin with CuPy, launches the
Build's launches in order, compares with a float64 reference on fresh inputs (output poisoned with
NaN first), and times the seed shape with CUDA events (10 warm-ups, 50 timed, median). Writes a JSON
log to $OUT (or /tmp) and prints a compact table last.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import cupy as cp
import numpy as np
import tomllib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from kernels.gemm_residual import SPEC  # noqa: E402
from kernels.nvrtc_check import compile_cubin  # noqa: E402
from kernels.spec import DeviceLimits  # noqa: E402

OUT = Path(os.environ.get("OUT") or tempfile.mkdtemp())
DTYPES = ("bf16", "fp16", "fp32")
_modules: dict[str, cp.RawModule] = {}
_cubins: dict[str, bytes] = {}
_CUBIN_DIR = Path(tempfile.mkdtemp(prefix="gemm_residual_cubins_"))


def limits() -> DeviceLimits:
    prof = tomllib.loads((ROOT / "profiles" / "h200.toml").read_text())
    dev = cp.cuda.Device()
    cc = tuple(int(c) for c in dev.compute_capability)
    return DeviceLimits((cc[0], cc[1]), dev.attributes["MultiProcessorCount"],
                        prof["shared_memory_per_block_bytes"], prof["shared_memory_per_sm_bytes"])


def task(dtype, m, n, k, bs=None, st=None, fusion=True):
    return SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=bs,
                           memory_pipelining=st, fusion=fusion)


def compile_build(build, arch):
    key = build.source_sha256
    if key not in _modules:
        if key not in _cubins:
            rep = compile_cubin(build.source, arch, build.options)
            if not rep.ok:
                raise RuntimeError(f"compile failed: {rep.log[-2000:]}")
            _cubins[key] = rep.cubin
        path = _CUBIN_DIR / f"k_{key[:16]}.cubin"  # RawModule loads lazily: the file must stay
        path.write_bytes(_cubins.pop(key))
        mod = cp.RawModule(path=str(path))
        for fn in build.functions:
            mod.get_function(fn)
        _modules[key] = mod
    return _modules[key]


def safe_module(build, arch):
    try:
        return compile_build(build, arch)
    except Exception as exc:
        print("LOAD ERROR", build.info, repr(exc)[:300], flush=True)
        return None


def to_dev(x64, dtype):
    """float64 numpy/cupy values -> device array in dtype; bf16 kept as uint16 bits (RNE)."""
    x32 = cp.asarray(x64, dtype=cp.float32)
    if dtype == "fp32":
        return x32
    if dtype == "fp16":
        return x32.astype(cp.float16)
    b = x32.view(cp.uint32)
    u = cp.uint32
    return ((b + u(0x7FFF) + ((b >> u(16)) & u(1))) >> u(16)).astype(cp.uint16)


def to_f64(x, dtype):
    if dtype == "bf16":
        return (x.astype(cp.uint32) << cp.uint32(16)).view(cp.float32).astype(cp.float64)
    return x.astype(cp.float64)


def make_inputs(dtype, m, n, k, seed):
    rng = cp.random.RandomState(seed)
    ins = {"a": to_dev(rng.standard_normal((m, k), dtype=cp.float32), dtype),
           "w": to_dev(rng.standard_normal((n, k), dtype=cp.float32), dtype),
           "r": to_dev(rng.standard_normal((m, n), dtype=cp.float32), dtype)}
    ins["out"] = cp.empty((m, n), dtype=ins["r"].dtype)
    return ins


def poison(out, dtype):
    if dtype == "bf16":
        out.fill(0x7FC0)
    else:
        out.fill(np.nan)


def launch_all(mod, build, bufs):
    for ln in build.launches:
        fn = mod.get_function(ln.function)
        if ln.shared_mem_bytes > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = ln.shared_mem_bytes
        args = tuple(bufs[a] if isinstance(a, str) else np.int32(a) for a in ln.args)
        fn(ln.grid, ln.block, args, shared_mem=ln.shared_mem_bytes)


def check(build, mod, dtype, ins, ref):
    try:
        return _check(build, mod, dtype, ins, ref)
    except Exception as exc:  # record and go on: one bad variant must not hide the others
        print("ERROR", build.info, repr(exc)[:300], flush=True)
        return False, float("nan"), -1


def _check(build, mod, dtype, ins, ref):
    if mod is None:
        raise RuntimeError("no module")
    poison(ins["out"], dtype)
    launch_all(mod, build, ins)
    cp.cuda.runtime.deviceSynchronize()
    got = to_f64(ins["out"], dtype)
    rms = float(cp.sqrt(cp.mean(ref * ref)))
    err = cp.abs(got - ref)
    nan = int(cp.count_nonzero(cp.isnan(got)))
    ok = nan == 0 and bool(cp.all(err <= SPEC.rtol(dtype) * (cp.abs(ref) + rms)))
    return ok, float(cp.max(err)) / rms, nan


def reference(dtype, ins):
    return SPEC.reference(cp, {k: to_f64(v, dtype) for k, v in ins.items() if k != "out"})


def time_fn(fn, warm=10, iters=50):
    for _ in range(warm):
        fn()
    evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(iters)]
    for e0, e1 in evs:
        e0.record()
        fn()
        e1.record()
    evs[-1][1].synchronize()
    return float(np.median([cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]))


def cublas_gemm(dtype, ins, beta):
    """out = A @ W^T (+ out if beta=1) through cublasGemmEx, fp32 compute (no TF32)."""
    from cupy_backends.cuda.libs import cublas
    m, k = ins["a"].shape
    n = ins["w"].shape[0]
    ty = {"bf16": 14, "fp16": 2, "fp32": 0}[dtype]
    al, be = np.array(1.0, np.float32), np.array(beta, np.float32)
    h = cp.cuda.device.get_cublas_handle()
    cublas.gemmEx(h, 1, 0, n, m, k, al.ctypes.data, ins["w"].data.ptr, ty, k, ins["a"].data.ptr, ty, k,
                  be.ctypes.data, ins["out"].data.ptr, ty, n, 68, -1)


def time_dtype(dt, lim, arch, quick, shape):
    """Median times at ``shape`` for the defaults, every tile/stage (fused), and the cuBLAS peers."""
    m, n, k = shape
    flops = 2 * m * n * k
    rows = []
    ins = make_inputs(dt, m, n, k, seed=7)
    variants = [(None, None, True), (None, None, False)]
    for bs in SPEC.block_size_options(lim, dt):
        opts = SPEC.pipelining_options(lim, dt, bs)
        variants += [(bs, st, True) for st in opts if not quick or st == opts[0]]
    seen = set()
    for bs, st, fu in variants:
        b = SPEC.build(task(dt, m, n, k, bs, st, fu), lim)
        key = (b.info["tile"], b.info["stages"], fu)
        if key in seen:
            continue
        seen.add(key)
        what = f"ours {key[0]} st={key[1]} fuse={int(fu)}" + (" (default)" if bs is None else "")
        try:
            mod = compile_build(b, arch)
            ms = time_fn(lambda b=b, mod=mod: launch_all(mod, b, ins))
            rows.append({"dtype": dt, "what": what, "ms": ms, "tflops": flops / ms / 1e9})
        except Exception as exc:
            rows.append({"dtype": dt, "what": what, "error": repr(exc)[:200]})

    def beta1():
        ins["out"][...] = ins["r"]
        cublas_gemm(dt, ins, 1.0)

    def matmul_add():
        cp.matmul(ins["a"], ins["w"].T, out=ins["out"])
        cp.add(ins["out"], ins["r"], out=ins["out"])

    peers = {"cublas gemmEx beta=0": lambda: cublas_gemm(dt, ins, 0.0), "cublas copy R + beta=1": beta1}
    if dt != "bf16":
        peers["cupy matmul + add"] = matmul_add
    for name, fn in peers.items():
        try:
            ms = time_fn(fn)
            rows.append({"dtype": dt, "what": name, "ms": ms, "tflops": flops / ms / 1e9})
        except Exception as exc:  # a missing peer must not end the check
            rows.append({"dtype": dt, "what": name, "error": repr(exc)[:200]})
    return rows


def main() -> int:
    quick = "--quick" in sys.argv
    lim = limits()
    arch = lim.arch
    log: dict = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "arch": arch,
                 "shapes": [], "sweep": [], "timing": []}
    print(f"device {log['device']} arch {arch}", flush=True)
    t0 = time.time()
    # 1. every knob combination (compiled in parallel first), one odd shape with N and K tails
    combos = []
    for dt in DTYPES:
        for bs in SPEC.block_size_options(lim, dt):
            for st in SPEC.pipelining_options(lim, dt, bs):
                for fu in (True, False):
                    combos.append((dt, bs, st, fu, SPEC.build(task(dt, 1571, 1000, 1000, bs, st, fu), lim)))
    with ThreadPoolExecutor(12) as ex:
        reps = list(ex.map(lambda c: compile_cubin(c[4].source, arch, c[4].options), combos))
    for c, rep in zip(combos, reps, strict=True):
        _cubins[c[4].source_sha256] = rep.cubin
        if not rep.ok:
            print("COMPILE FAIL", c[:4], rep.log[-1500:])
    print(f"compiled {len(combos)} variants in {time.time() - t0:.1f}s", flush=True)
    fails = 0
    for j, dt in enumerate(DTYPES):
        ins = make_inputs(dt, 1571, 1000, 1000, seed=j)
        ref = reference(dt, ins)
        for c in combos:
            if c[0] != dt:
                continue
            ok, rel, nan = check(c[4], safe_module(c[4], arch), dt, ins, ref)
            fails += not ok
            log["sweep"].append({"dtype": dt, "bs": c[1], "stages": c[2], "fusion": c[3], "ok": ok,
                                 "max_err_over_rms": rel, "nan": nan})
    nsweep = len(log["sweep"])
    print(f"sweep: {nsweep - fails}/{nsweep} combos correct at 1571x1000x1000", flush=True)
    # 2. shapes (default knobs), fresh inputs each
    shapes = [(m, 2560, 2560) for m in (1, 586, 1571, 7976, 8192)]
    shapes += [(1000, 1024, 4096), (333, 4096, 1024), (777, 1000, 1000), (65, 200, 72)]
    for i, (m, n, k) in enumerate(shapes):
        for dt in DTYPES:
            for fu in (True, False):
                b = SPEC.build(task(dt, m, n, k, fusion=fu), lim)
                ins = make_inputs(dt, m, n, k, seed=1000 + i)
                ok, rel, nan = check(b, safe_module(b, arch), dt, ins, reference(dt, ins))
                fails += not ok
                log["shapes"].append({"shape": [m, n, k], "dtype": dt, "fusion": fu, "tile": b.info["tile"],
                                      "stages": b.info["stages"], "ok": ok, "max_err_over_rms": rel,
                                      "nan": nan})
    print(f"shapes: {sum(s['ok'] for s in log['shapes'])}/{len(log['shapes'])} correct", flush=True)
    # 3. timing at the seed shape
    m, n, k = 8192, 2560, 2560
    for dt in DTYPES:
        log["timing"] += time_dtype(dt, lim, arch, quick, (m, n, k))
        cp.get_default_memory_pool().free_all_blocks()
    (OUT / "gemm_residual_check.json").write_text(json.dumps(log, indent=1))
    print("\n== failures ==")
    for row in log["sweep"] + log["shapes"]:
        if not row["ok"]:
            print(row)
    print("\n== shapes (default knobs), max|err|/rms(ref) fused/unfused, tile/stages ==")
    by_shape: dict = {}
    for row in log["shapes"]:
        by_shape.setdefault(tuple(row["shape"]), []).append(row)
    for shp, rows in by_shape.items():
        cells = []
        for dt in DTYPES:
            rr = [r for r in rows if r["dtype"] == dt]
            ok = "OK" if all(r["ok"] for r in rr) else "BAD"
            errs = "/".join(f"{r['max_err_over_rms']:.1e}" for r in rr)
            cells.append(f"{dt} {ok} {errs} {rr[0]['tile']}/{rr[0]['stages']}")
        print(f"{'x'.join(map(str, shp)):>15} | " + " | ".join(cells))
    print(f"\n== seed shape {m}x{n}x{k}: median of 50 (CUDA events) ==")
    for row in log["timing"]:
        if "ms" in row:
            print(f"{row['dtype']:>5} {row['what']:<42} {row['ms']:8.4f} ms {row['tflops']:7.1f} TFLOP/s")
        else:
            print(f"{row['dtype']:>5} {row['what']:<42} {row['error']}")
    print(f"\nsweep {nsweep - sum(not r['ok'] for r in log['sweep'])}/{nsweep}, shapes "
          f"{sum(r['ok'] for r in log['shapes'])}/{len(log['shapes'])}, total {time.time() - t0:.0f}s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
