"""Check and time the skinny (decode) GEMM + residual against cuBLAS (GPU machine).

    python3 -m bench.skinny_probe [--shapes 1x4096x4096,8x4096x777] [--dtypes bf16,fp16]
        [--out DIR] [--iters 100] [--warmup 10] [--jobs 16] [--plans 16x16/4/4/1/128/2,...]

For each shape MxNxK and dtype: the default plan and a modest list of knob combinations (tiles
around the default's BM, stages, split-K, warps, A from global or shared memory (schedule.a_smem,
both where K % 8 == 0); pruned by ``check``) are compiled in parallel
(NVRTC, sm_90a, one process per core), run once on N(0,1) inputs into an output poisoned with
0xFFFF and compared with a float64 reference (A @ W^T + R: max |out - ref| / max(1, rms(ref)) under
2e-2 for bf16, 5e-3 for fp16, nothing left unwritten), timed with CUDA events (``--warmup``
launches, then the median of ``--iters`` single-launch timings, rotating enough input sets that
W is not served from the 50 MB L2), checked once more after the timing (the split-K counters must
have reset), and set beside cuBLAS gemmEx (beta = 1 into a copy of R). ``--plans`` replaces the
list with the default and the given builds (tile/stages/warps/split_k/bulk_k/w_bulk each). Prints a table per shape;
``--out`` writes every row as JSON. Exits 1 if any build is wrong, 2 on malformed arguments.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import functools
import hashlib
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from engine import encode_tensor_map, tensor_map_kernel_arg
from kernels import gemm_residual_skinny as sk
from kernels.spec import DeviceLimits, TensorMapArg

DEFAULT_NK = ((4096, 4096), (5120, 5120), (2560, 2560), (8192, 8192), (4096, 14336), (4096, 777))
DEFAULT_SHAPES = ",".join(f"{m}x{n}x{k}" for m in (1, 4, 8, 16, 32, 64) for n, k in DEFAULT_NK)
TOL = {"bf16": 2e-2, "fp16": 5e-3}
"""Fused builds; unfused ones round twice (the GEMM's output, then the sum), which doubles the bound."""
L2_ROTATE_BYTES = 100 * 2**20
"""Input sets rotate until their W together exceed this (2 x the H200's 50 MB L2)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxNxK, 1 <= M <= 64")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--out", default=None, help="directory for skinny_probe.json")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes")
    ap.add_argument("--bulk", choices=("with", "without", "only"), default="with",
                    help="W into a shared-memory ring (schedule.w_bulk) beside the register ring, not at all, or only")
    ap.add_argument("--bulk-modes", default="1,2", help="the w_bulk values to try: 1 row copies, 2 TMA boxes")
    ap.add_argument("--plans", default=None,
                    help="only the default and these builds: comma-separated BMxBN/stages/warps/split_k/bulk_k/w_bulk")
    args = ap.parse_args(argv)
    if args.plans is not None:
        try:
            args.plans = [parse_plan(x) for x in args.plans.split(",")]
        except ValueError:
            ap.error(f"--plans: {args.plans!r} is not a comma-separated list of BMxBN/stages/warps/split_k/bulk_k/w_bulk")
    try:
        args.shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    except ValueError:
        ap.error(f"--shapes: {args.shapes!r} is not a comma-separated list of MxNxK")
    for s in args.shapes:
        if len(s) != 3 or not 1 <= s[0] <= sk.MAX_M or min(s) < 1:
            ap.error(f"--shapes: {'x'.join(map(str, s))} needs three positive sizes and M <= {sk.MAX_M}")
    args.dtypes = args.dtypes.split(",")
    try:
        args.bulk_modes = tuple(int(x) for x in args.bulk_modes.split(","))
    except ValueError:
        ap.error(f"--bulk-modes: {args.bulk_modes!r} is not a comma-separated list of 1 and 2")
    if not set(args.bulk_modes) <= {1, 2}:
        ap.error(f"--bulk-modes: {args.bulk_modes} (1 row copies, 2 TMA boxes)")
    if not args.dtypes or any(d not in sk.DTYPES for d in args.dtypes):
        ap.error(f"--dtypes: {','.join(args.dtypes)} (choose from {','.join(sk.DTYPES)})")
    for flag in ("iters", "warmup", "jobs"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag}: must be >= 1")
    return args


def parse_plan(text: str) -> dict:
    """The knobs of one ``--plans`` entry, BMxBN/stages/warps/split_k/bulk_k/w_bulk (w_bulk 1 or 2)."""
    tile, *nums = text.split("/")
    sk.parse_block_size(tile)
    st, warps, split, bk, mode = (int(x) for x in nums)
    if mode not in (1, 2):
        raise ValueError(text)
    return dict(block_size=tile, stages=st, warps=warps, split_k=split, bulk_k=bk, w_bulk=mode)


def add_shape_and_plans(ap: argparse.ArgumentParser) -> None:
    """The probes' ``--shape MxNxK`` (decode M) and ``--plans`` flags; ``read_shape_and_plans`` checks them."""
    ap.add_argument("--shape", required=True, help=f"MxNxK, 1 <= M <= {sk.MAX_M}")
    ap.add_argument("--plans", default="", help="BMxBN/stages/warps/split_k/bulk_k/w_bulk, comma-separated")


def read_shape_and_plans(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``args.shape`` as (M, N, K) and ``args.plans`` as knob dicts (``parse_plan``), or ``ap.error``
    (exit 2) naming the flag."""
    raw = args.shape
    try:
        args.shape = tuple(int(x) for x in raw.split("x"))
        if len(args.shape) != 3 or min(args.shape) < 1 or args.shape[0] > sk.MAX_M:
            raise ValueError(raw)
    except ValueError:
        ap.error(f"--shape: {raw!r} is not MxNxK with 1 <= M <= {sk.MAX_M}")
    try:
        args.plans = [parse_plan(x) for x in args.plans.split(",") if x]
    except ValueError:
        ap.error(f"--plans: {args.plans!r} is not a comma-separated list of BMxBN/stages/warps/split_k/bulk_k/w_bulk")


def listed(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, knobs: list[dict]) -> list[sk.SkinnyPlan]:
    """The default plan, then each of ``knobs`` that ``check`` accepts at this shape."""
    plans = [sk.plan(m, n, k, dtype, limits)]
    for kn in knobs:
        if not sk.check(m, n, k, dtype, limits, kn["block_size"], kn["stages"], kn["warps"], kn["split_k"],
                        w_bulk=kn["w_bulk"], bulk_k=kn["bulk_k"]):
            plans.append(sk.plan(m, n, k, dtype, limits, **kn))
    return _unique(plans)


def bulk_variants(m: int, n: int, k: int, dtype: str, limits: DeviceLimits,
                  modes: tuple[int, ...] = (1, 2)) -> list[sk.SkinnyPlan]:
    """Each w_bulk mode (where bulk copies apply): the planner's pick for it, then tiles of the
    default BM x bulk_k x the stages that fit x split-K around each combination's own pick (half,
    same, double), 4 warps (8 at the pick); pruned by ``check``."""
    if not sk.bulk_applies(k, limits):
        return []
    plans = []
    for mode in modes:
        pick = sk.plan(m, n, k, dtype, limits, w_bulk=mode)
        plans += [pick, sk.plan(m, n, k, dtype, limits, w_bulk=mode, warps=8, block_size=pick.block_size)]
        for bn in sk.BN_OPTIONS:
            tile = f"{pick.bm}x{bn}"
            for bk in sk.BULK_K_OPTIONS:
                for stages in sk.bulk_stages_that_fit(pick.bm, bn, 4, bk, limits, mode):
                    auto = sk.plan(m, n, k, dtype, limits, block_size=tile, stages=stages, w_bulk=mode,
                                   bulk_k=bk).split_k
                    for split in sorted({max(1, auto // 2), auto, min(16, auto * 2)}):
                        split = max(s for s in sk.SPLIT_K_OPTIONS if s <= split)
                        if not sk.check(m, n, k, dtype, limits, tile, stages, 4, split, w_bulk=mode, bulk_k=bk):
                            plans.append(sk.plan(m, n, k, dtype, limits, block_size=tile, stages=stages,
                                                 split_k=split, w_bulk=mode, bulk_k=bk))
    return plans


def variants(m: int, n: int, k: int, dtype: str, limits: DeviceLimits, bulk: str = "with",
             modes: tuple[int, ...] = (1, 2)) -> list[sk.SkinnyPlan]:
    """The default plan first (fused and not), the default of the other a_smem value, then tiles of
    the default's BM (and the next smaller BM where it still needs at most 2 CTAs along M) x
    a_smem (0, 1 where K % 8 == 0) x stages x split-K around each tile's default for that a_smem,
    4 and 8 warps; pruned by ``check``, deduplicated."""
    base = sk.plan(m, n, k, dtype, limits)
    plans = [base, sk.plan(m, n, k, dtype, limits, fuse=False)]
    if bulk == "only":
        return _unique(plans + bulk_variants(m, n, k, dtype, limits, modes))
    smem_values = [a for a in sk.A_SMEM_OPTIONS if a == 0 or k % 8 == 0]
    plans += [sk.plan(m, n, k, dtype, limits, a_smem=a) for a in smem_values if a != base.a_smem]
    bms = [base.bm] + [b for b in sk.BM_OPTIONS if b < base.bm and 2 * b >= m][-1:]
    for bm in bms:
        for bn in (16, 32, 64, 128):
            tile = f"{bm}x{bn}"
            for a_smem in smem_values:
                for warps in (4, 8):
                    auto = sk.plan(m, n, k, dtype, limits, block_size=tile, warps=warps, a_smem=a_smem).split_k
                    splits = {auto, max(1, auto // 2), min(16, auto * 2)} if warps == 4 else {auto}
                    for stages in (2, 4, 6, 8) if warps == 4 else (4,):
                        for split in sorted(splits):
                            split = max(s for s in sk.SPLIT_K_OPTIONS if s <= split)
                            if not sk.check(m, n, k, dtype, limits, tile, stages, warps, split, a_smem=a_smem):
                                plans.append(sk.plan(m, n, k, dtype, limits, block_size=tile, stages=stages,
                                                     warps=warps, split_k=split, a_smem=a_smem))
    if bulk == "with":
        plans += bulk_variants(m, n, k, dtype, limits, modes)
    return _unique(plans)


def _unique(plans: list[sk.SkinnyPlan]) -> list[sk.SkinnyPlan]:
    seen, out = set(), []
    for p in plans:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _compile(job: tuple[str, str]) -> tuple[bytes, tuple[int, int], str]:
    """(cubin, (registers, spill bytes) of the GEMM, the log when it failed) of (source, arch)."""
    from kernels.nvrtc_check import compile_cubin

    rep = compile_cubin(job[0], job[1], ("--std=c++17",))
    f = rep.functions.get(sk.KERNEL)
    regs = (f.registers, f.spill_store_bytes + f.spill_load_bytes) if f else (-1, -1)
    return rep.cubin, regs, "" if rep.ok else rep.log


def compile_all(sources: list[str], arch: str, jobs: int) -> dict[str, tuple[bytes, tuple[int, int], str]]:
    """Each distinct source compiled once for ``arch``, ``jobs`` processes at a time."""
    uniq = sorted(set(sources))
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        return dict(zip(uniq, pool.map(_compile, [(s, arch) for s in uniq]), strict=True))


@functools.cache
def _converters(cp):
    """(fp32 -> bf16 bits, rounded to nearest even; bf16 bits -> float64), as engine/backends/cuda.py."""
    f2b = cp.ElementwiseKernel("float32 x", "uint16 y", "unsigned int u = __float_as_uint(x); "
                               "u += 0x7FFFu + ((u >> 16) & 1u); y = (unsigned short)(u >> 16);", "skp_f2b")
    b2d = cp.ElementwiseKernel("uint16 b", "float64 y", "y = (double)__uint_as_float(((unsigned int)b) << 16);",
                               "skp_b2d")
    return f2b, b2d


class Bench:
    """Inputs, reference and timers for one shape and dtype on the current device."""

    def __init__(self, cp, m: int, n: int, k: int, dtype: str, warmup: int, iters: int) -> None:
        self.cp, self.m, self.n, self.k, self.dtype = cp, m, n, k, dtype
        self.warmup, self.iters = warmup, iters
        sets = max(2, -(-L2_ROTATE_BYTES // (n * k * 2)))
        self.sets = [tuple(self._rand(shape) for shape in ((m, k), (n, k), (m, n))) for _ in range(sets)]
        a, w, r = (self._f64(x) for x in self.sets[0])
        self.ref = a @ w.T + r
        self.scale = max(1.0, float(cp.sqrt(cp.mean(self.ref * self.ref))))
        self.out = cp.empty((m, n), cp.uint16)

    def _rand(self, shape):
        cp = self.cp
        x = cp.random.standard_normal(shape, dtype=cp.float32)
        if self.dtype == "fp16":
            return x.astype(cp.float16).view(cp.uint16)
        return _converters(cp)[0](x)

    def _f64(self, x):
        cp = self.cp
        if self.dtype == "fp16":
            return x.view(cp.float16).astype(cp.float64)
        return _converters(cp)[1](x)

    def error(self) -> float:
        """max |out - ref| / max(1, rms(ref)); inf when an element is NaN (unwritten or broken)."""
        got = self._f64(self.out)
        if bool(self.cp.isnan(got).any()):
            return float("inf")
        return float(self.cp.abs(got - self.ref).max()) / self.scale

    def time(self, run) -> float:
        """Median ms of single launches (``run(i)`` runs on input set i), after the warm-ups
        (``engine.launch_times``)."""
        from engine import launch_times

        n = len(self.sets)
        return statistics.median(launch_times(lambda i: run(i % n), self.warmup, self.iters))

    def cublas_ms(self) -> float:
        """cuBLAS gemmEx beta = 1 (the engine's ``Blas``) into a copy of R per input set."""
        from engine import Blas

        blas = Blas(self.dtype)
        calls = [blas.bind(a, w, r.copy(), 1.0, 1.0) for a, w, r in self.sets]
        return self.time(lambda i: calls[i]())


def launcher(cp, bench: Bench, p: sk.SkinnyPlan, cubin: bytes, tmp: Path, dependent: bool = True):
    """``run(i)``: the plan's launches (from ``cubin``, loaded as ``run.module``) on input set i into
    ``bench.out``, arguments packed once per input set; launches the build marks ``pdl`` go through programmatic dependent
    launch as the engine's do, unless ``dependent`` is False (``engine.pdl_enabled``)."""
    from engine import DependentLaunch, pdl_enabled

    path = tmp / f"{hashlib.sha1(cubin).hexdigest()}.cubin"
    path.write_bytes(cubin)
    mod = cp.RawModule(path=str(path))
    build = sk.render(p, bench.m, bench.n, bench.k, bench.dtype)
    ws = cp.zeros(build.scratch[0].shape, cp.float32)
    fns = [(mod.get_function(launch.function), launch) for launch in build.launches]
    for fn, launch in fns:  # as the engine does: ask for any dynamic shared memory a launch takes
        if launch.shared_mem_bytes:
            fn.max_dynamic_shared_size_bytes = launch.shared_mem_bytes
    cc = cp.cuda.Device().compute_capability  # e.g. "90"
    dependent = dependent and pdl_enabled((int(cc[:-1]), int(cc[-1])))

    def arg(bufs, x):
        if isinstance(x, str):
            return bufs[x]
        if isinstance(x, TensorMapArg):
            return tensor_map_kernel_arg(encode_tensor_map(x, bufs[x.buffer].data.ptr, bench.dtype))
        return np.int32(x)

    def bound(fn, launch, args):
        if dependent and launch.pdl:
            return DependentLaunch(fn, launch.grid, launch.block, args, launch.shared_mem_bytes)
        return lambda: fn(launch.grid, launch.block, args, shared_mem=launch.shared_mem_bytes)

    per_set = []
    for a, w, r in bench.sets:
        bufs = {"a": a, "w": w, "r": r, "out": bench.out, "ws": ws}
        per_set.append([bound(fn, launch, tuple(arg(bufs, x) for x in launch.args)) for fn, launch in fns])

    def run(i: int) -> None:
        for launch in per_set[i]:
            launch()

    run.module = mod  # its globals (e.g. bench.kernel_span's stamps)
    return run


def run_plan(cp, bench: Bench, p: sk.SkinnyPlan, cubin: bytes, tmp: Path) -> tuple[float, float, float]:
    """(error first run, error after timing, median ms) of one plan."""
    run = launcher(cp, bench, p, cubin, tmp)

    def checked() -> float:
        bench.out.fill(0xFFFF)
        run(0)
        cp.cuda.get_current_stream().synchronize()
        return bench.error()

    first = checked()
    ms = bench.time(run)
    return first, checked(), ms


def save(out: str | None, rows: list[dict]) -> None:
    """All rows so far as ``out``/skinny_probe.json (rewritten after each shape and dtype)."""
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "skinny_probe.json").write_text(json.dumps(rows, indent=1))


def main(args: argparse.Namespace) -> int:
    import cupy as cp

    from engine import device_limits

    limits, _ = device_limits(0, "device")
    def builds(s, d):
        if args.plans is not None:
            return listed(*s, d, limits, args.plans)
        return variants(*s, d, limits, args.bulk, args.bulk_modes)

    todo = [(s, d, p) for s in args.shapes for d in args.dtypes for p in builds(s, d)]
    print(f"{len(todo)} runs; compiling ...", flush=True)
    built = compile_all([sk.source(p, d) for _, d, p in todo], limits.arch, args.jobs)
    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for (m, n, k) in args.shapes:
            for dtype in args.dtypes:
                bench = Bench(cp, m, n, k, dtype, args.warmup, args.iters)
                blas = bench.cublas_ms()
                print(f"\n{m}x{n}x{k} {dtype}: cuBLAS {blas * 1e3:.1f} us "
                      f"({n * k * 2 / blas / 1e6:.0f} GB/s of W), {len(bench.sets)} input sets")
                print(f"{'tile':>7} {'st':>2} {'wp':>2} {'sk':>2} {'as':>2} {'bulk':>6} {'fuse':>4} {'grid':>13} {'regs':>4} "
                      f"{'us':>8} {'GB/s W':>7} {'/cuBLAS':>7} correct")
                for p in (q for s, d, q in todo if s == (m, n, k) and d == dtype):
                    cubin, regs, log = built[sk.source(p, dtype)]
                    row = {"shape": [m, n, k], "dtype": dtype, "tile": p.block_size, "stages": p.stages,
                           "warps": p.warps, "split_k": p.split_k, "a_smem": p.a_smem, "fuse": p.fuse,
                           "w_bulk": p.w_bulk, "bulk_k": p.bulk_k,
                           "grid": list(p.grid), "smem_bytes": p.smem_bytes,
                           "regs": regs[0], "spill_bytes": regs[1], "cublas_ms": blas,
                           "default": p == sk.plan(m, n, k, dtype, limits, fuse=p.fuse)}
                    if log:
                        row.update(ms=None, correct=False, error=log[-2000:])
                    else:
                        try:
                            e1, e2, ms = run_plan(cp, bench, p, cubin, Path(tmp))
                        except Exception:  # a fault leaves the context unusable: keep what was measured
                            print(f"{p.block_size} st{p.stages} w{p.warps} sk{p.split_k} a_smem={p.a_smem} "
                                  f"fuse={p.fuse}: failed", flush=True)
                            save(args.out, rows)
                            raise
                        ok = max(e1, e2) < TOL[dtype] * (1 if p.fuse else 2)
                        row.update(ms=ms, err=max(e1, e2), correct=ok, gbps_w=n * k * 2 / ms / 1e6,
                                   ratio=ms / blas)
                    bad += not row["correct"]
                    rows.append(row)
                    us = f"{row['ms'] * 1e3:8.2f}" if row["ms"] else "  failed"
                    print(f"{p.block_size:>7} {p.stages:>2} {p.warps:>2} {p.split_k:>2} {p.a_smem:>2} "
                          f"{p.w_bulk}/{p.bulk_k:<4} "
                          f"{'on' if p.fuse else 'off':>4} "
                          f"{str(p.grid):>13} {row['regs']:>4} {us} {row.get('gbps_w', 0):7.0f} "
                          f"{row.get('ratio', 0):7.2f} {'yes' if row['correct'] else 'NO'}"
                          f"{' default' if row['default'] else ''}", flush=True)
                save(args.out, rows)
    print(f"\n{len(rows)} runs, {bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(parse_args()))
