"""How well the tuner's prior (the kernel's ``predict_ms``) predicts measured trials, and the fit of
its stream-K tail constants (ADR-0002), from `tui tune --json` runs (``bench/tune_each.sh``'s JSONL,
gzipped or not). Runs here, without a GPU: each trial is predicted again with today's model.

    python -m bench.product_data.fit_prior --train docs/data/tune-table-extra-h200.jsonl.gz \\
        --check docs/data/tune-heldout-h200.jsonl.gz

Prints, per stream-K tail (``StreamKTail``: scale, fixed), the median and mean absolute log error
of measured / predicted over the stream-K trials of the training and the check runs, and the
pair the training runs alone pick.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernels.gemm_residual_cost import STREAMK_TAIL, StreamKTail, sm90_predict_ms

SCALES = (1.15, 1.5, 2.0, 2.5, 3.0)
FIXED = (0.0, 0.25, 0.5, 0.75, 1.0)


def trials(path: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(the shape's entry, trial) for every timed Hopper-path trial of the run's shapes with the plan's own
    schedule (no forced choice); the decode path (M <= 64) has its own model."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        for line in fh:
            for s in json.loads(line).get("shapes", []):
                if s["shape"]["m"] <= 64:
                    continue
                for t in s.get("trials", []):
                    if t.get("median_ms") and not t.get("schedule"):
                        yield s, t


def errors(rows: list[tuple[dict[str, Any], dict[str, Any]]], split: str,
           tail: StreamKTail = STREAMK_TAIL) -> tuple[float, float, int]:
    """(median, mean absolute) of log(measured / predicted) over the trials whose plan ran ``split``,
    a stream-K tail costing ``tail``: the Hopper plan of ``gemm_residual``'s ``plan`` priced by its
    cost model (``sm90_predict_ms``, what the spec's ``predict_ms`` answers for these trials)."""
    from engine.profiles import load_profiles
    from engine.task import TaskSpec
    from kernels import get_spec
    from kernels.spec import DeviceLimits, plan_or_raise

    prof = load_profiles().get("h200")
    limits, spec = DeviceLimits.from_profile(prof), get_spec("gemm_residual")
    errs = []
    for s, t in rows:
        if (t.get("resolved") or {}).get("split") != split:
            continue
        task = TaskSpec(shape=s["shape"], dtype=s["dtype"], block_size=t["block_size"],
                        memory_pipelining=t["memory_pipelining"])
        kp = plan_or_raise(spec, task, limits)
        pred = sm90_predict_ms(kp.detail, limits, prof.sol_peak_flops(s["dtype"]), prof.bandwidth_bytes_per_s,
                               spec.bytes_moved(spec.normalize_shape(task.shape), s["dtype"]), tail)
        errs.append(math.log(t["median_ms"] / pred))
    if not errs:
        return float("nan"), float("nan"), 0
    return statistics.median(errs), statistics.fmean(abs(e) for e in errs), len(errs)


def fit(train: list[tuple[dict[str, Any], dict[str, Any]]],
        check: list[tuple[dict[str, Any], dict[str, Any]]] = (), out: Any = None) -> tuple[float, float]:
    """The (scale, fixed) stream-K tail of the grid with the least mean absolute log error over the
    training trials (each pair's errors printed to ``out`` where given)."""
    best: tuple[float, float, float] | None = None
    for scale, fixed in itertools.product(SCALES, FIXED):
        tail = StreamKTail(scale=scale, fixed=fixed)
        tr = errors(train, "streamk", tail)
        if out is not None:
            ck = errors(list(check), "streamk", tail)
            print(f"stream-K scale {scale:4.2f} fixed {fixed:4.2f}: train median {tr[0]:+.3f} mean|e| "
                  f"{tr[1]:.3f} n {tr[2]}" + (f" | check median {ck[0]:+.3f} mean|e| {ck[1]:.3f} n {ck[2]}"
                                              if check else ""), file=out)
        if best is None or tr[1] < best[0]:
            best = (tr[1], scale, fixed)
    assert best is not None, "no stream-K trials to fit"
    return best[1], best[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", type=Path, nargs="+", required=True)
    ap.add_argument("--check", type=Path, nargs="*", default=[])
    args = ap.parse_args(argv)
    train = [r for p in args.train for r in trials(p)]
    check = [r for p in args.check for r in trials(p)]
    med, mae, n = errors(train, "off")
    print(f"data-parallel trials, today's model: train median {med:+.3f} mean|e| {mae:.3f} n {n}")
    scale, fixed = fit(train, check, out=sys.stdout)
    print(f"training pick: STREAMK_TAIL = StreamKTail(scale={scale}, fixed={fixed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
