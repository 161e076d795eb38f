"""The decode path's own span on the GPU: each CTA stamps ``%globaltimer`` (and its SM) as it starts
and each warp as it ends, so a launch's first start to last end can be set beside its CUDA-event
time, and the spread of the CTAs' ends shows a tail.

    python3 -m bench.kernel_span --shape 16x8192x8192 [--plans 16x32/6/4/1/128/2,...] [--launches 30]

Builds as ``bench.skinny_probe --plans`` (the default plan first), instrumented; the stamps cost one
store a CTA and one atomic a warp. Exits 2 on malformed arguments.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from bench import skinny_probe as sp
from kernels import gemm_residual_skinny as sk

MAX_CTAS = 16384
SIGNATURE = 'extern "C" __global__ void __launch_bounds__(THREADS, 1)\ngemm_residual_skinny('
STAMPS = f"""__device__ unsigned long long span_stamp[2 * {MAX_CTAS}];
__device__ unsigned int span_sm[{MAX_CTAS}];
__device__ __forceinline__ unsigned long long span_now() {{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}}
__device__ __forceinline__ unsigned int span_cta() {{
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}}
struct SpanEnd {{
    __device__ ~SpanEnd() {{
        if ((threadIdx.x & 31) == 0) atomicMax(&span_stamp[2 * span_cta() + 1], span_now());
    }}
}};
"""
ENTRY = """    if (threadIdx.x == 0) {
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        span_sm[span_cta()] = smid;
        span_stamp[2 * span_cta()] = span_now();
    }
    SpanEnd span_end;
"""


def instrument(source: str) -> str:
    """``source`` (``sk.source``) with the stamps: the start by thread 0 of each CTA at the kernel's
    entry, the end by lane 0 of each warp on every way out (a destructor)."""
    at = source.index(SIGNATURE)
    body = source.index(") {\n", at) + len(") {\n")
    return source[:at] + STAMPS + source[at:body] + ENTRY + source[body:]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sp.add_shape_and_plans(ap)
    ap.add_argument("--launches", type=int, default=30, help="stamped launches a build (1-1000)")
    args = ap.parse_args(argv)
    sp.read_shape_and_plans(ap, args)
    if not 1 <= args.launches <= 1000:
        ap.error(f"--launches: {args.launches} is not between 1 and 1000")
    return args


def main(args: argparse.Namespace) -> int:
    import cupy as cp
    import numpy as np

    from engine import device_limits

    limits, _ = device_limits(0, "device")
    m, n, k = args.shape
    bench = sp.Bench(cp, m, n, k, "bf16", 10, 100)
    plans = sp.listed(m, n, k, "bf16", limits, args.plans)
    sources = {p: instrument(sk.source(p, "bf16")) for p in plans}
    built = sp.compile_all(list(sources.values()), limits.arch, 4)
    print(f"{m}x{n}x{k} bf16: cuBLAS beta=1 {bench.cublas_ms() * 1e3:.2f} us a launch (event-timed)")
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp:
        for p in plans:
            ctas = p.grid[0] * p.grid[1] * p.grid[2]
            name = f"{p.block_size}/{p.stages}/{p.warps}/{p.split_k}/{p.bulk_k}"
            if ctas > MAX_CTAS:
                print(f"{name}: {ctas} CTAs, more than the {MAX_CTAS} stamps")
                continue
            cubin = built[sources[p]][0]
            run = sp.launcher(cp, bench, p, cubin, Path(tmp), dependent=False)
            event_us = bench.time(run) * 1e3
            stamps = cp.ndarray((2 * MAX_CTAS,), cp.uint64, run.module.get_global("span_stamp"))
            sms = cp.ndarray((MAX_CTAS,), cp.uint32, run.module.get_global("span_sm"))
            spans, ends = [], []
            for _ in range(args.launches):
                stamps.fill(0)
                cp.cuda.Device().synchronize()
                run(0)
                cp.cuda.Device().synchronize()
                s = stamps[:2 * ctas].get().reshape(ctas, 2).astype(np.int64)
                spans.append((s[:, 1].max() - s[:, 0].min()) / 1e3)
                ends.append((s[:, 1].max() - s[:, 1].min()) / 1e3)
            sm = sms[:ctas].get()
            per_sm: dict[int, int] = {}
            for x in sm:
                per_sm[int(x)] = per_sm.get(int(x), 0) + 1
            dur = (s[:, 1] - s[:, 0]) / 1e3
            by_count: dict[int, list[float]] = {}
            for c in range(ctas):
                by_count.setdefault(per_sm[int(sm[c])], []).append(float(dur[c]))
            print(f"{name}: {ctas} CTAs on {len(per_sm)} SMs; event-timed {event_us:.2f} us, first start to last "
                  f"end {med(spans):.2f} (min {min(spans):.2f}), CTA ends spread over {med(ends):.2f}; CTA time "
                  "by CTAs on its SM: " + ", ".join(f"{c}: {med(v):.2f} ({len(v)} CTAs)"
                                                    for c, v in sorted(by_count.items())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_args()))
