"""add_rmsnorm's rows through the TMA engine: bulk-copy loads into a shared-memory ring (GPU machine).

    python3 -m bench.membound_bulk [--rounds 15] [--dtypes bf16,fp16,fp32]

Hopper's path of add_rmsnorm (``AR_BULK`` in kernels/add_rmsnorm.cu, the engine's default on
compute capability >= 9.0): thread 0 copies whole rows of x and r into a ring of S shared-memory
slots with ``cp.async.bulk`` (S rows in flight per block, no register per byte in flight), the
threads read their vectors from the slot. For [32768, 4096] and [8192, 2560] it builds the engine's
default, the register path as the engine builds it for an older GPU (the default before), and bulk
variants (threads, blocks per SM, slots; 1 slot = MEMORY_PIPELINING off). Each variant is checked
first (outputs bit-identical to the register path's build with the same thread count: the same
per-thread order of every sum), then all of them and a device-to-device copy of the same bytes are
timed in alternation (``membound_hints.shuffled``: a fresh random order each round). Prints median
ms, effective GB/s (the spec's bytes_moved) and the median per-round ratio to the engine's build;
table and JSON to $OUT when set.

A variant that also wrote both outputs back over the slot and stored them by bulk copies measured
level with or slower than storing from registers, so it is not offered (ADR-0006).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import cupy as cp

from bench.membound_hints import Launcher, device_copy, make_buffers, shuffled
from bench.sm90.gemm import limits_of_device
from kernels.add_rmsnorm import BULK_STATIC_SMEM, RESERVED_SMEM, SPEC, ring_bytes, vpt_for
from kernels.rowwise import threads_per_sm
from kernels.spec import Build, Launch, render_task

SHAPES = ({"m": 32768, "n": 4096}, {"m": 8192, "n": 2560})
VARIANTS = [  # (threads, blocks per SM, slots)
    (256, 4, 3), (256, 2, 4), (256, 3, 4), (256, 4, 1), (512, 2, 3), (512, 2, 1),
    (128, 4, 3), (128, 6, 2), (128, 4, 1),
]


def bulk_build(dtype: str, shape: dict, variant: tuple, sms: int) -> Build:
    """One bulk variant (threads, blocks per SM, slots) as a Build for ``membound_hints.Launcher``:
    the engine's kernel source with these launch bounds and this grid, one slot = off."""
    threads, minb, slots = variant
    stages = slots if slots > 1 else 0
    vpt = vpt_for(shape["n"], dtype, threads)
    launch = Launch("add_rmsnorm", (max(1, min(shape["m"], sms * minb)), 1, 1), (threads, 1, 1),
                    ring_bytes(shape["n"], dtype, stages),
                    ("x", "r", "weight", "residual_out", "out", shape["m"], shape["n"]))
    return Build(source=SPEC.source(dtype, threads, vpt, stages, minb, True, bulk=True),
                 functions=("add_rmsnorm",), launches=(launch,), options=("-std=c++17",))


def fits(variant: tuple, shape: dict, dtype: str, limits) -> bool:
    threads, minb, slots = variant
    smem = ring_bytes(shape["n"], dtype, slots) + BULK_STATIC_SMEM
    return (vpt_for(shape["n"], dtype, threads) > 0 and smem <= limits.shared_memory_per_block_bytes
            and minb * (smem + RESERVED_SMEM) <= limits.shared_memory_per_sm_bytes
            and minb * threads <= threads_per_sm(limits))


def outputs_of(run, bufs, names=("residual_out", "out")) -> list[bytes]:
    """The outputs' bytes after one launch into zeroed buffers."""
    for o in names:
        bufs[o].fill(0)
    run()
    cp.cuda.runtime.deviceSynchronize()
    return [bufs[o].view(cp.uint8).get().tobytes() for o in names]


