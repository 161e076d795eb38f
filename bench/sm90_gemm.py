"""Compile, verify and time the Hopper-native gemm_residual path (schedules and knobs), on the GPU.

    PYTHONPATH=$PWD python3 bench/sm90_gemm.py [--iters 100] [--no-torch] [--quick]

1. Correctness: each variant (tile x stages x dtype x fusion x stream-K compiled in or not) on
   fresh N(0,1) inputs, NaN-poisoned output, float64 reference, for M in {1, 586, 1571, 2048,
   7976, 8192} x N = K = 2560 and two shapes whose N and K are no tile multiples; stream-K
   variants under the planned schedule and under forced ones (all tiles split over the grid,
   the tail split). The timed configurations are verified again after their timing loop (the
   stream-K workspace must be left clean by every launch).
2. Timing (CUDA events, 10 warm-ups, median of --iters): the M sweep (bf16, N = K = 2560) for
   every candidate schedule of 128x256 s3, the data-parallel kernel, 128x128 s4 and the default
   knobs; the seed shape in bf16 and fp16; torch matmul + add (the SOL-ExecBench baseline T_b)
   and cuBLAS gemmEx beta=1 in the same run. Prints tables with the score
   S = 1/(1 + (T_k - T_SOL)/(T_b - T_SOL)), T_SOL = 2MNK/989.4e12; JSON to $OUT when set.
--quick (under a minute): the ping-pong consumer schedule against the cooperative one: correctness
of ping-pong variants (stages 0/2/4/5, bf16/fp16, fused/unfused, stream-K compiled in or not, forced
stream-K schedules) for M in {1, 586, 2048, 8192} x 2560 x 2560 and the two odd shapes; then the
seed shape in bf16 and fp16, old (cooperative 128x256 s3) vs new, interleaved twice; cuBLAS GEMM
alone as the card's reference; a short bf16 M sweep of the default knobs vs ping-pong.
--cluster: 2x1 clusters with W multicast against the current default: correctness of cluster
variants (tiles, stages incl. off, bf16/fp16, fused/unfused, ping-pong; odd M tile counts, forced
small grids), then the seed shape in bf16 and fp16 interleaved three times, then a bf16 M sweep.
--cold-duel: the seed candidates timed as the issue times them (10 + 100 launches after a rest).
--pp160: ping-pong on the 128x160 tile: correctness (stream-K forced schedules, clusters), the seed
candidates in alternation, an M sweep in alternation (--m-list, --skip-seed).
--small-m: every build that could serve M = 256, 512, 1024 (--m-list) against cuBLAS and torch, timed
as the engine times them: rotated input sets, queued launches, rested, shuffled rounds.
--tail-bits: every build with its partial last tiles moved back to end at M, N (tail_shift) against
the same build with them clipped: correct, and bit for bit the same output where the engine shifts.
Variants are (tile, stages, dtype, fuse, streamk[, pingpong[, cluster]]); None = the module's choice.
Uses CuPy directly; bf16 is held as uint16 bits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from cupy_backends.cuda.libs import cublas  # noqa: E402

from engine.backends import clusters, tensormap  # noqa: E402
from kernels import gemm_residual_sm90 as sm90  # noqa: E402
from kernels.spec import DeviceLimits, TensorMapArg  # noqa: E402

SEED = (8192, 2560, 2560)
CHECK_SHAPES = [(1, 2560, 2560), (586, 2560, 2560), (1571, 2560, 2560), (7976, 2560, 2560),
                (8192, 2560, 2560), (300, 136, 200), (130, 264, 72)]
CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F = 2, 14, 0
F32 = ("tf32", "fp32")
"""fp32 data in memory (tf32: one tensor-core product; fp32: 3xTF32)."""


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

    def __init__(self, build, bufs: dict[str, cp.ndarray], dtype: str):
        key = build.source_sha256
        if key not in _modules:
            _modules[key] = cp.RawModule(code=build.source, options=build.options)
        mod = _modules[key]
        for b in build.scratch:  # e.g. the 3xTF32 split: shared by every build on these buffers
            if b.name not in bufs or bufs[b.name].shape != b.shape:
                bufs[b.name] = cp.empty(b.shape, dtype=cp.float32)
        self.calls = []
        for launch in build.launches:
            fn = mod.get_function(launch.function)
            if launch.shared_mem_bytes > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = launch.shared_mem_bytes
            grid = clusters.fit_grid(fn.kernel.ptr, launch.grid, launch.block, launch.shared_mem_bytes, launch.cluster)
            self.grid = grid[0]  # the last launch's (the GEMM's) grid as launched
            args = []
            for a in launch.args:
                if isinstance(a, TensorMapArg):
                    desc = tensormap.encode(a, bufs[a.buffer].data.ptr, dtype)
                    args.append(tensormap.as_kernel_arg(desc))
                elif isinstance(a, str):
                    args.append(bufs[a])
                else:
                    args.append(np.int32(a))
            self.calls.append((fn, grid, launch.block, tuple(args), launch.shared_mem_bytes))

    def __call__(self) -> None:
        for fn, grid, block, args, smem in self.calls:
            fn(grid, block, args, shared_mem=smem)


def make_inputs(m: int, n: int, k: int, dtype: str, seed: int) -> dict[str, cp.ndarray]:
    rs = cp.random.RandomState(seed)
    if dtype in F32:  # fp32 data, NaN-poisoned fp32 output
        return {"a": rs.standard_normal((m, k), dtype=cp.float32),
                "w": rs.standard_normal((n, k), dtype=cp.float32),
                "r": rs.standard_normal((m, n), dtype=cp.float32),
                "out": cp.full((m, n), cp.nan, dtype=cp.float32)}
    return {
        "a": to_bits(rs.standard_normal((m, k), dtype=cp.float32), dtype),
        "w": to_bits(rs.standard_normal((n, k), dtype=cp.float32), dtype),
        "r": to_bits(rs.standard_normal((m, n), dtype=cp.float32), dtype),
        "out": cp.full((m, n), 0xFFFF, dtype=cp.uint16),  # NaN in bf16 and fp16
    }


def reference(bufs: dict[str, cp.ndarray], dtype: str) -> cp.ndarray:
    if dtype in F32:
        return (bufs["a"].astype(cp.float64) @ bufs["w"].astype(cp.float64).T
                + bufs["r"].astype(cp.float64))
    a = from_bits(bufs["a"], dtype).astype(cp.float64)
    w = from_bits(bufs["w"], dtype).astype(cp.float64)
    r = from_bits(bufs["r"], dtype).astype(cp.float64)
    return a @ w.T + r


def compare(out_bits: cp.ndarray, ref: cp.ndarray, dtype: str) -> dict:
    out = (out_bits if dtype in F32 else from_bits(out_bits, dtype)).astype(cp.float64)
    nan = int(cp.count_nonzero(~cp.isfinite(out)))
    diff = cp.abs(out - ref)
    rms = float(cp.sqrt(cp.mean(ref * ref)))
    rel_fro = float(cp.linalg.norm(out - ref) / max(float(cp.linalg.norm(ref)), 1e-30))
    max_rel = float(cp.max(diff)) / max(rms, 1e-30)
    ok = nan == 0 and rel_fro < 1e-2 and max_rel < 0.05
    if dtype == "fp32":  # fp32-class: the engine's fp32 rtol is 1e-4
        ok = nan == 0 and rel_fro < 1e-5 and max_rel < 1e-4
    return {"nonfinite": nan, "rel_fro": rel_fro, "max_abs_over_rms": max_rel, "ok": ok}


def launch_times(fn, warmup: int = 10, iters: int = 100) -> list[float]:
    """``warmup`` launches, then ``iters`` queued back to back, each between its own CUDA events:
    the per-launch times in ms, in launch order."""
    for _ in range(warmup):
        fn()
    evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(iters)]
    for s, e in evs:
        s.record()
        fn()
        e.record()
    evs[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(s, e) for s, e in evs]


def time_fn(fn, warmup: int = 10, iters: int = 100) -> dict:
    ts = sorted(launch_times(fn, warmup, iters))
    return {"median_ms": ts[len(ts) // 2], "p10_ms": ts[len(ts) // 10],
            "p90_ms": ts[(9 * len(ts)) // 10]}


def cublas_gemm(bufs, c: cp.ndarray, dtype: str, beta: float):
    """Row-major C[M,N] (+)= A @ W^T through column-major gemmEx: C^T = W * A^T."""
    m, k = bufs["a"].shape
    n = bufs["w"].shape[0]
    handle = cp.cuda.device.get_cublas_handle()
    alpha_h = np.array([1.0], dtype=np.float32)
    beta_h = np.array([beta], dtype=np.float32)
    t = {"bf16": CUDA_R_16BF, "fp16": CUDA_R_16F, "tf32": CUDA_R_32F, "fp32": CUDA_R_32F}[dtype]
    compute = cublas.CUBLAS_COMPUTE_32F_FAST_TF32 if dtype == "tf32" else cublas.CUBLAS_COMPUTE_32F

    def run():
        cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                      alpha_h.ctypes.data, bufs["w"].data.ptr, t, k, bufs["a"].data.ptr, t, k,
                      beta_h.ctypes.data, c.data.ptr, t, n, compute,
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


def torch_matmul_add_fn(m: int, n: int, k: int, dtype: str):
    """A callable running torch.matmul(a, w.t()) + r on its own N(0,1) inputs; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=dt, generator=g)
    w = torch.randn(n, k, device="cuda", dtype=dt, generator=g)
    r = torch.randn(m, n, device="cuda", dtype=dt, generator=g)
    return lambda: torch.matmul(a, w.t()) + r


