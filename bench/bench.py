"""The benchmark script: run on the GPU machine, print a table of ours vs peers and % of SOL.

    python3 -m bench.bench [--sections seed,msweep,msweep-fp16,knobs,membound] [--iterations 100] [--rest 3] [--json OUT.json]

Every figure is a median of CUDA-event timings after the warm-up, on N(0,1) data, measured by the
same CUDA backend the cockpit uses (kernel, cuBLAS and CuPy peers on the same inputs in the same
run); torch peers are timed here on their own N(0,1) inputs of the same shapes. Performance lives
here, not in timed tests. With --rest S the GPU idles S seconds before ours and before each peer:
run back to back, whatever is timed second meets a warmer card (ADR-0004: cuBLAS's GEMM alone
0.1415 ms rested, 0.159-0.179 right after ours)."""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from engine import Emitter, RunContext, prepare
from engine.profiles import load_profiles
from engine.sol import solexec_score
from engine.task import REST_MAX_S, TaskSpec
from kernels import get_spec, kernel_names
from kernels.spec import DeviceLimits, render_task

SEED = {"m": 8192, "n": 2560, "k": 2560}
SWEEP_M = (256, 512, 1024, 1571, 2048, 2400, 2500, 3000, 4096, 5000, 7976, 8192)
"""The issue's M range (256 to 8192) with M no tile divides (1571, 3000, 5000, 7976): 3000 and 5000
where a clustered 128x128 default leaves its last round of tiles nearly empty, 2400 and 2500 where
ours had been slower than or level with torch matmul + add (ADR-0007). A mean score over M is only
comparable between runs over the same list."""


def _compile(task_json: str) -> str:
    from engine import compile_cubin_cached as compile_cubin
    from engine import compile_inputs, device_limits

    task = TaskSpec.model_validate_json(task_json)
    limits, _ = device_limits(task.device, "")
    try:
        compile_cubin(*compile_inputs(render_task(get_spec(task.kernel), task, limits), limits))
        return "ok"
    except Exception as exc:  # reported by the run itself
        return str(exc)[:200]


def precompile(tasks: list[TaskSpec]) -> None:
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 2), mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_compile, [t.model_dump_json() for t in tasks]))


def run(task: TaskSpec):
    from engine import run_on

    prep = prepare(TaskSpec.model_validate(task.model_dump() | {"backend": "cuda"}))
    ctx = RunContext(task=prep.task, profile=prep.profile, spec=get_spec(prep.task.kernel),
                     emit=Emitter(send=lambda e: None))
    return run_on("cuda", ctx)


