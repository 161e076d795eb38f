"""Compile, verify and time the Hopper-native gemm_residual path against cuBLAS, on the GPU.

    PYTHONPATH=$PWD python3 bench/sm90_gemm.py [--quick] [--only 128x256:4,128x128:0]

For every BLOCK_SIZE x MEMORY_PIPELINING of ``kernels/gemm_residual_sm90.py`` (bf16, residual
fused; plus fusion off and fp16 for the default tile): NVRTC compile through CuPy, correctness on
fresh N(0,1) inputs with a NaN-poisoned output against a float64 reference, for
M in {1, 586, 1571, 7976, 8192} x N = K = 2560 and two shapes whose N and K are not tile
multiples; then the seed shape timed with CUDA events (10 warm-ups, 100 timed, median) next to
cuBLAS gemmEx with beta = 1 on a copy of R and matmul + add. Prints a table; writes it (and a
JSON of all numbers) to $OUT when that is set. Uses CuPy directly; bf16 is held as uint16 bits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from cupy_backends.cuda.libs import cublas  # noqa: E402

from engine.backends import tensormap  # noqa: E402
from kernels import gemm_residual_sm90 as sm90  # noqa: E402
from kernels.spec import DeviceLimits, TensorMapArg  # noqa: E402

SEED = (8192, 2560, 2560)
CHECK_SHAPES = [(1, 2560, 2560), (586, 2560, 2560), (1571, 2560, 2560), (7976, 2560, 2560),
                (8192, 2560, 2560), (300, 136, 200), (130, 264, 72)]
CUDA_R_16F, CUDA_R_16BF = 2, 14


def to_bits(x: cp.ndarray, dtype: str) -> cp.ndarray:
    """float32 -> 16-bit bit patterns (round to nearest even), as uint16."""
    if dtype == "fp16":
        return x.astype(cp.float16).view(cp.uint16)
    u = x.astype(cp.float32).view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)


def from_bits(b: cp.ndarray, dtype: str) -> cp.ndarray:
    if dtype == "fp16":
        return b.view(cp.float16).astype(cp.float32)
    return (b.astype(cp.uint32) << 16).view(cp.float32)


def limits_of_device() -> DeviceLimits:
    dev = cp.cuda.Device()
    rt = cp.cuda.runtime
    return DeviceLimits(
        compute_capability=tuple(int(c) for c in dev.compute_capability),  # type: ignore[arg-type]
        sm_count=rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, dev.id),
        shared_memory_per_block_bytes=rt.deviceGetAttribute(
            rt.cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.id),
        shared_memory_per_sm_bytes=rt.deviceGetAttribute(
            rt.cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev.id),
        profile="device",
    )


_modules: dict[str, cp.RawModule] = {}


class Runner:
    """One compiled configuration bound to one set of buffers."""

    def __init__(self, build, bufs: dict[str, cp.ndarray], dtype: str, tmap_global: bool):
        key = build.source_sha256
        if key not in _modules:
            _modules[key] = cp.RawModule(code=build.source, options=build.options)
        mod = _modules[key]
        self.keep = []
        self.calls = []
        for launch in build.launches:
            fn = mod.get_function(launch.function)
            if launch.shared_mem_bytes > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = launch.shared_mem_bytes
            args = []
            for a in launch.args:
                if isinstance(a, TensorMapArg):
                    desc = tensormap.encode(a, bufs[a.buffer].data.ptr, dtype)
                    if tmap_global:
                        dev = tensormap.to_device(desc)
                        self.keep.append(dev)
                        args.append(dev.data.ptr)
                    else:
                        args.append(tensormap.as_kernel_arg(desc))
                elif isinstance(a, str):
                    args.append(bufs[a])
                else:
                    args.append(np.int32(a))
            self.calls.append((fn, launch.grid, launch.block, tuple(args), launch.shared_mem_bytes))

    def __call__(self) -> None:
        for fn, grid, block, args, smem in self.calls:
            fn(grid, block, args, shared_mem=smem)


def make_inputs(m: int, n: int, k: int, dtype: str, seed: int) -> dict[str, cp.ndarray]:
    rs = cp.random.RandomState(seed)
    return {
        "a": to_bits(rs.standard_normal((m, k), dtype=cp.float32), dtype),
        "w": to_bits(rs.standard_normal((n, k), dtype=cp.float32), dtype),
        "r": to_bits(rs.standard_normal((m, n), dtype=cp.float32), dtype),
        "out": cp.full((m, n), 0xFFFF, dtype=cp.uint16),  # NaN in bf16 and fp16
    }


def reference(bufs: dict[str, cp.ndarray], dtype: str) -> cp.ndarray:
    a = from_bits(bufs["a"], dtype).astype(cp.float64)
    w = from_bits(bufs["w"], dtype).astype(cp.float64)
    r = from_bits(bufs["r"], dtype).astype(cp.float64)
    return a @ w.T + r


def compare(out_bits: cp.ndarray, ref: cp.ndarray, dtype: str) -> dict:
    out = from_bits(out_bits, dtype).astype(cp.float64)
    nan = int(cp.count_nonzero(~cp.isfinite(out)))
    diff = cp.abs(out - ref)
    rms = float(cp.sqrt(cp.mean(ref * ref)))
    rel_fro = float(cp.linalg.norm(out - ref) / max(float(cp.linalg.norm(ref)), 1e-30))
    max_rel = float(cp.max(diff)) / max(rms, 1e-30)
    ok = nan == 0 and rel_fro < 1e-2 and max_rel < 0.05
    return {"nonfinite": nan, "rel_fro": rel_fro, "max_abs_over_rms": max_rel, "ok": ok}


def time_fn(fn, warmup: int = 10, iters: int = 100) -> dict:
    for _ in range(warmup):
        fn()
    evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(iters)]
    for s, e in evs:
        s.record()
        fn()
        e.record()
    evs[-1][1].synchronize()
    ts = sorted(cp.cuda.get_elapsed_time(s, e) for s, e in evs)
    return {"median_ms": ts[len(ts) // 2], "p10_ms": ts[len(ts) // 10],
            "p90_ms": ts[(9 * len(ts)) // 10]}


def cublas_gemm(bufs, c: cp.ndarray, dtype: str, beta: float):
    """Row-major C[M,N] (+)= A @ W^T through column-major gemmEx: C^T = W * A^T."""
    m, k = bufs["a"].shape
    n = bufs["w"].shape[0]
    handle = cp.cuda.device.get_cublas_handle()
    alpha_h = np.array([1.0], dtype=np.float32)
    beta_h = np.array([beta], dtype=np.float32)
    t = CUDA_R_16BF if dtype == "bf16" else CUDA_R_16F

    def run():
        cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                      alpha_h.ctypes.data, bufs["w"].data.ptr, t, k, bufs["a"].data.ptr, t, k,
                      beta_h.ctypes.data, c.data.ptr, t, n, cublas.CUBLAS_COMPUTE_32F,
                      cublas.CUBLAS_GEMM_DEFAULT)
    return run


def matmul_add(bufs, dtype: str):
    """The unfused framework baseline: cupy.matmul then + R (real bf16 dtype where CuPy has one)."""
    np_dt = None
    if dtype == "fp16":
        np_dt = np.float16
    else:
        try:
            import ml_dtypes

            np_dt = np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            np_dt = getattr(cp, "bfloat16", None)
    if np_dt is None:
        return None, "no bf16 dtype in this CuPy"
    a = bufs["a"].view(np_dt)
    w = bufs["w"].view(np_dt)
    r = bufs["r"].view(np_dt)
    try:
        cp.matmul(a[:8], w.T)
    except Exception as exc:  # noqa: BLE001
        return None, f"cupy.matmul {dtype}: {type(exc).__name__}: {exc}"
    out = cp.empty((a.shape[0], w.shape[0]), dtype=np_dt)

    def run():
        cp.add(cp.matmul(a, w.T), r, out=out)
    return run, ""


def variants(limits: DeviceLimits, only: list[tuple[str, int]] | None) -> list[dict]:
    out = []
    for bs in sm90.block_size_options(limits, "bf16"):
        for st in sm90.pipelining_options(limits, "bf16", bs):
            if st > 6:
                continue
            out.append({"block": bs, "stages": st, "dtype": "bf16", "fuse": True})
    deepest = {bs: max(sm90.pipelining_options(limits, "bf16", bs)) for bs in ("128x256", "128x128")}
    out.append({"block": "128x256", "stages": deepest["128x256"], "dtype": "bf16", "fuse": False})
    out.append({"block": "128x128", "stages": min(4, deepest["128x128"]), "dtype": "bf16", "fuse": False})
    out.append({"block": "128x256", "stages": deepest["128x256"], "dtype": "fp16", "fuse": True})
    if only:
        out = [v for v in out if (v["block"], v["stages"]) in only]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="check only M=586 and the seed shape")
    ap.add_argument("--only", default="", help="comma list of BLOCK:STAGES to run")
    ap.add_argument("--iters", type=int, default=100)
    args = ap.parse_args()
    only = [(p.split(":")[0], int(p.split(":")[1])) for p in args.only.split(",") if p] or None

    limits = limits_of_device()
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {limits}")
    results: list[dict] = []
    shapes = CHECK_SHAPES if not args.quick else [CHECK_SHAPES[1], CHECK_SHAPES[4]]

    # Inputs and float64 references per (shape, dtype), shared by all variants.
    data: dict[tuple, tuple] = {}
    for dt in ("bf16", "fp16"):
        for i, (m, n, k) in enumerate(shapes):
            bufs = make_inputs(m, n, k, dt, seed=1000 + i + (50 if dt == "fp16" else 0))
            data[(m, n, k, dt)] = (bufs, reference(bufs, dt))

    # Tensor-map passing mode: by value, else the global-memory fallback.
    tmap_global = None
    probe = {"block": "128x256", "stages": 2, "dtype": "bf16", "fuse": True}
    probe_ok = {}
    for mode in (False, True):
        try:
            bufs, ref = data[(586, 2560, 2560, "bf16")]
            task = SimpleNamespace(shape={"m": 586, "n": 2560, "k": 2560}, dtype="bf16")
            b = sm90.build(task, limits, probe["block"], probe["stages"], fuse=True,
                           tmap_global=mode)
            bufs["out"].fill(0xFFFF)
            Runner(b, bufs, "bf16", mode)()
            cp.cuda.runtime.deviceSynchronize()
            c = compare(bufs["out"], ref, "bf16")
            print(f"tensor maps {'by pointer' if mode else 'by value'}: {c}")
            probe_ok[mode] = c["ok"]
            if c["ok"] and tmap_global is None:
                tmap_global = mode
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            probe_ok[mode] = False
    tmap_global = bool(tmap_global)
    tmap_note = "by pointer (global)" if tmap_global else "by value (__grid_constant__)"

    m, n, k = SEED
    for v in variants(limits, only):
        row = dict(v)
        label = f"{v['block']} s{v['stages'] or 'off'} {v['dtype']}{'' if v['fuse'] else ' unfused'}"
        row["label"] = label
        try:
            t0 = time.perf_counter()
            checks = []
            for (cm, cn, ck) in shapes:
                bufs, ref = data[(cm, cn, ck, v["dtype"])]
                task = SimpleNamespace(shape={"m": cm, "n": cn, "k": ck}, dtype=v["dtype"])
                b = sm90.build(task, limits, v["block"], v["stages"], fuse=v["fuse"],
                               tmap_global=tmap_global)
                bufs["out"].fill(0xFFFF)
                run = Runner(b, bufs, v["dtype"], tmap_global)
                run()
                cp.cuda.runtime.deviceSynchronize()
                c = compare(bufs["out"], ref, v["dtype"])
                c["shape"] = (cm, cn, ck)
                checks.append(c)
            row["compile_check_s"] = round(time.perf_counter() - t0, 2)
            row["checks"] = checks
            row["correct"] = all(c["ok"] for c in checks)
            row["worst_rel_fro"] = max(c["rel_fro"] for c in checks)
            bufs, _ = data[(m, n, k, v["dtype"])]
            task = SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=v["dtype"])
            b = sm90.build(task, limits, v["block"], v["stages"], fuse=v["fuse"],
                           tmap_global=tmap_global)
            row["info"] = b.info
            run = Runner(b, bufs, v["dtype"], tmap_global)
            row.update(time_fn(run, iters=args.iters))
            row["tflops"] = 2 * m * n * k / (row["median_ms"] * 1e-3) / 1e12
            if not row["correct"]:
                bad = [c for c in checks if not c["ok"]]
                print(f"WRONG {label}: {bad[:2]}")
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        results.append(row)
        print(json.dumps({k2: row.get(k2) for k2 in
                          ("label", "correct", "worst_rel_fro", "median_ms", "tflops", "error")}),
              flush=True)

    timed = [r for r in results if "median_ms" in r and r["fuse"] and r["dtype"] == "bf16"]
    if timed:
        best = min(timed, key=lambda r: r["median_ms"])
        bufs, _ = data[(m, n, k, "bf16")]
        task = SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype="bf16")
        b = sm90.build(task, limits, best["block"], best["stages"], fuse=True,
                       tmap_global=tmap_global)
        again = {"label": best["label"] + " (again)", "fuse": True, "dtype": "bf16",
                 "correct": best["correct"], "worst_rel_fro": best["worst_rel_fro"],
                 **time_fn(Runner(b, bufs, "bf16", tmap_global), iters=args.iters)}
        again["tflops"] = 2 * m * n * k / (again["median_ms"] * 1e-3) / 1e12
        results.append(again)

    peers = []
    for dt in ("bf16", "fp16"):
        bufs, _ = data[(m, n, k, dt)]
        c = bufs["r"].copy()
        peers.append({"label": f"cuBLAS gemmEx beta=1 (R in place) {dt}",
                      **time_fn(cublas_gemm(bufs, c, dt, 1.0), iters=args.iters)})
        c2 = cp.empty_like(bufs["r"])
        peers.append({"label": f"cuBLAS gemmEx beta=0 (GEMM only) {dt}",
                      **time_fn(cublas_gemm(bufs, c2, dt, 0.0), iters=args.iters)})
        fn, why = matmul_add(bufs, dt)
        if fn is not None:
            peers.append({"label": f"cupy.matmul + add {dt}", **time_fn(fn, iters=args.iters)})
        else:
            print(f"matmul+add {dt} skipped: {why}")
    for p in peers:
        p["tflops"] = 2 * m * n * k / (p["median_ms"] * 1e-3) / 1e12

    lines = [f"tensor-map modes correct: by value {probe_ok.get(False)}, by pointer {probe_ok.get(True)}",
             f"seed shape M={m} N={n} K={k}; tensor maps passed {tmap_note}; "
             f"median of {args.iters} after 10 warm-ups",
             f"{'variant':34s} {'correct':>7s} {'rel_fro':>9s} {'ms':>8s} {'p10':>8s} "
             f"{'p90':>8s} {'TFLOP/s':>8s}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['label']:34s} ERROR {r['error'][:80]}")
            continue
        lines.append(f"{r['label']:34s} {str(r['correct']):>7s} {r['worst_rel_fro']:9.2e} "
                     f"{r['median_ms']:8.4f} {r['p10_ms']:8.4f} {r['p90_ms']:8.4f} "
                     f"{r['tflops']:8.1f}")
    for p in peers:
        lines.append(f"{p['label']:34s} {'':>7s} {'':>9s} {p['median_ms']:8.4f} "
                     f"{p['p10_ms']:8.4f} {p['p90_ms']:8.4f} {p['tflops']:8.1f}")
    table = "\n".join(lines)
    print(table)
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "sm90_table.txt").write_text(table + "\n")
        Path(out_dir, "sm90_results.json").write_text(
            json.dumps({"results": results, "peers": peers, "tensor_maps": tmap_note,
                        "tensor_map_modes_ok": {"by_value": probe_ok.get(False),
                                                "by_pointer": probe_ok.get(True)}},
                       indent=1, default=str))
    return 0 if all(r.get("correct") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