def torch_matmul_add(m: int, n: int, k: int, dtype: str, iters: int) -> float | None:
    fn = torch_matmul_add_fn(m, n, k, dtype)
    return None if fn is None else time_fn(fn, iters=iters)["median_ms"]


def score(t_k: float, t_b: float | None, m: int, n: int, k: int) -> float | None:
    if not t_b:
        return None
    t_sol = 2 * m * n * k / 989.4e12 * 1e3
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))


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
SWEEP = (256, 512, 1024, 1571, 2048, 4096, 7976, 8192)
PP_VARIANTS = [  # ping-pong consumers, forced on
    ("128x128", 5, "bf16", True, True, True),
    ("128x128", 4, "fp16", True, True, True),
    ("128x128", 2, "bf16", False, True, True),
    ("128x128", 0, "bf16", True, True, True),
    ("128x128", 5, "fp16", True, False, True),
]
QUICK_SHAPES = [(1, 2560, 2560), (586, 2560, 2560), (2048, 2560, 2560), (8192, 2560, 2560),
                (300, 136, 200), (130, 264, 72)]
QUICK_SWEEP = (1024, 2048, 4096, 7976)


CL_VARIANTS = [  # (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    ("128x256", 3, "bf16", True, False, False, 2),
    ("128x256", 3, "fp16", True, False, False, 2),
    ("128x256", 0, "bf16", True, False, False, 2),
    ("128x256", 2, "bf16", False, False, False, 2),
    ("256x128", 3, "bf16", True, False, False, 2),
    ("128x128", 5, "bf16", True, False, True, 2),
    ("128x128", 4, "fp16", False, False, True, 2),
]
CL_SHAPES = [(1, 2560, 2560), (586, 2560, 2560), (1571, 2560, 2560), (2048, 2560, 2560),
             (8192, 2560, 2560), (300, 136, 200), (130, 264, 72), (384, 520, 136)]
CL_SWEEP = (256, 512, 1024, 1571, 2048, 4096, 7976, 8192)


DUEL = {  # name: variant (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    "pp 128x128 s5 no cluster": ("128x128", 5, "{dt}", True, True, True, 1),
    "coop 128x256 s3": ("128x256", 3, "{dt}", True, True, False, 1),
    "coop 128x256 s3 cl2": ("128x256", 3, "{dt}", True, False, False, 2),
    "coop 128x160 s5": ("128x160", 5, "{dt}", True, True, False, 1),
    "pp 128x128 s5 cl2 (default)": ("128x128", 5, "{dt}", True, False, True, 2),
}


class Variant(NamedTuple):
    """One build of the tables: the first five fields always, the rest ``gemm_residual_sm90.build``
    arguments whose default (None) is the engine's own choice. A table row is a plain tuple of the
    leading fields or a ``Variant`` with keywords; ``variant`` reads either."""

    tile: str
    stages: int
    dtype: str
    fuse: bool
    streamk: bool | None
    pingpong: bool | None = None
    cluster: Any = None
    split_hi: bool | None = None
    promote: int | None = None
    raster_m: bool | None = None
    raster_group: int | None = None
    epi_ring: bool | None = None
    epi_shared: bool | None = None
    grid: int | None = None  # CTAs launched (whole clusters), the tiles spread over them
    tail_shift: bool | None = None  # partial last tiles moved back to end at M, N (session 16)
    dp_tiles: int | None = None  # with it: schedule (grid or every SM, dp_tiles), stream-K past them
    half_tail: bool | None = None  # the last round's tiles as 64-row halves (session 17)


def engine_default(tile: str, stages: int, dtype: str) -> Variant:
    """The row for the engine's own build of these knobs: every choice left to ``build`` (until
    session 13 the sweeps' "default" rows forced ``streamk=True``, which compiles the stream-K code
    in where the engine leaves it out: 1.5-2 % at M = 2048, NOTES-sm90 v30)."""
    return Variant(tile, stages, dtype, True, None)


def build_variant(limits: DeviceLimits, m: int, n: int, k: int, v: tuple,
                  schedule: tuple[int, int] | None = None):
    """One table row built as it runs: ``gemm_residual_sm90.build`` with every ``Variant`` field
    (``grid``: that many CTAs, every tile data-parallel, unless ``schedule`` is given)."""
    v = variant(v)
    if schedule is None and v.dp_tiles is not None:
        schedule = (v.grid or limits.sm_count, v.dp_tiles)  # the tiles past dp_tiles split
    if schedule is None and v.grid:
        schedule = (v.grid, 1 << 30)  # every tile data-parallel (the kernel clamps)
    task = SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=v.dtype)
    return sm90.build(task, limits, v.tile, v.stages, fuse=v.fuse, streamk=v.streamk,
                      schedule=schedule, pingpong=v.pingpong, cluster=v.cluster,
                      split_hi=v.split_hi, promote=v.promote,
                      raster_m=v.raster_m, raster_group=v.raster_group,
                      epi_ring=v.epi_ring, epi_shared=v.epi_shared,
                      tail_shift=v.tail_shift, half_tail=v.half_tail)


def variant(v: tuple) -> Variant:
    """A table row (a tuple of ``Variant``'s leading fields, or a ``Variant``) as a ``Variant``."""
    return Variant(*v)


def for_dtype(v: tuple, dt: str) -> tuple:
    """A duel table's variant with its "{dt}" placeholder filled in (a ``Variant`` stays one)."""
    filled = [x.format(dt=dt) if isinstance(x, str) else x for x in v]
    return Variant(*filled) if isinstance(v, Variant) else tuple(filled)


def write_table(lines: list[str], report: dict, out_dir: str | None, stem: str) -> None:
    """Print the table; with $OUT, save it as STEM.txt and the report as STEM.json (the folder
    created if missing: session 14 lost a finished sweep to a missing sub-folder)."""
    table = "\n".join(lines)
    print(table)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        Path(out_dir, f"{stem}.txt").write_text(table + "\n")
        Path(out_dir, f"{stem}.json").write_text(json.dumps(report, indent=1, default=str))


def sweep_line(rec: dict) -> str:
    """'M=1024: name 0.0235, name2 ...' from a sweep record."""
    return f"M={rec['m']}: " + ", ".join(f"{kk} {vv:.4f}" if isinstance(vv, float) else f"{kk} {vv}"
                                        for kk, vv in rec.items() if kk != "m")