def torch_peers(kernel: str, shape: dict, dtype: str, iters: int, rest_s: float = 0.0) -> dict[str, float]:
    """The torch way of doing the same work, on its own N(0,1) inputs (median ms): after
    ``rest_s`` seconds of idle, 10 warm-ups, then ``iters`` launches queued back to back between
    CUDA events, as the engine times ours and its peers (behind its hold kernel where the host
    cannot queue them faster than the GPU runs them)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return {}
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}[dtype]
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    g = torch.Generator(device="cuda").manual_seed(0)

    def randn(*size):
        return torch.randn(*size, device="cuda", dtype=dt, generator=g)

    if kernel.startswith("gemm_residual"):
        m, n, k = shape["m"], shape["n"], shape["k"]
        sizes = ((m, k), (n, k), (m, n))
    elif kernel == "add_rmsnorm":
        m, n = shape["m"], shape["n"]
        sizes = ((m, n), (m, n), (n,))
    elif kernel == "bias_gelu":
        m, n = shape["m"], shape["n"]
        sizes = ((m, n), (n,))
    else:
        return {}
    from engine import input_sets, queued_timer, time_queued

    # input sets rotated as the engine rotates ours (inputs smaller than the L2 would stay cached)
    in_bytes = sum(math.prod(sz) for sz in sizes) * torch.tensor([], dtype=dt).element_size()
    sets = [[randn(*sz) for sz in sizes]
            for _ in range(input_sets(in_bytes, torch.cuda.get_device_properties(0).L2_cache_size))]
    if kernel.startswith("gemm_residual"):
        fns = (("torch_matmul_add", lambda a, w, r: torch.matmul(a, w.t()) + r),
               ("torch_addmm", lambda a, w, r: torch.addmm(r, a, w.t())))
    elif kernel == "add_rmsnorm":
        fns = (("torch_add_rms_norm", lambda x, r, wt: F.rms_norm(x + r, (shape["n"],), wt, eps=1e-6)),)
    else:
        fns = (("torch_bias_gelu", lambda x, b: F.gelu(x + b, approximate="tanh")),)

    if torch.cuda.current_stream().cuda_stream != 0:
        raise RuntimeError("torch's current stream is not the legacy default stream CuPy times on")
    timer = queued_timer()
    out = {}
    for name, fn in fns:
        torch.cuda.synchronize()
        time.sleep(rest_s)

        def launch(i: int, fn=fn) -> None:
            fn(*sets[i % len(sets)])

        times = sorted(time_queued(timer, name, launch, iters))
        out[name] = times[len(times) // 2]
    return out


BASELINES = {  # kernel -> (torch baseline, CuPy fallback) of the SOL-ExecBench score
    "gemm_residual": ("torch_matmul_add", "cupy_matmul_add"),
    "gemm_residual_mma": ("torch_matmul_add", "cupy_matmul_add"),
    "add_rmsnorm": ("torch_add_rms_norm", "cupy_add_rmsnorm"),
    "bias_gelu": ("torch_bias_gelu", "cupy_bias_gelu"),
}


def row(label: str, res, torch_ms: dict[str, float]) -> dict:
    sol = res.sol.model_dump() if res.sol is not None else {}
    peers = {p.name: (p.timing.median_ms if p.timing else None) for p in res.peers}
    peers.update(torch_ms)
    kernel = res.task.kernel or "gemm_residual"
    torch_base, cupy_base = BASELINES.get(kernel, BASELINES["gemm_residual"])
    base = torch_ms.get(torch_base) or peers.get(cupy_base)
    t = res.timing.median_ms if res.timing else None
    return {
        "case": label, "status": res.status.value, "ms": t, "tflops": sol.get("tflops"), "gbps": sol.get("gbps"),
        "sol_pct": sol.get("sol_pct"), "t_sol_ms": sol.get("t_sol_ms"),
        "score_vs_torch": solexec_score(t, base, sol["t_sol_ms"]) if t and base else None,
        "correct": res.correctness.correct if res.correctness else None,
        "max_rel_err": res.correctness.max_rel_err if res.correctness else None,
        "knobs": f"{res.task.block_size}/{res.task.memory_pipelining or 'off'}/"
                 f"{'fused' if res.task.fusion else 'unfused'}",
        "path": (res.launch.info or {}).get("path"),
        "peers": peers, "error": (res.error or "")[:160] or None,
    }


def fmt(v, spec=".4f"):
    return "-" if v is None else format(v, spec)


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    print(f"{'case':<28} {'knobs':<22} {'ours ms':>8} {'TF/s':>6} {'SOL%':>5} {'score':>5} {'ok':>3} "
          f"{'cuBLAS b=1':>10} {'cuBLAS':>7} {'cupy mm+add':>11} {'torch mm+add':>12} {'torch addmm':>11}")
    for r in rows:
        p = r["peers"]
        print(f"{r['case']:<28} {r['knobs']:<22} {fmt(r['ms']):>8} {fmt(r['tflops'], '.0f'):>6} "
              f"{fmt(r['sol_pct'], '.1f'):>5} {fmt(r['score_vs_torch'], '.2f'):>5} "
              f"{'yes' if r['correct'] else ('NO' if r['correct'] is False else '-'):>3} "
              f"{fmt(p.get('cublas_gemm_beta1')):>10} {fmt(p.get('cublas_gemm')):>7} {fmt(p.get('cupy_matmul_add')):>11} "
              f"{fmt(p.get('torch_matmul_add')):>12} {fmt(p.get('torch_addmm')):>11}"
              + (f"  {r['status']}: {r['error']}" if r["status"] != "ok" else ""))


def print_membound_table(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    print(f"{'case':<34} {'knobs':<16} {'ours ms':>8} {'GB/s':>6} {'SOL%':>5} {'score':>5} {'ok':>3} {'peers (ms)'}")
    for r in rows:
        peers = "  ".join(f"{k} {fmt(v)}" for k, v in r["peers"].items())
        print(f"{r['case']:<34} {r['knobs']:<16} {fmt(r['ms']):>8} {fmt(r['gbps'], '.0f'):>6} "
              f"{fmt(r['sol_pct'], '.1f'):>5} {fmt(r['score_vs_torch'], '.2f'):>5} "
              f"{'yes' if r['correct'] else ('NO' if r['correct'] is False else '-'):>3} "
              f"{peers}" + (f"  {r['status']}: {r['error']}" if r["status"] != "ok" else ""))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="seed,msweep,knobs,membound")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--rest", type=float, default=0.0,
                    help="seconds of GPU idle before timing ours and before each peer (torch too), "
                         "so that every implementation starts from the same rested card")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "bench.json"))
    args = ap.parse_args()
    sections = args.sections.split(",")
    known = ("seed", "msweep", "msweep-fp16", "knobs", "membound")
    if set(sections) - set(known):
        ap.error(f"--sections: unknown {', '.join(sorted(set(sections) - set(known)))}; "
                 f"known: {', '.join(known)}")
    it = args.iterations
    if not 0 <= args.rest <= REST_MAX_S:
        ap.error(f"--rest {args.rest:g}: 0 to {REST_MAX_S:g} seconds")
    results: dict[str, list[dict]] = {}
    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    spec = get_spec("gemm_residual")

    plan: dict[str, list[tuple[str, TaskSpec]]] = {}
    if "seed" in sections:
        plan["seed shape, default knobs"] = [(f"seed {dt}", TaskSpec(shape=SEED, dtype=dt, iterations=it))
                                             for dt in get_spec("gemm_residual").dtypes]
    for sec, dt in (("msweep", "bf16"), ("msweep-fp16", "fp16")):
        if sec in sections:
            plan[f"M sweep, {dt}, N=K=2560"] = [
                (f"M={m}", TaskSpec(shape={"m": m, "n": 2560, "k": 2560}, dtype=dt, iterations=it))
                for m in SWEEP_M]
    if "knobs" in sections:
        rows = []
        for bs in spec.block_size_options(limits, "bf16"):
            for st in spec.pipelining_options(limits, "bf16", bs):
                for fusion in (True, False):
                    rows.append((f"{bs} st={st or 'off'} {'F' if fusion else 'U'}",
                                 TaskSpec(shape=SEED, block_size=bs, memory_pipelining=st, fusion=fusion,
                                          iterations=it, peers=False)))
        plan["knobs at the seed shape, bf16"] = rows
    if "membound" in sections:
        rows = []
        for kernel, shapes in (("add_rmsnorm", ((32768, 4096), (8192, 2560))), ("bias_gelu", ((8192, 10240),))):
            if kernel not in kernel_names():
                continue
            for m, n in shapes:
                for dt in ("bf16", "fp16"):
                    rows.append((f"{kernel} {m}x{n} {dt}", TaskSpec(kernel=kernel, shape={"m": m, "n": n}, dtype=dt,
                                                                    iterations=it)))
                rows.append((f"{kernel} {m}x{n} bf16 unfused",
                             TaskSpec(kernel=kernel, shape={"m": m, "n": n}, fusion=False, iterations=it)))
        plan["memory-bound fusion"] = rows
    plan = {title: [(label, t.model_copy(update={"rest_s": args.rest})) for label, t in rows]
            for title, rows in plan.items()}
    precompile([t for rows in plan.values() for _, t in rows])
    for title, rows in plan.items():
        out = []
        for label, task in rows:
            res = run(task)
            tp = (torch_peers(task.kernel, res.task.shape, res.task.dtype, it, args.rest)
                  if task.peers else {})
            out.append(row(label, res, tp))
        results[title] = out
        (print_membound_table if title == "memory-bound fusion" else print_table)(title, out)
    for dt in ("bf16", "fp16"):
        rows = results.get(f"M sweep, {dt}, N=K=2560", [])
        scores = [r["score_vs_torch"] for r in rows if r["score_vs_torch"] is not None]
        if scores:
            print(f"\nmean SOL-ExecBench score over M, {dt} (baseline torch matmul + add): "
                  f"{sum(scores) / len(scores):.3f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
