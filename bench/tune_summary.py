"""Summarise `tui tune --json` output as one table: per shape the default, the tuned best, the
peers and the ratios the tuning issue's targets are written in (ours / cuBLAS beta=1, ours /
unfused), plus the tune's time.

    python -m bench.tune_summary tune.json [more.json ...] [--torch] [--classes SHAPES.toml]

``--torch`` (on the GPU machine) also times torch's own paths per shape, addmm and matmul + add,
with CUDA events after a 1 s rest (median of 100 launches after 10 warm-ups): the framework a user
would otherwise run.

``--classes`` reads the shapes file the tunes came from and groups its shapes by class, a shape's
name without its last word ("decode 16x8192" is of class "decode", "long K 2048x5120x13824" of
"long K"): each class's geometric mean of tuned / cuBLAS beta=1, then their geometric mean, the
issue's "geometric mean over the classes".
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def rows(doc: dict) -> list[dict]:
    out = []
    for s in doc.get("shapes", []):
        peers = {k: v.get("median_ms") for k, v in (s.get("peers") or {}).items()}
        best, default = s.get("best") or {}, s.get("default") or {}
        b1 = peers.get("cublas_gemm_beta1")
        unfused = peers.get("cupy_matmul_add") or peers.get("cublas_gemm_add")
        tuned, dflt = best.get("median_ms"), default.get("median_ms")
        out.append({"name": s.get("name") or "x".join(str(v) for v in s["shape"].values()),
                    "dtype": s["dtype"], "default": dflt, "default_knobs": _knobs(default), "tuned": tuned,
                    "tuned_knobs": _knobs(best), "cublas_b1": b1, "cublas_gemm": peers.get("cublas_gemm"),
                    "unfused": unfused, "t_sol": s.get("t_sol_ms"), "elapsed_s": s.get("elapsed_s"),
                    "timed": s.get("timed"), "total": s.get("candidates_total"),
                    "tuned_vs_b1": tuned / b1 if tuned and b1 else None,
                    "default_vs_b1": dflt / b1 if dflt and b1 else None,
                    "tuned_vs_unfused": tuned / unfused if tuned and unfused else None,
                    "simulated": s.get("simulated")})
    return out


def _knobs(t: dict) -> str:
    if not t:
        return "-"
    sched = ",".join(f"{k}={v}" for k, v in sorted((t.get("schedule") or {}).items()))
    return f"{t['block_size']}/{t['memory_pipelining']}" + (f" {sched}" if sched else "")


def _f(v: float | None, spec: str = ".4f") -> str:
    return "-" if v is None else format(v, spec)


def torch_ms(m: int, n: int, k: int, dtype: str) -> dict[str, float]:
    """torch.addmm and matmul + add medians in ms (CUDA events; rotating inputs beyond the L2)."""
    import time

    import torch

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
    per = (m * k + n * k + m * n) * 2
    sets = max(1, min(8, int(2 * 60e6 // max(per, 1)) + 1))
    data = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(n, k, device="cuda", dtype=dt),
             torch.randn(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
    out = {}
    for name, fn in (("torch_addmm", lambda a, w, r: torch.addmm(r, a, w.t())),
                     ("torch_matmul_add", lambda a, w, r: a @ w.t() + r)):
        time.sleep(1.0)
        for i in range(10):
            fn(*data[i % sets])
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(100)]
        for i, (e0, e1) in enumerate(evs):
            e0.record()
            fn(*data[i % sets])
            e1.record()
        torch.cuda.synchronize()
        times = sorted(e0.elapsed_time(e1) for e0, e1 in evs)
        out[name] = times[len(times) // 2]
    return out


def classes(path: Path) -> dict[str, str]:
    """Shape text ("MxNxK") -> class (the [[shape]]'s name without its last word) of a shapes file."""
    import tomllib

    out = {}
    for s in tomllib.loads(path.read_text()).get("shape", []):
        words = str(s.get("name", "")).split()
        out[f"{s['m']}x{s['n']}x{s['k']}"] = " ".join(words[:-1]) or " ".join(words)
    return out


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def class_means(all_rows: list[dict], of: dict[str, str]) -> tuple[dict[str, float], float]:
    """(class -> geometric mean of its shapes' tuned / cuBLAS b1, the geometric mean of those)."""
    groups: dict[str, list[float]] = {}
    for r in all_rows:
        if r["tuned_vs_b1"] and r["name"] in of:
            groups.setdefault(of[r["name"]], []).append(r["tuned_vs_b1"])
    per = {c: _geo(v) for c, v in groups.items()}
    return per, (_geo(list(per.values())) if per else float("nan"))


def main(paths: list[str]) -> int:
    use_torch = "--torch" in paths
    paths = [p for p in paths if p != "--torch"]
    of: dict[str, str] = {}
    if "--classes" in paths:
        i = paths.index("--classes")
        if i + 1 >= len(paths):
            print("--classes: needs the shapes file the tunes came from", file=sys.stderr)
            return 2
        try:
            of = classes(Path(paths[i + 1]))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:  # TOMLDecodeError is a ValueError
            print(f"--classes: {paths[i + 1]}: not a shapes file with m, n, k a [[shape]] ({exc})", file=sys.stderr)
            return 2
        paths = paths[:i] + paths[i + 2:]
    all_rows = []
    docs = []
    for p in paths:
        text = Path(p).read_text()
        try:
            docs.append(json.loads(text))
        except json.JSONDecodeError:  # one JSON object a line (bench/tune_each.sh)
            docs += [json.loads(line) for line in text.splitlines() if line.strip()]
    for doc in docs:
        got = rows(doc)
        if use_torch:
            for r, s in zip(got, doc.get("shapes", []), strict=True):
                sh = s["shape"]
                try:
                    r.update(torch_ms(sh["m"], sh["n"], sh["k"], s["dtype"]))
                except Exception as exc:  # torch missing or failing: the table says so
                    r["torch_error"] = f"{type(exc).__name__}: {exc}"
        all_rows += got
    head = ("shape", "dtype", "default ms", "tuned ms", "knobs", "cuBLAS b1", "GEMM alone", "unfused",
            "tuned/b1", "default/b1", "tuned/unfused", "torch addmm", "torch mm+add", "tune s", "timed")
    print(" | ".join(head))
    for r in all_rows:
        print(" | ".join([r["name"], r["dtype"], _f(r["default"]), _f(r["tuned"]), r["tuned_knobs"],
                          _f(r["cublas_b1"]), _f(r["cublas_gemm"]), _f(r["unfused"]), _f(r["tuned_vs_b1"], ".3f"),
                          _f(r["default_vs_b1"], ".3f"), _f(r["tuned_vs_unfused"], ".3f"),
                          _f(r.get("torch_addmm")), _f(r.get("torch_matmul_add")),
                          _f(r["elapsed_s"], ".0f"), f"{r['timed']}/{r['total']}"]))
    ratios = [r["tuned_vs_b1"] for r in all_rows if r["tuned_vs_b1"]]
    if ratios:
        print(f"tuned / cuBLAS beta=1: geometric mean {_geo(ratios):.3f}, worst {max(ratios):.3f} "
              f"over {len(ratios)} shapes")
    if of:
        per, over = class_means(all_rows, of)
        print("by class: " + ", ".join(f"{c} {g:.3f}" for c, g in per.items())
              + f"; geometric mean over the {len(per)} classes {over:.3f}")
    dr = [r["default_vs_b1"] for r in all_rows if r["default_vs_b1"]]
    if dr:
        print(f"default / cuBLAS beta=1: worst {max(dr):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