def check_all(variants, shapes, check, report, failures, label: str = "") -> int:
    """``check(m, n, k, v)`` for every variant and shape, exceptions counted as failures; prints
    progress per variant and a summary; returns the number of checks run so far."""
    t0 = time.perf_counter()
    for v in variants:
        for (m, n, k) in shapes:
            try:
                check(m, n, k, v)
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{v} {(m, n, k)}: {type(exc).__name__}: {exc}")
                traceback.print_exc()
        print(f"checked {v}: {len(failures)} failures so far "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    n_checks = len(report["checks"])
    print(f"correctness{f' ({label})' if label else ''}: {n_checks - len(failures)} / {n_checks} ok; "
          f"worst rel_fro {max(c['rel_fro'] for c in report['checks']):.2e}", flush=True)
    return n_checks


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
    dk = sm90.default_knobs(limits, "tf32", {"m": m, "n": n, "k": k})
    rec["default_knobs"] = dk
    lines = [f"correctness (tf32): {n_checks} / {n_checks} ok",
             f"seed tf32: cuBLAS FAST_TF32 beta=1 {rec['cublas_b1']:.4f}, GEMM alone {rec['cublas_b0']:.4f}; "
             f"default knobs {dk}"]
    lines += [f"   {nm:26s} " + " ".join(f"{t:.4f}" for t in rec[nm]) for nm in TF32_TIMED]
    report["seed"].append(rec)
    write_table(lines, report, out_dir, "sm90_tf32")
    return 0


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
    ffma = PORTABLE_SPEC.build(TaskSpec(kernel="gemm_residual_mma", dtype="fp32", shape=shape,
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
        sampler.stop = True
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
        dk = sm90.default_knobs(limits, "fp32", {"m": mm, "n": n, "k": k})
        rec["default"], info = timed(mm, n, k, (dk[0], dk[1], "fp32", True, True))
        rec["default knobs"] = f"{dk[0]} s{dk[1]} {info['schedule']}"
        report["sweep"].append(rec)
        lines.append(sweep_line(rec))
        print(lines[-1], flush=True)
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_fp32")
    return 0 if not failures else 1


T160_CHECKS = [  # (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    ("128x160", 5, "bf16", True, True, False, 1),
    ("128x160", 4, "fp16", False, True, False, 1),
    ("128x160", 0, "bf16", True, True, False, 1),
    ("128x160", 4, "tf32", True, True, False, 1),
    ("128x160", 5, "fp16", True, False, False, 2),
]
T160_SHAPES = CL_SHAPES + [(1024, 2560, 2560), (300, 160, 64), (200, 328, 96)]


def tile160_mode(args, limits, report, failures, forced_checks, timed, out_dir) -> int:
    """128x160 (one wave of 128 tiles at M=1024, 1.94 waves at 2048 for N = 2560): correctness
    (incl. the 64B-swizzled epilogue tail chunk), then a bf16 M sweep, default knobs vs 128x160
    with 4 and 5 stages, two alternating rounds."""
    n_checks = check_all(T160_CHECKS, T160_SHAPES, forced_checks, report, failures, "128x160")
    if failures:
        print("\n".join(failures[:20]))
        return 1
    n = k = 2560
    lines = [f"correctness (128x160): {n_checks} / {n_checks} ok"]
    for m in CL_SWEEP:
        dk = sm90.default_knobs(limits, "bf16", {"m": m, "n": n, "k": k})
        cands = {f"default {dk[0]} s{dk[1]}": engine_default(dk[0], dk[1], "bf16"),
                 "128x160 s5": ("128x160", 5, "bf16", True, True),
                 "128x160 s4": ("128x160", 4, "bf16", True, True)}
        rec: dict = {"m": m}
        for _round in range(2):
            for name, v in cands.items():
                t, info = timed(m, n, k, v)
                rec.setdefault(name, []).append(t)
                rec[name + " sched"] = f"{info['schedule']} grid {info['grid']}"
        report["sweep"].append(rec)
        lines.append(f"M={m}: " + "; ".join(f"{nm} {min(rec[nm]):.4f}/{max(rec[nm]):.4f} "
                                            f"({rec[nm + ' sched']})" for nm in cands))
        print(lines[-1], flush=True)
    write_table(lines, report, out_dir, "sm90_t160")
    return 0


class _Sampler:
    """NVML SM clock and power every ~10 ms in a thread, tagged by the candidate running."""

    def __init__(self):
        import threading

        import pynvml

        pynvml.nvmlInit()
        self.nv = pynvml
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.tag = None
        self.samples: list[tuple[str, int, float]] = []
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        nv = self.nv
        while not self.stop:
            tag = self.tag
            if tag is not None:
                try:
                    clk = nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_SM)
                    pw = nv.nvmlDeviceGetPowerUsage(self.h) / 1000.0
                    self.samples.append((tag, clk, pw))
                except Exception:  # noqa: BLE001
                    pass
            time.sleep(0.01)


def make_sampler():
    """A running ``_Sampler``, or None (printed why) where NVML does not answer."""
    try:
        return _Sampler()
    except Exception as exc:  # noqa: BLE001
        print(f"no NVML sampler: {exc}")
        return None


def alternate(runs: dict, rounds: int, sampler, tag: str = "", warm: int = 10) -> dict:
    """Time every callable in ``runs`` for 20 launches per round, the candidates one after another
    in each of ``rounds`` rounds (so drift hits all alike): name -> the rounds' medians. The
    sampler, if any, tags its samples ``tag + name`` meanwhile."""
    for fn in runs.values():
        for _ in range(warm):
            fn()
    per: dict[str, list[float]] = {nm: [] for nm in runs}
    for _r in range(rounds):
        for nm, fn in runs.items():
            if sampler:
                sampler.tag = tag + nm
            per[nm].append(time_fn(fn, warmup=0, iters=20)["median_ms"])
    if sampler:
        sampler.tag = None
    return per


def alternation_rows(per: dict, sampler, tag: str = "") -> list[tuple]:
    """(name, median, best round, median ratio to the first candidate, mean SM MHz, mean W) per
    candidate of ``alternate``'s result (NaN clock and power without a sampler)."""
    first = next(iter(per))
    rows = []
    for nm, ts in per.items():
        srt = sorted(ts)
        ratios = sorted(a / b for a, b in zip(ts, per[first], strict=True))
        smp = [(c_, p_) for tg, c_, p_ in sampler.samples if tg == tag + nm] if sampler else []
        clk = sum(c_ for c_, _ in smp) / len(smp) if smp else float("nan")
        pw = sum(p_ for _, p_ in smp) / len(smp) if smp else float("nan")
        rows.append((nm, srt[len(srt) // 2], srt[0], ratios[len(ratios) // 2], clk, pw))
    return rows


def duel_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """Seed-shape candidates in alternation: each round runs every candidate for 20 launches
    (events around each launch), so slow drift (power, temperature) hits all alike. Reports the
    median per candidate, the median of its per-round ratio to the first, and NVML SM clock and
    power sampled while it ran."""
    m, n, k = SEED
    sampler = make_sampler()
    lines = []
    for dt in ("bf16", "fp16"):
        bufs, ref = get(m, n, k, dt)
        runs = {}
        for name, v in DUEL.items():
            v = for_dtype(v, dt)
            if v[3]:
                verify(m, n, k, v, label="duel")
            runs[name] = Runner(build(m, n, k, v), bufs, dt)
        c = cp.empty_like(bufs["r"])
        runs["cuBLAS GEMM only (b=0)"] = cublas_gemm(bufs, c, dt, 0.0)
        per = alternate(runs, args.rounds, sampler, tag=f"{dt} ")
        lines.append(f"seed {dt} ({args.rounds} rounds x 20 launches, alternating)")
        lines.append(f"   {'candidate':28s} {'median':>8} {'best rnd':>8} {'ratio':>6} {'SM MHz':>7} {'W 1s':>6}")
        for nm, med, best, ratio, clk, pw in alternation_rows(per, sampler, tag=f"{dt} "):
            lines.append(f"   {nm:28s} {med:8.4f} {best:8.4f} {ratio:6.3f} {clk:7.0f} {pw:6.0f}")
            report["seed"].append({"dtype": dt, "name": nm, "rounds": per[nm]})
        print("\n".join(lines[-len(per) - 2:]), flush=True)
    if sampler:
        sampler.stop = True
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_duel")
    return 0 if not failures else 1


def msweep_alt_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """The default build at each M of ``--m-list`` (N = K = 2560, bf16), timed in alternation, so
    that the sweep's order (the card heating from one M to the next) does not rank the shapes:
    median ms and TFLOP/s per M over ``--rounds`` rounds of 20 launches."""
    n = k = 2560
    sampler = make_sampler()
    runs, flops = {}, {}
    for m in args.m_list:
        shape = {"m": m, "n": n, "k": k}
        bs, st = sm90.default_knobs(limits, "bf16", shape)
        v = (bs, st, "bf16", True, True)
        verify(m, n, k, v, label="msweep-alt")
        b = build(m, n, k, v)
        name = f"M={m} {bs} s{st} {b.info['consumers'].split(' ')[0]} {b.info['schedule']}"
        runs[name] = Runner(b, get(m, n, k, "bf16")[0], "bf16")
        flops[name] = 2 * m * n * k
    per = alternate(runs, args.rounds, sampler, tag="alt ")
    lines = [f"default builds, bf16, N = K = 2560, {args.rounds} alternating rounds x 20 launches"]
    for nm, med, best, _r, clk, _p in alternation_rows(per, sampler, tag="alt "):
        lines.append(f"   {nm:60s} {med:8.4f} ms (best round {best:.4f}) "
                     f"{flops[nm] / med / 1e9:6.0f} TFLOP/s  SM {clk:5.0f} MHz")
        report["sweep"].append({"name": nm, "rounds": per[nm]})
    if sampler:
        sampler.stop = True
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_msweep_alt")
    return 0 if not failures else 1


def cluster_mode(args, limits, report, failures, verify, timed, get, out_dir) -> int:
    """2x1 clusters (W multicast) vs the current default: correctness, seed (interleaved), sweep."""
    def _check(m, n, k, v):
        verify(m, n, k, v)
        if m >= 1571:
            verify(m, n, k, v, (6, 0), "grid 6")

    n_checks = check_all(CL_VARIANTS, CL_SHAPES, _check, report, failures)
    lines = [f"correctness (cluster): {n_checks - len(failures)} / {n_checks} ok "
             f"(+ re-checks after timing)"]
    if failures:
        lines += failures[:20]
        print("\n".join(lines))
        return 1
    m, n, k = SEED
    for dt in ("bf16", "fp16"):
        rec: dict = {"dtype": dt}
        bufs = get(m, n, k, dt)[0]
        c = cp.empty_like(bufs["r"])
        rec["cublas_gemm_b0"] = time_fn(cublas_gemm(bufs, c, dt, 0.0),
                                        iters=args.iters)["median_ms"]
        cands = {"default": sm90.default_knobs(limits, dt, {"m": m, "n": n, "k": k}),
                 "128x256 s3 coop": ("128x256", 3, dt, True, True, False, 1),
                 "128x256 s3 cl2": ("128x256", 3, dt, True, False, False, 2),
                 "128x256 s3 cl2 grid128": ("128x256", 3, dt, True, False, False, 2),
                 "pp 128x128 s5 cl2": ("128x128", 5, dt, True, False, True, 2),
                 "256x128 s3 cl2": ("256x128", 3, dt, True, False, False, 2)}
        cands["default"] = (cands["default"][0], cands["default"][1], dt, True, True)
        for _round in range(3):
            for name, v in cands.items():
                sch = (128, 0) if "grid128" in name else None
                t, info = timed(m, n, k, v, sch)
                rec.setdefault(name, []).append(t)
                rec[name + " info"] = f"{info['schedule']} grid {info['grid']} {info['cluster']}"
            print(json.dumps(rec), flush=True)
        report["seed"].append(rec)
        lines.append(f"seed {dt}: cuBLAS GEMM alone {rec['cublas_gemm_b0']:.4f}")
        lines += [f"   {nm:24s} " + " ".join(f"{t:.4f}" for t in rec[nm])
                  + f"  (min {min(rec[nm]):.4f}) {rec[nm + ' info']}" for nm in cands]
    for m in CL_SWEEP:
        rec = {"m": m}
        bufs = get(m, n, k, "bf16")[0]
        c = bufs["r"].copy()
        rec["cublas_b1"] = time_fn(cublas_gemm(bufs, c, "bf16", 1.0), iters=args.iters)["median_ms"]
        dk = sm90.default_knobs(limits, "bf16", {"m": m, "n": n, "k": k})
        rec["default_knobs"] = dk
        rec["default"], _ = timed(m, n, k, (dk[0], dk[1], "bf16", True, True))
        for name, v in (("128x256 s3 cl2", ("128x256", 3, "bf16", True, False, False, 2)),
                        ("pp 128x128 s5 cl2", ("128x128", 5, "bf16", True, False, True, 2)),
                        ("128x128 s4 cl2", ("128x128", 4, "bf16", True, False, False, 2))):
            rec[name], info = timed(m, n, k, v)
            rec[name + " grid"] = info["grid"]
        report["sweep"].append(rec)
        print(json.dumps(rec, default=str), flush=True)
        lines.append(sweep_line(rec))
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_cluster")
    return 0 if not failures else 1


def quick(args, limits, report, failures, forced_checks, timed, get, out_dir) -> int:
    """Ping-pong vs cooperative consumers: correctness, then seed timings (interleaved)."""
    n_checks = check_all(PP_VARIANTS, QUICK_SHAPES, forced_checks, report, failures)

    m, n, k = SEED
    lines = [f"correctness (ping-pong): {n_checks - len(failures)} / {n_checks} ok "
             f"(+ re-checks after timing)"]
    for dt in ("bf16", "fp16"):
        rec: dict = {"dtype": dt}
        bufs = get(m, n, k, dt)[0]
        c = cp.empty_like(bufs["r"])
        rec["cublas_gemm_b0"] = time_fn(cublas_gemm(bufs, c, dt, 0.0),
                                        iters=args.iters)["median_ms"]
        cands = {"old 128x256 s3 coop": ("128x256", 3, dt, True, True, False),
                 "128x128 s4 coop": ("128x128", 4, dt, True, True, False),
                 "pp 128x128 s5": ("128x128", 5, dt, True, True, True),
                 "pp 128x128 s4": ("128x128", 4, dt, True, True, True),
                 "pp 128x128 s5 dp-only": ("128x128", 5, dt, True, False, True)}
        for _round in range(2):
            for name, v in cands.items():
                t, info = timed(m, n, k, v)
                rec.setdefault(name, []).append(t)
                rec[name + " schedule"] = info["schedule"]
            print(json.dumps(rec), flush=True)
        report["seed"].append(rec)
        lines.append(f"seed {dt}: cuBLAS GEMM alone {rec['cublas_gemm_b0']:.4f}; " + "; ".join(
            f"{nm} {min(rec[nm]):.4f}/{max(rec[nm]):.4f}" for nm in cands))
    for m in QUICK_SWEEP:
        rec = {"m": m}
        dk = sm90.default_knobs(limits, "bf16", {"m": m, "n": n, "k": k})
        rec["default_knobs"] = dk
        rec["default"], _ = timed(m, n, k, (dk[0], dk[1], "bf16", True, True, False))
        for st in (4, 5):
            rec[f"pp s{st}"], info = timed(m, n, k, ("128x128", st, "bf16", True, True, True))
            rec[f"pp s{st} schedule"] = info["schedule"] + f" grid {info['grid']}"
        report["sweep"].append(rec)
        print(json.dumps(rec, default=str), flush=True)
        lines.append(sweep_line(rec))
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_quick")
    return 0 if not failures else 1


PP160_VARIANTS = [  # (tile, stages, dtype, fuse, streamk, pingpong, cluster): ping-pong 128x160
    ("128x160", 4, "bf16", True, True, True, 1),
    ("128x160", 4, "fp16", True, True, True, 1),
    ("128x160", 3, "bf16", False, True, True, 1),
    ("128x160", 0, "fp16", True, True, True, 1),
    ("128x160", 2, "bf16", True, False, True, 1),
    ("128x160", 4, "bf16", True, False, True, 2),
    ("128x160", 4, "fp16", False, False, True, 2),
    ("128x160", 3, "fp16", True, False, True, 2),
]
PP160_DUEL = {  # name: variant; the first is the ratio's reference
    "pp 128x128 s5 no cluster": ("128x128", 5, "{dt}", True, True, True, 1),
    "pp 128x128 s5 cl2 (default)": ("128x128", 5, "{dt}", True, False, True, 2),
    "pp 128x160 s4": ("128x160", 4, "{dt}", True, True, True, 1),
    "pp 128x160 s3": ("128x160", 3, "{dt}", True, True, True, 1),
    "pp 128x160 s4 cl2": ("128x160", 4, "{dt}", True, False, True, 2),
    "pp 128x160 s3 cl2": ("128x160", 3, "{dt}", True, False, True, 2),
}
PP160_SWEEP = (512, 1024, 2048, 4096, 7976, 8192)


def pp160_mode(args, limits, report, failures, verify, forced_checks, get, out_dir, build) -> int:
    """Ping-pong on the 128x160 tile (a warpgroup holds 128 x 160 fp32 accumulators; 10 % fewer
    L2->SM bytes per output than 128x128, 35 % fewer with W multicast in 2x1 clusters): correctness of
    its variants (stream-K forced schedules; clusters on small grids and odd M tile counts), the
    seed-shape candidates in alternation (bf16, fp16; SM clock per candidate), then an M sweep of
    the default vs ping-pong 128x160 with and without clusters, each M in alternation."""
    def _check(m, n, k, v):
        if v[6] == 2:
            verify(m, n, k, v)
            if m >= 1571:
                verify(m, n, k, v, (6, 0), "grid 6")
        else:
            forced_checks(m, n, k, v)

    n_checks = check_all(PP160_VARIANTS, CL_SHAPES, _check, report, failures)
    lines = [f"correctness (ping-pong 128x160): {n_checks - len(failures)} / {n_checks} ok"]
    print(lines[0], flush=True)
    if failures:
        lines += failures[:20]
        write_table(lines, report, out_dir, "sm90_pp160")
        return 1
    m, n, k = SEED
    sampler = make_sampler()
    for dt in () if args.skip_seed else ("bf16", "fp16"):
        bufs, _ref = get(m, n, k, dt)
        runs = {}
        for name, v in PP160_DUEL.items():
            v = for_dtype(v, dt)
            verify(m, n, k, v, label="duel")
            runs[name] = Runner(build(m, n, k, v), bufs, dt)
        runs["cuBLAS GEMM only (b=0)"] = cublas_gemm(bufs, cp.empty_like(bufs["r"]), dt, 0.0)
        per = alternate(runs, args.rounds, sampler, tag=f"{dt} ")
        lines.append(f"seed {dt} ({args.rounds} rounds x 20 launches, alternating)")
        lines.append(f"   {'candidate':28s} {'median':>8} {'best rnd':>8} {'ratio':>6} {'SM MHz':>7}")
        for nm, med, best, ratio, clk, _pw in alternation_rows(per, sampler, tag=f"{dt} "):
            lines.append(f"   {nm:28s} {med:8.4f} {best:8.4f} {ratio:6.3f} {clk:7.0f}")
            report["seed"].append({"dtype": dt, "name": nm, "rounds": per[nm]})
        print("\n".join(lines[-len(per) - 2:]), flush=True)
    n = k = 2560
    sweep_rounds = args.rounds if args.skip_seed else max(4, args.rounds // 4)
    lines.append(f"bf16 M sweep, N = K = 2560, each M {sweep_rounds} alternating rounds")
    for m in args.m_list if args.m_list_given else PP160_SWEEP:
        bufs, _ref = get(m, n, k, "bf16")
        dk = sm90.default_knobs(limits, "bf16", {"m": m, "n": n, "k": k})
        cands = {f"default {dk[0]} s{dk[1]}": engine_default(dk[0], dk[1], "bf16"),
                 "pp 128x160 s4": ("128x160", 4, "bf16", True, True, True, 1),
                 "pp 128x160 s4 cl2": ("128x160", 4, "bf16", True, False, True, 2),
                 "pp 128x128 s5 cl2": ("128x128", 5, "bf16", True, False, True, 2)}
        runs = {}
        for name, v in cands.items():
            verify(m, n, k, v, label="sweep")
            runs[name] = Runner(build(m, n, k, v), bufs, dt)
        per = alternate(runs, sweep_rounds, sampler, tag=f"M{m} ")
        rows = alternation_rows(per, sampler, tag=f"M{m} ")
        lines.append(f"M={m}: " + "; ".join(f"{nm} {med:.4f} ({ratio:.3f})"
                                            for nm, med, _b, ratio, _c, _p in rows))
        report["sweep"].append({"m": m, **{nm: per[nm] for nm in per}})
        print(lines[-1], flush=True)
    if sampler:
        sampler.stop = True
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_pp160")
    return 0 if not failures else 1


COLD_DUEL = {  # name: variant (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    "pp 128x128 s5 no cluster": ("128x128", 5, "{dt}", True, True, True, 1),
    "pp 128x128 s5 cl2 (default)": ("128x128", 5, "{dt}", True, False, True, 2),
    # the tile that reaches past M moved back to end at M (TAIL_SHIFT; session 16: M = 7976 took
    # 2.5 % more cycles than 8192 under Nsight Compute, 8064 with a wholly empty tile did not)
    "pp 128x128 s5 cl2, tail shifted": Variant("128x128", 5, "{dt}", True, False, True, 2,
                                               tail_shift=True),
    "pp 128x160 s4": ("128x160", 4, "{dt}", True, True, True, 1),
    "pp 128x160 s4 cl2": ("128x160", 4, "{dt}", True, False, True, 2),
    "coop 128x256 s3": ("128x256", 3, "{dt}", True, True, False, 1),
    "coop 128x256 s3 cl2": ("128x256", 3, "{dt}", True, False, False, 2),
    # (1x2 and 2x2 clusters, A multicast: slower everywhere, NOTES-sm90 v18)
    # (the grouped tile order, groups of 2, 4, 8 cluster pairs on the default: 2-5 % slower,
    # NOTES-sm90 v23)
    # the two ping-pong consumers sharing one epilogue buffer: one stage more in the same shared
    # memory (session 13, v27)
    "pp 128x128 s6 cl2, shared epilogue": Variant("128x128", 6, "{dt}", True, False, True, 2,
                                                  epi_shared=True),
    "pp 128x128 s6, shared epilogue": Variant("128x128", 6, "{dt}", True, False, True, 1,
                                              epi_shared=True),
    "pp 128x160 s5 cl2, shared epilogue": Variant("128x160", 5, "{dt}", True, False, True, 2,
                                                  epi_shared=True),
    "pp 128x160 s5, shared epilogue": Variant("128x160", 5, "{dt}", True, False, True, 1,
                                              epi_shared=True),
    "pp 128x128 s5 cl2, shared epilogue": Variant("128x128", 5, "{dt}", True, False, True, 2,
                                                  epi_shared=True),
    # what MEMORY_PIPELINING 6 on 128x128 and 5 on 128x160 ran before they became ping-pong with the
    # shared buffer (cooperative, one buffer)
    "coop 128x128 s6": ("128x128", 6, "{dt}", True, True, False, 1),
    "coop 128x160 s5": ("128x160", 5, "{dt}", True, True, False, 1),
    # (when the producer stages each item's R: after k-block STAGES of the item; k-block 0 +2.9 %,
    # 16 +3.4 %, 4 level, 3 and 6-8 slower in bf16, NOTES-sm90 v28)
    # (R's two chunks one per k-block from k-block 4 or 5: 0.4-1.3 % slower, v28, removed again)
    # 128 CTAs instead of 132: 1280 tiles = 5 full rounds of 256 consumers (132 CTAs also take 5,
    # the last 85 % full); 4 idle SMs, 3 % less L2 traffic at a time (v29)
    "pp 128x128 s5 cl2, grid 128": Variant("128x128", 5, "{dt}", True, False, True, 2, grid=128),
    # cuBLAS's big tiles (session 14, v31): cooperative, the 80 KB epilogue tile staged in the ring
    # and its slots returned after each store (the ring goes on), 4 stages (3: no room beside the
    # tile's two slots, released at once); 128x320's consumers split N; 2 stages fit a buffer
    **{f"coop {t} s{st} ring" + (" cl2" if c > 1 else ""):
       Variant(t, st, "{dt}", True, False if c > 1 else None, False, c, epi_ring=True)
       for t, st in (("128x320", 4), ("256x160", 4), ("128x256", 4), ("128x320", 3)) for c in (1, 2)},
    "coop 128x320 s2 cl2": Variant("128x320", 2, "{dt}", True, False, False, 2),
}
COLD_ODD = [(7976, 2560, 2560), (333, 1032, 520), (1, 2560, 2560), (4096, 1032, 2560)]
"""Shapes every clustered cold-duel candidate is checked at first: tile blocks past M and N."""
RING_ODD = [(2000, 2600, 704), (4096, 2560, 64), (5000, 1000, 200)]
"""And every candidate with the epilogue tile in the ring: 11 k-blocks on 4 stages (the tile's slots
wrap round the ring), one k-block, and few k-blocks with tiles past N, each CTA several tiles."""


def cold_duel_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """The seed-shape candidates the way the issue times them: each run is 10 warm-ups and 100
    timed launches (the median) after ``--idle`` seconds of rest, candidates in a fresh random order
    every round, ``--rounds`` rounds; NVML's SM clock and throttle reasons right after each run. The
    alternating duel (20 launches per turn, no rest) measures the hot card instead."""
    import random

    from engine import nvml

    m, n, k = SEED
    rng = random.Random(1)
    duel = {nm: v for nm, v in COLD_DUEL.items()
            if args.only is None or "(default)" in nm or re.search(args.only, nm)}
    lines = [f"seed, cold runs: {args.rounds} rounds, {args.idle:g} s idle before each run of "
             "10 warm-ups + 100 timed (median ms / p10; SM MHz and reasons right after)"]
    wrong0 = len(failures)
    for dt in ("bf16", "fp16"):
        for v in duel.values():
            if v[6] != 1 or variant(v).epi_shared or variant(v).epi_ring:
                print(f"checking {dt} {v}", flush=True)  # a hang shows where
                for shape in COLD_ODD + (RING_ODD if variant(v).epi_ring else []):
                    verify(*shape, for_dtype(v, dt), label="cold duel odd shape")
    lines.append(f"odd shapes {COLD_ODD} (ring: and {RING_ODD}): clustered, shared-epilogue and "
                 f"ring candidates in bf16 and fp16, {len(failures) - wrong0} wrong")
    print(lines[-1], flush=True)
    for dt in ("bf16", "fp16"):
        bufs, _ref = get(m, n, k, dt)
        runs = {}
        for name, v in duel.items():
            v = for_dtype(v, dt)
            verify(m, n, k, v, label="cold duel")
            b = build(m, n, k, v)
            runs[name] = Runner(b, bufs, dt)
            runs[name]()  # compile and load outside the timed runs
            if runs[name].grid != b.info["grid"]:
                print(f"{dt} {name}: grid {b.info['grid']} -> {runs[name].grid} "
                      "(clusters resident at once)", flush=True)
        runs["cuBLAS GEMM only (b=0)"] = cublas_gemm(bufs, cp.empty_like(bufs["r"]), dt, 0.0)
        runs["cuBLAS beta=1 (in place)"] = cublas_gemm(bufs, bufs["r"].copy(), dt, 1.0)
        cp.cuda.runtime.deviceSynchronize()
        per: dict[str, list[tuple[float, float, int | None, str]]] = {nm: [] for nm in runs}
        for _r in range(args.rounds):
            for nm in rng.sample(list(runs), len(runs)):
                time.sleep(args.idle)
                t = time_fn(runs[nm], warmup=10, iters=100)
                try:
                    clk = nvml.sm_clock_mhz(0)
                    reasons = ",".join(nvml.decode_throttle((nvml.clocks_event_mask(0) or 0) & ~0x1))
                except Exception:  # noqa: BLE001
                    clk, reasons = None, "?"
                per[nm].append((t["median_ms"], t["p10_ms"], clk, reasons))
        lines.append(f"{dt}:")
        for nm, rs in per.items():
            meds = sorted(r[0] for r in rs)
            lines.append(f"   {nm:28s} median of runs {meds[len(meds) // 2]:.4f}  runs "
                         + " ".join(f"{r[0]:.4f}/{r[1]:.4f}@{r[2]}" for r in rs)
                         + f"  reasons {sorted({r[3] for r in rs})}")
            report["seed"].append({"dtype": dt, "name": nm, "runs": rs})
        print("\n".join(lines[-len(per) - 1:]), flush=True)
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_cold_duel")
    return 0 if not failures else 1


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
        bs, st = sm90.default_knobs(limits, dt, shape)
        cl = sm90.use_cluster(limits, bs, st, dt, shape)
        cands = {f"default {bs} s{st}" + (" cl2" if cl > 1 else ""): engine_default(bs, st, dt)}
        for tile, st_, over in args.also:  # other knobs, built as the engine would build them
            cands[also_label(tile, st_, over)] = engine_default(tile, st_, dt)._replace(**over)
        if "halves" in build(m, n, k, engine_default(bs, st, dt)).info["schedule"]:
            # the default runs its last round in halves: the same build with that round whole
            cands["default, last round whole"] = Variant(bs, st, dt, True, False, half_tail=False)
        if args.tail_alt:  # the same build with its partial last tiles clipped (before session 16)
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
            bs, st = sm90.default_knobs(limits, dt, shape)
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
        sampler.stop = True
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_torch_scan")
    return 0 if not failures and not slower else 1


def cluster_tag(info: dict) -> str:
    """'2x1' where a build's info names a cluster ('2x1, W multicast'), '' for 'none'."""
    cl = str(info.get("cluster", "none"))
    return "" if cl == "none" else cl.split(",")[0]


TAIL_BITS_SHAPES = [(7976, 2560, 2560), (8000, 2560, 2560), (333, 1032, 520), (130, 264, 72),
                    (4096, 2504, 2560), (1571, 2560, 2560), (300, 136, 200), (2047, 2600, 704)]
TAIL_BITS_VARIANTS = [  # (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    ("128x128", 5, "{dt}", True, False, True, 2), ("128x128", 5, "{dt}", True, True, True, 1),
    ("128x160", 5, "{dt}", True, True, False, 1), ("128x256", 3, "{dt}", True, True, False, 1),
    ("64x80", 8, "{dt}", True, False, False, 1), ("128x128", 4, "{dt}", False, True, False, 1),
]
TAIL_BITS_F32 = [  # fp32 (3xTF32) and tf32: unclustered cooperative tiles at depths that fit
    ("128x128", 4, "{dt}", True, True, False, 1), ("128x160", 4, "{dt}", True, True, False, 1),
    ("128x256", 2, "{dt}", True, True, False, 1), ("128x128", 4, "{dt}", False, True, False, 1),
]


def tail_bits_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """``--tail-bits``: each build with its partial last tiles moved back to end at M and N
    (``tail_shift``) against the same build without, on the same inputs, at shapes whose last tiles
    reach past M, N or both: correct against the float64 reference, and bit for bit the unshifted
    output (the rows and columns two tiles share are computed by both and stored twice: the same
    bits, or the result would depend on which store lands last). Bit identity fails the run only
    where ``use_tail_shift`` would shift (16-bit data, no stream-K code); elsewhere it is reported
    (session 16: stream-K and fp32-data builds differed in the last bits)."""
    lines = ["tail shift: shifted vs unshifted build, bit for bit, and against the reference"]
    for dt in ("bf16", "fp16", "fp32", "tf32"):
        for v0 in [None, *(TAIL_BITS_F32 if dt in F32 else TAIL_BITS_VARIANTS)]:
            for m, n, k in TAIL_BITS_SHAPES:
                if v0 is None:  # the engine's default knobs at this shape, every choice its own
                    v = engine_default(*sm90.default_knobs(limits, dt, {"m": m, "n": n, "k": k}), dt)
                else:
                    v = for_dtype(v0, dt)
                bufs, _ref = get(m, n, k, dt)
                outs = []
                try:
                    for shift in (False, True):
                        ok = verify(m, n, k, variant(v)._replace(tail_shift=shift), label="tail bits")
                        outs.append(bufs["out"].copy())
                except Exception as e:  # noqa: BLE001 - a build that cannot run: record, go on
                    failures.append(f"tail bits {dt} {v} {(m, n, k)}: {type(e).__name__}: {e}")
                    print(failures[-1], flush=True)
                    continue
                same = bool(cp.array_equal(outs[0].view(cp.uint8), outs[1].view(cp.uint8)))
                # required where the engine's own choice (use_tail_shift) shifts this build
                required = "#define TAIL_SHIFT 1" in build(m, n, k, variant(v)._replace(tail_shift=None)).source
                if required and not same:
                    diff = int(cp.count_nonzero(outs[0] != outs[1]))
                    failures.append(f"tail bits {dt} {v} {(m, n, k)}: {diff} elements differ")
                who = "engine default " if v0 is None else ""
                lines.append(f"{dt} {who}{v[0]} s{v[1]} pp={v[5]} cl={v[6]} fuse={v[3]} {(m, n, k)}: "
                             f"correct {ok}, bit-identical {same}"
                             + ("" if required else " (not required: the engine does not shift this build)"))
                print(lines[-1], flush=True)
    lines.append(f"{len(failures)} failures")
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_tail_bits")
    return 0 if not failures else 1


SMALL_M = {  # name: variant (see ``Variant``); the narrow and 128x160 rows without "M-fastest" in
    # their name are numbered N-fastest (raster_m=False), as they were measured in v17-v21
    "coop 128x128 s4 (planned)": ("128x128", 4, "{dt}", True, True, False, 1),
    "coop 128x128 s4 data-parallel": ("128x128", 4, "{dt}", True, False, False, 1),
    "coop 128x128 s4 cl2": ("128x128", 4, "{dt}", True, False, False, 2),
    "coop 128x256 s3 (planned)": ("128x256", 3, "{dt}", True, True, False, 1),
    "coop 128x256 s3 cl2": ("128x256", 3, "{dt}", True, False, False, 2),
    "coop 128x160 s5 (planned)": Variant("128x160", 5, "{dt}", True, True, False, 1, raster_m=False,
                                         raster_group=0),
    # the narrow tiles (N = 80): 128 CTAs with the whole K loop each at M = 256 (64x80) and
    # M = 512 (128x80), as cuBLAS runs there (its 80x64 / 80x128 tiles, 11 / 8 stages, 2-CTA clusters)
    "64x80 s8 data-parallel": Variant("64x80", 8, "{dt}", True, False, False, 1, raster_m=False),
    "64x80 s11 data-parallel": Variant("64x80", 11, "{dt}", True, False, False, 1, raster_m=False),
    "64x80 s8 cl2": ("64x80", 8, "{dt}", True, False, False, 2),
    "64x80 s11 cl2": ("64x80", 11, "{dt}", True, False, False, 2),
    "64x80 s11 (planned)": Variant("64x80", 11, "{dt}", True, True, False, 1, raster_m=False),
    "coop 128x80 s7 data-parallel": Variant("128x80", 7, "{dt}", True, False, False, 1, raster_m=False),
    "coop 128x80 s7 cl2": ("128x80", 7, "{dt}", True, False, False, 2),
    # tile order (session 11, v22): M-fastest tiles put the CTAs that share a W tile side by side,
    # as cuBLAS's grid does
    "64x80 s8 dp, M-fastest": Variant("64x80", 8, "{dt}", True, False, False, 1, raster_m=True),
    "64x80 s8 cl2 M-fastest": Variant("64x80", 8, "{dt}", True, False, False, 2, raster_m=True),
    "coop 128x80 s7 dp, M-fastest": Variant("128x80", 7, "{dt}", True, False, False, 1, raster_m=True),
    # the wide one-wave defaults (N = K = 2560: M = 1024 128x160, M = 1571 128x256) in the same order
    "coop 128x160 s5 dp, M-fastest": Variant("128x160", 5, "{dt}", True, False, False, 1, raster_m=True),
    "coop 128x256 s3 dp, M-fastest": Variant("128x256", 3, "{dt}", True, False, False, 1, raster_m=True),
    # the epilogue tile staged in the ring's freed slots (one tile per CTA): its shared memory goes
    # to the ring, one stage more than the defaults' (session 12, v26; rows skipped where a CTA
    # would get two tiles)
    "coop 128x256 s3 dp, R in ring": Variant("128x256", 3, "{dt}", True, False, False, 1, epi_ring=True),
    "coop 128x256 s4 dp, R in ring": Variant("128x256", 4, "{dt}", True, False, False, 1, epi_ring=True),
    "coop 128x160 s6 dp, M-fastest, R in ring": Variant("128x160", 6, "{dt}", True, False, False, 1,
                                                        raster_m=True, epi_ring=True),
    "coop 128x80 s8 dp, M-fastest, R in ring": Variant("128x80", 8, "{dt}", True, False, False, 1,
                                                       raster_m=True, epi_ring=True),
    "64x80 s12 dp, M-fastest, R in ring": Variant("64x80", 12, "{dt}", True, False, False, 1,
                                                  raster_m=True, epi_ring=True),
    # (1x2 and 2x2 clusters, A multicast, build(cluster=(1, 2)): slower everywhere, NOTES-sm90 v18,
    # 128x256 in 1x2 at M = 1571 too (one wave of 130 CTAs): 4-5 % slower, v24;
    # two consumers splitting 64x80's k-blocks: level, v19, removed again)
}


def small_m_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """``--small-m``: where ours loses to torch matmul + add (M = 256, 512 at N = K = 2560), every
    existing build that could serve small M, timed the way the engine times ours and the peers:
    input sets rotated as the engine rotates them (W comes from DRAM, not the L2), launches queued
    back to back between events (behind the hold kernel where the host cannot keep ahead), 10
    warm-ups and ``--iters`` timed, the median, after ``--idle`` s of rest, candidates shuffled,
    ``--rounds`` rounds. Candidates: the default knobs, cooperative 128x128 s4 under the planned,
    the data-parallel and every forced stream-K schedule, 2x1 clusters (W multicast) on 128x128 and
    128x256, 128x256 and 128x160 planned; cuBLAS beta=1 (in place), its GEMM alone, torch
    matmul + add. Each of ours is verified before and again after its timed runs."""
    import random

    from engine.backends.cuda import queued_timer, time_queued
    from engine.backends.cuda_support import input_sets

    n = k = 2560
    dt = args.sweep_dtype
    sms = limits.sm_count
    rng = random.Random(3)
    timer = queued_timer()
    l2 = int(cp.cuda.runtime.getDeviceProperties(0).get("l2CacheSize", 50 * 2**20))
    ms = args.m_list if args.m_list_given else [256, 512, 1024]

    def applies(v: tuple, m: int, n: int) -> bool:
        """False for a row staging R in the ring where a CTA would get two tiles (data-parallel on
        at most one wave: ``build`` refuses it)."""
        x = variant(v)
        bm, bn, _ = sm90.parse_block_size(x.tile, x.dtype)
        return not x.epi_ring or -(-m // bm) * -(-n // bn) <= sms

    def wanted(name: str) -> bool:  # --only: the table rows whose name matches (the default always)
        return args.only is None or re.search(args.only, name) is not None

    def order_rows(bs: str, st: int) -> dict[str, Variant]:
        """--orders G,...: the default knobs numbered N-fastest, M-fastest and in groups of G M blocks
        (the schedule, consumers and cluster stay the engine's choice)."""
        if not args.orders:
            return {}
        rows = {"N-fastest": Variant(bs, st, dt, True, None, raster_m=False, raster_group=0),
                "M-fastest": Variant(bs, st, dt, True, None, raster_m=True, raster_group=0)}
        for g in args.orders:
            rows[f"groups of {g}"] = Variant(bs, st, dt, True, None, raster_group=g)
        return rows
    lines = [f"{dt} small M, N = K = {n}: {args.rounds} rounds, {args.idle:g} s idle before each "
             f"run of 10 warm-ups + {args.iters} timed, input sets rotated, launches queued "
             "(median of the runs' medians, ms; score against torch in the same rounds)"]

    def one_m(m: int) -> None:
        shape = {"m": m, "n": n, "k": k}
        bufs0, ref0 = get(m, n, k, dt)
        in_bytes = sum(bufs0[x].nbytes for x in ("a", "w", "r"))
        n_sets = input_sets(in_bytes, l2)
        sets = [bufs0] + [make_inputs(m, n, k, dt, seed=1000 + i) for i in range(1, n_sets)]
        out = bufs0["out"]
        for s in sets[1:]:
            s["out"] = out  # one output, as the engine has
        cands: dict[str, tuple] = {}
        bs, st = sm90.default_knobs(limits, dt, shape)
        cands[f"default {bs} s{st}"] = (engine_default(bs, st, dt), None)  # as the engine builds it
        for name, v in SMALL_M.items():
            if wanted(name):
                cands[name] = (for_dtype(v, dt), None)
        for sch in sm90.schedule_candidates(m, n, k, 128, 128, sms)[1:]:
            if wanted(f"coop 128x128 s4 sk {sch[0]}/{sch[1]}"):
                cands[f"coop 128x128 s4 sk {sch[0]}/{sch[1]}"] = (("128x128", 4, dt, True, True, False, 1), sch)
        for name, v in order_rows(bs, st).items():  # --orders: the default build in each tile order
            cands[f"default, {name}"] = (v, None)
        launches: dict = {}
        ours: dict = {}
        for name, (v, sch) in list(cands.items()):
            if not applies(v, m, n):
                print(f"M={m} {name}: skipped (R in ring needs one tile a CTA)", flush=True)
                del cands[name]
                continue
            b = build(m, n, k, v, sch)
            runners = [Runner(b, s, dt) for s in sets]
            ours[name] = (runners[0], b.info)
            launches[name] = lambda i, rs=runners: rs[i % len(rs)]()
        c1 = bufs0["r"].copy()
        cub1 = [cublas_gemm(s, c1, dt, 1.0) for s in sets]
        launches["cuBLAS beta=1 (in place)"] = lambda i: cub1[i % len(cub1)]()
        cub0 = [cublas_gemm(s, out, dt, 0.0) for s in sets]
        launches["cuBLAS GEMM alone"] = lambda i: cub0[i % len(cub0)]()
        if not args.no_torch:
            try:
                import torch

                if torch.cuda.current_stream().cuda_stream != 0:
                    raise RuntimeError("torch's current stream is not the legacy default stream")
                tdt = torch.bfloat16 if dt == "bf16" else torch.float16
                # int16 crosses DLPack everywhere (uint16 not in older torch); same bits, viewed as bf16/fp16
                tsets = [tuple(torch.from_dlpack(s[x].view(cp.int16)).view(tdt) for x in ("a", "w", "r"))
                         for s in sets]
                launches["torch matmul + add"] = (
                    lambda i: torch.matmul(tsets[i % len(tsets)][0], tsets[i % len(tsets)][1].t())
                    + tsets[i % len(tsets)][2])
            except Exception as exc:  # noqa: BLE001
                print(f"no torch peer: {type(exc).__name__}: {exc}", flush=True)

        def check(name: str, when: str) -> None:
            runner, info = ours[name]
            out.fill(0xFFFF)  # NaN-poisoned
            runner()
            cp.cuda.runtime.deviceSynchronize()
            c = compare(out, ref0, dt)
            c.update(name=name, shape=(m, n, k), label=f"small-m {when}", info_schedule=info["schedule"])
            report["checks"].append(c)
            if not c["ok"]:
                failures.append(f"small-m {name} M={m} {when}: {c}")
                print("WRONG", failures[-1], flush=True)

        for name in ours:
            check(name, "before timing")
        cp.cuda.runtime.deviceSynchronize()
        per: dict[str, list[float]] = {nm: [] for nm in launches}
        held: dict[str, int] = {nm: 0 for nm in launches}
        for _r in range(args.rounds):
            for nm in rng.sample(list(launches), len(launches)):
                cp.cuda.runtime.deviceSynchronize()
                time.sleep(args.idle)
                before = timer.stats["held_chunks"]
                ts = sorted(time_queued(timer, nm, launches[nm], args.iters))
                held[nm] += timer.stats["held_chunks"] - before
                per[nm].append(ts[len(ts) // 2])
                if nm in ours:
                    check(nm, "after timing")
        med = {nm: sorted(ts)[len(ts) // 2] for nm, ts in per.items()}
        t_b = med.get("torch matmul + add")
        lines.append(f"M={m} ({n_sets} input sets of {in_bytes / 2**20:.1f} MiB, L2 {l2 / 2**20:.0f} MiB):")
        for nm in sorted(med, key=med.get):
            sc = score(med[nm], t_b, m, n, k) if nm in ours else None
            info = ours[nm][1] if nm in ours else None
            lines.append(f"   {nm:34s} {med[nm]:.4f}" + (f"  score {sc:.3f}" if sc is not None else "")
                         + (f"  grid {ours[nm][0].grid} {info['schedule']} {info['tile_order']}" if info else "")
                         + ("  held" if held[nm] else "")
                         + "  runs " + " ".join(f"{t:.4f}" for t in per[nm]))
        report["sweep"].append({"m": m, "n_sets": n_sets, "runs": per, "held_chunks": held})
        print("\n".join(lines[-len(med) - 1:]), flush=True)

    # every candidate build (the clustered narrow tiles too, which the GPU tests' knob sweep does
    # not reach) at shapes no tile divides: M = 1 and odd M, N not a multiple of 80 or 128, odd K
    # (300 x 2560 x 704: 11 k-blocks, so the R-in-ring rows wrap round the ring to find adjacent
    # slots; 200 x 1032 x 64: one k-block, slots never used)
    odd = [(1, 2560, 2560), (333, 1032, 520), (777, 1024, 512), (515, 2560, 2560), (300, 2560, 704),
           (200, 1032, 64)]
    if args.orders:  # multi-wave shapes, clustered (7976: a cluster pair half past M) and not
        odd += [(7976, 2560, 2560), (2047, 2560, 1000), (4100, 1032, 520)]
    wrong0 = len(failures)
    n_checks = 0
    for (m, n_, k_) in odd:
        rows = [for_dtype(v, dt) for name, v in SMALL_M.items() if wanted(name)]
        rows += order_rows(*sm90.default_knobs(limits, dt, {"m": m, "n": n_, "k": k_})).values()
        for v in rows:
            if applies(v, m, n_):
                verify(m, n_, k_, v, label="small-m odd shape")
                n_checks += 1
    lines.append(f"odd shapes {odd}: {n_checks} checks, {len(failures) - wrong0} wrong")
    print(lines[-1], flush=True)
    for m in ms:
        one_m(m)
    lines.append(f"queue hold: {timer.stats['held_chunks']} chunks held, "
                 f"{timer.stats['expired_chunks']} ran out")
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_small_m")
    return 0 if not failures else 1


def m_list(text: str) -> list[int]:
    """'7976,8192' -> [7976, 8192]; argparse reports the flag and this message otherwise."""
    try:
        ms = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers separated by commas") from None
    if not ms or min(ms) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every M must be >= 1")
    return ms


def knob_list(text: str) -> list[tuple[str, int, dict[str, Any]]]:
    """'128x160:4,128x160:5:coop:sk264' -> [('128x160', 4, {}), ('128x160', 5, {'pingpong': False,
    'streamk': True, 'dp_tiles': 264})]: a tile of ``TILES``, a stage count, then optionally
    ``coop`` (cooperative consumers, not the engine's choice), ``skN`` (stream-K compiled in, the
    tiles past the first N split over every SM) or ``dp`` (data-parallel, no stream-K code), and
    ``cl1`` / ``cl2`` (no cluster / 2x1 clusters, not ``use_cluster``'s choice), ``whole`` /
    ``halves`` (the last round's tiles whole / as 64-row halves, not ``use_half_tail``'s choice):
    the ``Variant`` fields each sets."""
    out = []
    for part in text.split(","):
        fields = part.split(":")
        tile, st, opts = fields[0], fields[1] if len(fields) > 1 else "", fields[2:]
        over: dict[str, Any] = {}
        bad = tile not in sm90.TILES or not st.isdigit()
        for o in opts:
            if o == "coop":
                over["pingpong"] = False
            elif o == "dp" and "streamk" not in over:
                over["streamk"] = False
            elif o.startswith("sk") and o[2:].isdigit() and "streamk" not in over:
                over.update(streamk=True, dp_tiles=int(o[2:]))
            elif o in ("cl1", "cl2") and "cluster" not in over:
                over["cluster"] = int(o[2])
            elif o in ("whole", "halves") and "half_tail" not in over:
                over["half_tail"] = o == "halves"
            else:
                bad = True
        if bad:
            raise argparse.ArgumentTypeError(f"{part!r}: expected TILE:STAGES[:coop][:skN|:dp][:cl1|:cl2][:whole|:halves] with TILE "
                                             f"one of {', '.join(sm90.TILES)}")
        out.append((tile, int(st), over))
    return out


def also_label(tile: str, stages: int, over: dict[str, Any]) -> str:
    """The table row's name for one ``--also`` entry: 'engine 128x160 s5 coop sk264'."""
    return (f"engine {tile} s{stages}" + (" coop" if over.get("pingpong") is False else "")
            + (f" sk{over['dp_tiles']}" if "dp_tiles" in over else " dp" if over.get("streamk") is False else "")
            + (f" cl{over['cluster']}" if "cluster" in over else "")
            + ((" halves" if over["half_tail"] else " whole") if "half_tail" in over else ""))


def dtype_list(text: str) -> list[str]:
    """'bf16,fp16' -> ['bf16', 'fp16']: the 16-bit dtypes ``--torch-scan`` times."""
    dts = [x.strip() for x in text.split(",") if x.strip()]
    if not dts or any(d not in ("bf16", "fp16") for d in dts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected bf16 and/or fp16, separated by commas")
    return dts


def group_list(text: str) -> list[int]:
    """'2,4,8' -> [2, 4, 8]: M blocks per group, each 1..64."""
    try:
        gs = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected group sizes separated by commas") from None
    if not gs or min(gs) < 1 or max(gs) > 64:
        raise argparse.ArgumentTypeError(f"{text!r}: every group is 1..64 M blocks")
    return gs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--tile160", action="store_true",
                    help="the 128x160 tile (N = 2560 = 16 x 160): correctness, M sweep vs default")
    ap.add_argument("--tf32", action="store_true",
                    help="tf32 on the wgmma path: correctness, then seed timings vs cuBLAS FAST_TF32")
    ap.add_argument("--fp32", action="store_true",
                    help="fp32 by 3xTF32: correctness, accuracy vs FFMA/cuBLAS fp32/1xTF32 against "
                         "fp64, seed timings in alternation, M sweep vs cuBLAS fp32")
    ap.add_argument("--duel", action="store_true",
                    help="seed-shape candidates timed in alternation (drift-free ratios) with "
                         "NVML clock/power per candidate")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--msweep-alt", action="store_true",
                    help="the default build at each M of --m-list, timed in alternation")
    ap.add_argument("--m-list", type=m_list, default=None,
                    help="M values for --msweep-alt (default 7976,8192,7936,8064) or the --pp160 "
                         "sweep, e.g. 1024,2048")
    ap.add_argument("--skip-seed", action="store_true",
                    help="--pp160: correctness and the M sweep only (each M --rounds rounds)")
    ap.add_argument("--cluster", action="store_true",
                    help="2x1 clusters with W multicast vs the default: correctness, seed, M sweep")
    ap.add_argument("--cold-duel", action="store_true",
                    help="seed candidates as the issue times them: 10 + 100 launches after --idle "
                         "seconds of rest, shuffled, --rounds rounds; with --m-list a rested bf16 M "
                         "sweep of the default vs 2x1 clusters, cuBLAS and torch, with rested scores")
    ap.add_argument("--idle", type=float, default=2.0, help="--cold-duel: seconds of rest before each run")
    ap.add_argument("--sweep-dtype", choices=("bf16", "fp16"), default="bf16",
                    help="--cold-duel --m-list and --small-m: the dtype of the rested M sweep")
    ap.add_argument("--small-m", action="store_true",
                    help="small M (--m-list, default 256,512,1024; --sweep-dtype): every build that "
                         "could serve it against cuBLAS and torch, timed as the engine times them "
                         "(rotated input sets, queued launches), rested --idle s, --rounds rounds")
    ap.add_argument("--only", default=None, metavar="REGEX",
                    help="--small-m, --cold-duel: only the table rows whose name matches (the "
                         "default always runs)")
    ap.add_argument("--orders", type=group_list, default=None, metavar="G,...",
                    help="--small-m: the default build also N-fastest, M-fastest and in groups of "
                         "each G M blocks")
    ap.add_argument("--also", type=knob_list, default=[], metavar="TILE:STAGES[:coop][:skN|:dp][:cl1|:cl2][:whole|:halves],...",
                    help="--cold-duel --m-list: also the engine's own build of these knobs at each M "
                         "(coop: cooperative consumers; skN: stream-K past the first N tiles; dp: "
                         "data-parallel, no stream-K code; cl1/cl2: no cluster / 2x1 clusters; "
                         "whole/halves: the last round's tiles whole / in 64-row halves)")
    ap.add_argument("--torch-scan", action="store_true",
                    help="the default build against torch matmul + add and cuBLAS beta=1 at many M "
                         "(SCAN_M: every 63rd from 256 and the sweep's, unless --m-list), hot alternation; exit 1 "
                         "where ours is not faster or wrong")
    ap.add_argument("--scan-dtypes", type=dtype_list, default=["bf16", "fp16"], metavar="DT,...",
                    help="--torch-scan: bf16 and/or fp16")
    ap.add_argument("--tail-alt", action="store_true",
                    help="--cold-duel --m-list: the default build against itself with its partial "
                         "tiles clipped (tail_shift=False) instead of its clustered / unclustered twin")
    ap.add_argument("--tail-bits", action="store_true",
                    help="the partial last tiles moved back to end at M, N: correct and bit for bit "
                         "the unshifted output (session 16)")
    ap.add_argument("--pp160", action="store_true",
                    help="ping-pong on the 128x160 tile: correctness, seed candidates in "
                         "alternation, M sweep vs the default")
    ap.add_argument("--quick", action="store_true",
                    help="ping-pong vs cooperative: correctness, seed timings, short M sweep")
    args = ap.parse_args()
    if args.rounds < 1 or args.iters < 1:
        ap.error(f"--rounds {args.rounds} / --iters {args.iters}: each must be >= 1")
    if not 0 <= args.idle <= 600:
        ap.error(f"--idle {args.idle:g}: 0 to 600 seconds of rest")
    if args.only is not None:
        try:
            re.compile(args.only)
        except re.error as exc:
            ap.error(f"--only {args.only!r}: not a regular expression ({exc})")
    args.m_list_given = args.m_list is not None
    if args.m_list is None:
        args.m_list = [7976, 8192, 7936, 8064]
    limits = limits_of_device()
    sms = limits.sm_count
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {limits}", flush=True)
    out_dir = os.environ.get("OUT")
    report: dict = {"checks": [], "sweep": [], "seed": []}
    failures: list[str] = []

    data: dict[tuple, tuple] = {}

    def get(m: int, n: int, k: int, dt: str):
        key = (m, n, k, dt)
        if key not in data:
            bufs = make_inputs(m, n, k, dt, seed=len(data) + 7)
            data[key] = (bufs, reference(bufs, dt))
        return data[key]

    def forget() -> None:
        """Drop the inputs and references kept so far (a long scan would hold every M's)."""
        data.clear()
        cp.get_default_memory_pool().free_all_blocks()

    def build(m, n, k, v, schedule=None):
        return build_variant(limits, m, n, k, v, schedule)

    def verify(m, n, k, v, schedule=None, label=""):
        bufs, ref = get(m, n, k, v[2])
        b = build(m, n, k, v, schedule)
        bufs["out"].fill(cp.nan if v[2] in F32 else 0xFFFF)  # NaN-poisoned
        Runner(b, bufs, v[2])()
        cp.cuda.runtime.deviceSynchronize()
        c = compare(bufs["out"], ref, v[2])
        c.update(variant=v, shape=(m, n, k), schedule=schedule or "auto", label=label,
                 info_schedule=b.info.get("schedule"))
        report["checks"].append(c)
        if not c["ok"]:
            failures.append(f"{v} {(m, n, k)} {schedule} {label}: {c}")
            print("WRONG", failures[-1], flush=True)
        return c["ok"]

    def timed(m, n, k, v, schedule=None):
        bufs, ref = get(m, n, k, v[2])
        b = build(m, n, k, v, schedule)
        run = Runner(b, bufs, v[2])
        t = time_fn(run, iters=args.iters)["median_ms"]
        c = compare(bufs["out"], ref, v[2])  # after 110 launches: workspace left clean?
        if not c["ok"]:
            failures.append(f"after timing {v} {(m, n, k)} {schedule}: {c}")
            print("WRONG", failures[-1], flush=True)
        return t, b.info

    def forced_checks(m, n, k, v):
        bm, bn, _ = sm90.parse_block_size(v[0])
        verify(m, n, k, v)
        if v[4]:
            tiles = -(-m // bm) * -(-n // bn)
            verify(m, n, k, v, (sms, 0), "all stream-K")
            verify(m, n, k, v, (min(sms, max(1, tiles)) if tiles < sms else sms,
                                max(0, tiles - 5)), "5-tile tail")
            verify(m, n, k, v, (7, 3), "grid 7")

    if args.tile160:
        return tile160_mode(args, limits, report, failures, forced_checks, timed, out_dir)
    if args.tf32:
        return tf32_mode(args, limits, report, failures, forced_checks, timed, get, out_dir)
    if args.fp32:
        return fp32_mode(args, limits, report, failures, forced_checks, timed, get, out_dir, build)
    if args.torch_scan:
        return torch_scan_mode(args, limits, report, failures, verify, get, forget, out_dir, build)
    if args.msweep_alt:
        return msweep_alt_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.duel:
        return duel_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.cluster:
        return cluster_mode(args, limits, report, failures, verify, timed, get, out_dir)
    if args.small_m:
        return small_m_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.tail_bits:
        return tail_bits_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.cold_duel and args.m_list_given:
        return cold_sweep_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.cold_duel:
        return cold_duel_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.pp160:
        return pp160_mode(args, limits, report, failures, verify, forced_checks, get, out_dir, build)
    if args.quick:
        return quick(args, limits, report, failures, forced_checks, timed, get, out_dir)

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
        for sch in sm90.schedule_candidates(m, n, k, 128, 256, sms):
            cands[f"{sch[0]}/{sch[1]}"], _ = timed(m, n, k, base, sch)
        rec["sk_cands"] = cands
        rec["auto_128x256"], info = timed(m, n, k, base)
        rec["auto_sched"] = info["schedule"] + f" grid {info['grid']}"
        rec["auto_128x128s4"], _ = timed(m, n, k, ("128x128", 4, "bf16", True, True))
        dk = sm90.default_knobs(limits, "bf16", {"m": m, "n": n, "k": k})
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
        for sch in sm90.schedule_candidates(m, n, k, 128, 256, sms)[1:]:
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


if __name__ == "__main__":
    sys.exit(main())
