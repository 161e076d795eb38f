"""Printing and saving a mode's table, checking every row at every shape, and timing candidates in
alternation with the engine's NVML sampler tagging what runs."""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

import cupy as cp

from bench.sm90.gemm import time_fn
from engine import NvmlSampler, nvml


def write_table(lines: list[str], report: dict, out_dir: str | None, stem: str) -> None:
    """Print the table; with $OUT, save it as STEM.txt and the report as STEM.json (the folder
    created if missing, so a finished sweep is never lost to a missing sub-folder)."""
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



def make_sampler():
    """The engine's NVML sampler, every 10 ms while a candidate's tag is set, running; or None
    (printed why) where NVML does not answer for this GPU."""
    try:
        pci = cp.cuda.runtime.deviceGetPCIBusId(cp.cuda.Device().id)
        if nvml.index_for_pci_bus_id(pci) is None:
            raise RuntimeError(f"NVML does not list the GPU at {pci}")
    except Exception as exc:  # noqa: BLE001
        print(f"no NVML sampler: {exc}")
        return None
    sampler = NvmlSampler(pci, interval_s=0.01, tagged=True)
    sampler.start()
    return sampler


def alternate(runs: dict, rounds: int, sampler, tag: str = "", warm: int = 10) -> dict:
    """Time every callable in ``runs`` for 20 launches per round, the candidates one after another
    in each of ``rounds`` rounds (so drift hits all alike): name -> the rounds' medians. The
    sampler, if any, tags its samples ``tag + name`` meanwhile, and takes one more as each window
    ends: 20 launches of a small shape end before its 10 ms interval comes round."""
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
                sampler.snap()
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
        smp = [(x["sm_clock_mhz"], x["power_w"]) for x in sampler.samples
               if x["tag"] == tag + nm and x["sm_clock_mhz"] is not None and x["power_w"] is not None] if sampler else []
        clk = sum(c_ for c_, _ in smp) / len(smp) if smp else float("nan")
        pw = sum(p_ for _, p_ in smp) / len(smp) if smp else float("nan")
        rows.append((nm, srt[len(srt) // 2], srt[0], ratios[len(ratios) // 2], clk, pw))
    return rows
