"""Compile, verify and time the Hopper-native gemm_residual path (schedules and knobs), on the GPU.

    python -m bench.sm90_gemm [MODE] [--iters 100] [--rounds 40] [--m-list 1024,2048] ...

Each mode is a module of ``bench.sm90``; with none, ``sweep``: correctness of a table of variants,
then a bf16 M sweep (N = K = 2560) of the stream-K schedules of 128x256 s3, the data-parallel
kernel, 128x128 s4 and the default knobs against torch matmul + add and cuBLAS beta=1, and the seed
shape in bf16 and fp16. Prints tables with the score S = 1/(1 + (T_k - T_SOL)/(T_b - T_SOL)),
T_SOL = 2MNK/989.4e12; tables and JSON to $OUT when set.
--tf32 / --fp32: the fp32-data paths (one tf32 product; 3xTF32) against cuBLAS, accuracy for fp32.
--duel: seed candidates in alternation (hot card); --msweep-alt: the default build at each M of
--m-list in alternation.
--cold-duel: the seed candidates as the issue times them (10 + 100 launches after a rest); with
--m-list, a rested M sweep of the default against its twins, cuBLAS and torch (``cold_sweep``).
--torch-scan: the default against torch matmul + add at many M (exit 1 where ours is not faster).
--small-m: every build that could serve M = 256, 512, 1024 (--m-list) against cuBLAS and torch, timed
as the engine times them: rotated input sets, queued launches, rested, shuffled rounds.
--tail-bits: every build with its partial last tiles moved back to end at M, N (tail_shift) against
the same build with them clipped: correct, and bit for bit the same output where the engine shifts.
Variants are (tile, stages, dtype, fuse, streamk[, pingpong[, cluster]]); None = the module's choice.
Uses CuPy directly; bf16 is held as uint16 bits.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import cupy as cp

from bench.sm90.args import dtype_list, group_list, knob_list, m_list
from bench.sm90.cold_duel import cold_duel_mode
from bench.sm90.cold_sweep import cold_sweep_mode
from bench.sm90.duel import duel_mode
from bench.sm90.fp32 import fp32_mode
from bench.sm90.gemm import F32, Runner, compare, limits_of_device, make_inputs, reference, time_fn
from bench.sm90.msweep_alt import msweep_alt_mode
from bench.sm90.small_m import small_m_mode
from bench.sm90.sweep import sweep_mode
from bench.sm90.tail_bits import tail_bits_mode
from bench.sm90.tf32 import tf32_mode
from bench.sm90.torch_scan import torch_scan_mode
from bench.sm90.variants import build_variant
from kernels.spec import Tile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--no-torch", action="store_true")
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
                    help="M values for --msweep-alt (default 7976,8192,7936,8064), --cold-duel's "
                         "rested sweep, --small-m or --torch-scan, e.g. 1024,2048")
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
                         "the unshifted output")
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
        tile = Tile.parse(v[0])
        bm, bn = tile.m, int(tile.n or 0)
        verify(m, n, k, v)
        if v[4]:
            tiles = -(-m // bm) * -(-n // bn)
            verify(m, n, k, v, (sms, 0), "all stream-K")
            verify(m, n, k, v, (min(sms, max(1, tiles)) if tiles < sms else sms,
                                max(0, tiles - 5)), "5-tile tail")
            verify(m, n, k, v, (7, 3), "grid 7")

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
    if args.small_m:
        return small_m_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.tail_bits:
        return tail_bits_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.cold_duel and args.m_list_given:
        return cold_sweep_mode(args, limits, report, failures, verify, get, out_dir, build)
    if args.cold_duel:
        return cold_duel_mode(args, limits, report, failures, verify, get, out_dir, build)

    return sweep_mode(args, limits, report, failures, forced_checks, timed, get, out_dir)


if __name__ == "__main__":
    sys.exit(main())