def timed(label: str, runs: dict, nbytes: int, args, lines: list, report: list, key: dict) -> None:
    """Time ``runs`` and a device copy of the same bytes in shuffled rounds; append the table."""
    src = cp.empty(nbytes // 2, dtype=cp.uint8)
    runs["copy (same bytes)"] = device_copy(src, cp.empty_like(src))
    per = shuffled(runs, args.rounds, iters=args.iters)
    first = next(iter(per))
    lines.append(f"{label}: {args.rounds} shuffled rounds x {args.iters} launches")
    for nm, ts in per.items():
        srt = sorted(ts)
        med = srt[len(srt) // 2]
        ratios = sorted(a / b for a, b in zip(ts, per[first], strict=True))
        lines.append(f"   {nm:34s} {med:8.4f} ms {nbytes / med / 1e6:7.0f} GB/s  ratio "
                     f"{ratios[len(ratios) // 2]:.3f}  best {srt[0]:.4f}")
        report.append({**key, "name": nm, "rounds": ts, "bytes": nbytes})
    print("\n".join(lines[-len(per) - 1:]), flush=True)


def rmsnorm_section(dtype: str, shape: dict, limits, args, lines: list, report: list) -> int:
    """add_rmsnorm: the engine's build, the register path, the bulk variants; returns wrong ones."""
    wrong = 0
    task = SimpleNamespace(shape=shape, dtype=dtype, block_size=None, memory_pipelining=None, fusion=True)
    build = render_task(SPEC, task, limits)
    bufs = make_buffers(SPEC, task, seed=5)
    older = replace(limits, compute_capability=(8, 0))  # the register path, as before
    reg = render_task(SPEC, task, older)
    runs = {f"engine ({build.info['threads']} thr x{build.info['blocks_per_sm']}, "
            f"{build.info['rows_in_flight']} rows)": Launcher(build, bufs, None),
            f"registers ({reg.info['threads']} thr x{reg.info['blocks_per_sm']}, "
            f"{reg.info['rows_in_flight']} rows)": Launcher(reg, bufs, None)}
    refs: dict[int, list] = {}
    for v in VARIANTS:
        if not fits(v, shape, dtype, limits):
            continue
        threads = v[0]
        if threads not in refs:  # the register path with this thread count
            t2 = SimpleNamespace(**{**vars(task), "block_size": str(threads), "memory_pipelining": 2})
            refs[threads] = outputs_of(Launcher(render_task(SPEC, t2, older), bufs, None), bufs)
        name = f"bulk {v[0]} thr x{v[1]}/SM, {v[2]} slot{'s' if v[2] > 1 else ''}"
        print(f"checking {dtype} {shape} {name}", flush=True)  # a hang shows where
        run = Launcher(bulk_build(dtype, shape, v, limits.sm_count), bufs, None)
        if outputs_of(run, bufs) != refs[threads]:
            wrong += 1
            lines.append(f"WRONG {dtype} {shape} {name}: outputs differ from the register path")
            print(lines[-1], flush=True)
            continue
        runs[name] = run
    timed(f"add_rmsnorm {shape['m']}x{shape['n']} {dtype}", runs, SPEC.bytes_moved(shape, dtype), args,
          lines, report, {"kernel": "add_rmsnorm", "dtype": dtype, "shape": shape})
    return wrong


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtypes", default="bf16,fp16,fp32")
    args = ap.parse_args()
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be >= 1")
    bad = sorted(set(args.dtypes.split(",")) - {"bf16", "fp16", "fp32"})
    if bad:
        ap.error(f"--dtypes: unknown {', '.join(bad)}; use bf16, fp16, fp32")
    limits = limits_of_device()
    lines: list[str] = []
    report: list[dict] = []
    wrong = 0
    for dtype in args.dtypes.split(","):
        for shape in SHAPES:
            wrong += rmsnorm_section(dtype, shape, limits, args, lines, report)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "membound_bulk.txt").write_text("\n".join(lines) + "\n")
        Path(out, "membound_bulk.json").write_text(json.dumps(report, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
