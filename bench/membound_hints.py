"""Cache hints on the memory-bound kernels' streamed loads and stores (GPU machine).

    python3 -m bench.membound_hints [--rounds 20] [--dtype bf16]

add_rmsnorm ([32768, 4096] and [8192, 2560]) and bias_gelu ([8192, 10240]) with their default
knobs, built with load / store hint pairs LD/ST (kernels/vec16.cuh: streamed loads 0 plain,
1 L2 evict-first, 2 256-byte L2 prefetch; final stores 0 plain, 1 .cs, 2 L2 evict-first), and as
the engine builds them ("default": the spec's STREAM_STORES rule). Every variant's outputs must equal the default build's bit for bit (the hints do
not touch the arithmetic). Then the variants and a device-to-device copy of the same byte count
(half read, half written) are timed in alternation: each round runs every candidate for 20
launches with CUDA events around each (``--iters``), after 5 untimed ones (``--round-warmup``),
so drift hits all alike; each round
runs them in a fresh random order, so none always runs right after the same one. The default
build is timed twice, as two modules (a check on the method: they must agree). Prints the
median ms and effective GB/s per candidate (the spec's bytes_moved) and the median per-round
ratio to the default; JSON and the table to $OUT when set.

The engine builds add_rmsnorm on Hopper as the TMA bulk ring (ADR-0006): its rows arrive by bulk
copies, so the load hints leave that build unchanged (the store hints still apply); the hints'
first measurements were made on the register path.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import cupy as cp
import numpy as np

from bench.sm90.gemm import limits_of_device, time_fn
from kernels.add_rmsnorm import AddRmsNormSpec
from kernels.bias_gelu import BiasGeluSpec
from kernels.spec import render_task

HINTS = [None, (0, 0), (0, 1), (1, 1), (2, 1), (0, 2), (2, 2), None]
"""(load hint, store hint) pairs (``variant_source``); None = the build as the engine compiles it."""
CASES = [(AddRmsNormSpec(), {"m": 32768, "n": 4096}), (AddRmsNormSpec(), {"m": 8192, "n": 2560}),
         (BiasGeluSpec(), {"m": 8192, "n": 10240})]
NP = {"bf16": np.uint16, "fp16": np.float16, "fp32": np.float32}


def make_buffers(spec, task, seed: int) -> dict[str, cp.ndarray]:
    """N(0,1) inputs in the task's dtype (bf16 as bit patterns), zeroed outputs."""
    rs = cp.random.RandomState(seed)
    out = {}
    for b in spec.buffers(task):
        if b.role == "input":
            x = rs.standard_normal(b.shape, dtype=cp.float32)
            if b.dtype == "bf16":
                u = x.view(cp.uint32)
                x = ((u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16).astype(cp.uint16)
            else:
                x = x.astype(NP[b.dtype])
            out[b.name] = x
        else:
            out[b.name] = cp.zeros(b.shape, dtype=NP[b.dtype])
    return out


def variant_source(source: str, hints: tuple[int, int] | None) -> str:
    """The build's source with these hints: VEC_LD_HINT, and STREAM_STORES 0 (store hint 0) or
    1 with VEC_ST_HINT (1 .cs, 2 L2 evict-first) in place of the spec's own STREAM_STORES."""
    if hints is None:
        return source
    ld, st = hints
    for v in (0, 1):
        source = source.replace(f"#define STREAM_STORES {v}\n", "")
    head = f"#define VEC_LD_HINT {ld}\n#define STREAM_STORES {int(st > 0)}\n"
    if st:
        head += f"#define VEC_ST_HINT {st}\n"
    return head + source


class Launcher:
    """One build (its source changed by ``variant_source``) bound to one set of buffers."""

    def __init__(self, build, bufs: dict[str, cp.ndarray], hints: tuple[int, int] | None):
        mod = cp.RawModule(code=variant_source(build.source, hints), options=tuple(build.options))
        self.calls = []
        for ln in build.launches:
            args = tuple(bufs[a] if isinstance(a, str) else np.int32(a) for a in ln.args)
            fn = mod.get_function(ln.function)
            if ln.shared_mem_bytes:  # add_rmsnorm's bulk ring (48 KB without asking counts static too)
                fn.max_dynamic_shared_size_bytes = ln.shared_mem_bytes
            self.calls.append((fn, ln.grid, ln.block, args, ln.shared_mem_bytes))

    def __call__(self) -> None:
        for fn, grid, block, args, smem in self.calls:
            fn(grid, block, args, shared_mem=smem)


def variant_list(text: str) -> list[tuple[int, int] | None]:
    """'default,0/0,0/1' -> [None, (0, 0), (0, 1)]; argparse names the flag otherwise."""
    out: list[tuple[int, int] | None] = []
    for item in text.split(","):
        item = item.strip()
        if item == "default":
            out.append(None)
            continue
        try:
            ld, st = (int(x) for x in item.split("/"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: expected 'default' or LD/ST") from None
        if ld not in (0, 1, 2) or st not in (0, 1, 2):
            raise argparse.ArgumentTypeError(f"{item!r}: LD and ST hints are 0, 1 or 2")
        out.append((ld, st))
    return out


def device_copy(src: cp.ndarray, dst: cp.ndarray):
    """A callable: cudaMemcpyAsync device to device of ``src`` into ``dst``."""
    rt = cp.cuda.runtime

    def run() -> None:
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                       cp.cuda.get_current_stream().ptr)

    return run


def shuffled(runs: dict, rounds: int, warm: int = 10, seed: int = 0, round_warmup: int = 5,
             iters: int = 20) -> dict:
    """Like bench.sm90.report.alternate (20 launches per candidate per round, name -> the rounds'
    medians), but each round runs the candidates in a fresh random order, so that no candidate
    always follows the same one (a fixed order put the 134-268 MB copy right before the first)."""
    names = list(runs)
    for fn in runs.values():
        for _ in range(warm):
            fn()
    rng = random.Random(seed)
    per: dict[str, list[float]] = {nm: [] for nm in names}
    for _r in range(rounds):
        for nm in rng.sample(names, len(names)):
            per[nm].append(time_fn(runs[nm], warmup=round_warmup, iters=iters)["median_ms"])
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    ap.add_argument("--iters", type=int, default=20, help="timed launches per candidate per round")
    ap.add_argument("--round-warmup", type=int, default=5,
                    help="untimed launches before each candidate's turn (10 with --iters 100 is "
                         "the engine's own method)")
    ap.add_argument("--unfused", action="store_true", help="fusion off (two launches each)")
    ap.add_argument("--variants", type=variant_list, default=HINTS,
                    help="comma list of 'default' and LD/ST pairs, e.g. default,0/0,0/1")
    args = ap.parse_args()
    if args.rounds < 1 or args.iters < 1 or args.round_warmup < 0:
        ap.error("--rounds and --iters must be >= 1, --round-warmup >= 0")
    limits = limits_of_device()
    lines, report = [], []
    for spec, shape in CASES:
        task = SimpleNamespace(shape=shape, dtype=args.dtype, block_size=None,
                               memory_pipelining=None, fusion=not args.unfused)
        build = render_task(spec, task, limits)
        nbytes = spec.bytes_moved(shape, args.dtype)
        bufs = make_buffers(spec, task, seed=5)
        outputs = [b.name for b in spec.buffers(task) if b.role == "output"]
        runs, ref = {}, None
        for hints in args.variants:
            name = "default build" if hints is None else f"ld {hints[0]} st {hints[1]}"
            name += " (again)" if name in runs else ""
            run = Launcher(build, bufs, hints)
            for o in outputs:
                bufs[o].fill(0)
            run()
            cp.cuda.runtime.deviceSynchronize()
            got = [bufs[o].view(cp.uint8).copy() for o in outputs]
            if ref is None:
                ref = got
            elif not all(bool((g == r).all()) for g, r in zip(got, ref, strict=True)):
                print(f"WRONG {spec.name} {shape} {name}: outputs differ from the default build")
                return 1
            runs[name] = run
        src = cp.empty(nbytes // 2, dtype=cp.uint8)
        dst = cp.empty_like(src)
        runs["copy (same bytes)"] = device_copy(src, dst)
        per = shuffled(runs, args.rounds, round_warmup=args.round_warmup, iters=args.iters)
        first = next(iter(per))
        head = (f"{spec.name} {shape['m']}x{shape['n']} {args.dtype} ({build.info.get('threads')} threads"
                f"{', unfused' if args.unfused else ''}; default stores {build.info.get('stores', 'plain')})")
        lines.append(f"{head}: {args.rounds} shuffled rounds x {args.iters} launches "
                     f"(after {args.round_warmup} untimed)")
        for nm, ts in per.items():
            srt = sorted(ts)
            med = srt[len(srt) // 2]
            ratios = sorted(a / b for a, b in zip(ts, per[first], strict=True))
            lines.append(f"   {nm:22s} {med:8.4f} ms {nbytes / med / 1e6:7.0f} GB/s  ratio "
                         f"{ratios[len(ratios) // 2]:.3f}  rounds (us): "
                         + " ".join(f"{1e3 * t:.0f}" for t in ts))
            report.append({"case": head, "name": nm, "rounds": ts, "bytes": nbytes})
        print("\n".join(lines[-len(per) - 1:]), flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "membound_hints.txt").write_text("\n".join(lines) + "\n")
        Path(out, "membound_hints.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
