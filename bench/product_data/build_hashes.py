"""Fingerprints of every build the product renders over a covering set of shapes, dtypes and knobs:
for a refactor that must not change a kernel. Two runs that print the same digest rendered the same
sources, launches and scratch buffers, so NVRTC compiles the same cubins.

    python -m bench.product_data.build_hashes --out before.json   # on the old tree
    python -m bench.product_data.build_hashes --compare before.json   # on the new one: exit 1 on any difference

Where the source text may change but the kernels must not (a template split into headers, comments
moved), ``--cubins`` fingerprints each build by its compiled cubins instead: every distinct compile
input (source, arch, options, as the CUDA backend's ``compile_inputs`` makes them) is compiled once
by NVRTC (no GPU needed) in a pool of ``--jobs`` processes. ``--functions`` keeps only the builds
that launch one of the named kernels (e.g. ``gemm_residual_sm90``: the Hopper family alone).
``--schedules`` adds, for the kernels with schedule choices, every combination of their choices on
each tile at a few shapes (``SCHEDULE_SHAPES``).

    python -m bench.product_data.build_hashes --cubins --functions gemm_residual_sm90 --out before.json
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

from engine.profiles import load_profiles
from engine.task import TaskSpec
from kernels import get_spec, kernel_names
from kernels.spec import DeviceLimits, render_task, violations_of

M_LIST = (1, 7, 64, 256, 512, 777, 1024, 1571, 1700, 2048, 2083, 2400, 2500, 3000, 4096, 5000, 7976, 8192)
NK_LIST = ((2560, 2560), (4096, 4096), (1024, 2560), (5120, 5120), (4096, 14336), (2600, 704))
SCHEDULE_SHAPES = ({"m": 777, "n": 2560, "k": 2560}, {"m": 4096, "n": 2560, "k": 2560},
                   {"m": 2500, "n": 2600, "k": 704})


def digest(build) -> str:
    data = {"source": build.source, "functions": build.functions, "options": build.options,
            "launches": [asdict(ln) for ln in build.launches], "scratch": [asdict(b) for b in build.scratch],
            "info": build.info}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def cases(profile: str, schedules: bool = False):
    prof = load_profiles().get(profile)
    limits = DeviceLimits.from_profile(prof)
    for name in kernel_names():
        spec = get_spec(name)
        shapes = ([{"m": m, "n": n, "k": k} for m in M_LIST for n, k in NK_LIST]
                  if set(spec.dims) == {"m", "n", "k"} else [spec.default_shape])
        for dtype in spec.dtypes:
            tiles = spec.block_size_options(limits, dtype)
            for shape in shapes:
                knobs = [(None, None)] + [(t, None) for t in tiles]
                if shape == spec.default_shape or shape.get("m") in (777, 4096):
                    for t in tiles:
                        try:
                            stages = spec.pipelining_options(limits, dtype, t, shape)
                        except ValueError:
                            continue
                        knobs += [(t, s) for s in stages]
                for fusion in (True, False):
                    for bs, st in knobs:
                        if not fusion and bs is not None:
                            continue
                        yield limits, spec, TaskSpec(kernel=name, shape=shape, dtype=dtype, block_size=bs,
                                                     memory_pipelining=st, fusion=fusion, backend="sim")
            if not schedules or set(spec.dims) != {"m", "n", "k"}:
                continue
            for shape in SCHEDULE_SHAPES:
                for bs in tiles:
                    plain = TaskSpec(kernel=name, shape=shape, dtype=dtype, block_size=bs, backend="sim")
                    stages = spec.stages_for(limits, dtype, bs, shape)
                    if violations_of(spec, plain.model_copy(update={"memory_pipelining": stages}), limits):
                        continue  # the tile does not serve this shape (e.g. the decode path's at M > 64)
                    knobs = spec.schedule_knobs(limits, dtype, shape, bs)
                    for combo in itertools.product(*(k.values for k in knobs)) if knobs else ():
                        yield limits, spec, TaskSpec(kernel=name, shape=shape, dtype=dtype, block_size=bs,
                                                     memory_pipelining=stages, backend="sim",
                                                     schedule=dict(zip((k.name for k in knobs), combo, strict=True)))


def resolved_builds(profile: str, functions: frozenset[str] = frozenset(), schedules: bool = False):
    """(key, knobs text, limits, build or the refusal text) for every case of ``cases``; with
    ``functions``, only the builds that launch one of them."""
    for limits, spec, task in cases(profile, schedules):
        key = f"{profile}|{task.kernel}|{task.dtype.value}|{task.shape}|{task.block_size}|{task.memory_pipelining}|{task.fusion}"
        if task.schedule:
            key += f"|{sorted(task.schedule.items())}"
        shape = spec.normalize_shape(task.shape)
        bs, st = spec.default_knobs(limits, task.dtype.value, shape)
        t = task.model_copy(update={"shape": shape, "block_size": task.block_size or bs,
                                    "memory_pipelining": st if task.memory_pipelining is None
                                    else task.memory_pipelining})
        knobs = f"{t.block_size}/{t.memory_pipelining}"
        if violations_of(spec, t, limits):
            if not functions:
                yield key, knobs, limits, "violation:" + "; ".join(str(v) for v in violations_of(spec, t, limits))
            continue
        try:
            build = render_task(spec, t, limits)
        except ValueError as exc:
            if not functions:
                yield key, knobs, limits, f"error: {exc}"
            continue
        if not functions or functions & set(build.functions):
            yield key, knobs, limits, build


def fingerprints(profile: str, functions: frozenset[str] = frozenset(), schedules: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, knobs, _, build in resolved_builds(profile, functions, schedules):
        out[key] = build if isinstance(build, str) else f"{knobs} " + digest(build)
    return out


def _cubin_digest(inputs: tuple[str, str, tuple[str, ...]]) -> str:
    """sha256 of the cubin NVRTC compiles from (source, arch, options); a failed compile gives
    'compile error' and its log's digest."""
    from kernels.nvrtc_check import compile_cubin

    report = compile_cubin(*inputs)
    if not report.ok:
        return "compile error " + hashlib.sha256(report.log.encode()).hexdigest()[:16]
    return hashlib.sha256(report.cubin).hexdigest()


def cubin_fingerprints(profiles: list[str], functions: frozenset[str], jobs: int,
                       schedules: bool = False) -> tuple[dict[str, str], int]:
    """Key -> the knobs and the digest of the build's cubin (refusals as ``fingerprints``), and the
    number of distinct cubins compiled."""
    from engine import compile_inputs

    out: dict[str, str] = {}
    pending: dict[str, tuple[str, tuple[str, str, tuple[str, ...]]]] = {}
    for profile in profiles:
        for key, knobs, limits, build in resolved_builds(profile, functions, schedules):
            if isinstance(build, str):
                out[key] = build
                continue
            source, arch, options = compile_inputs(build, limits)
            pending[key] = (knobs, (source, arch, tuple(options)))
    distinct = sorted({inputs for _, inputs in pending.values()})
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        cubins = dict(zip(distinct, pool.map(_cubin_digest, distinct, chunksize=4), strict=True))
    for key, (knobs, inputs) in pending.items():
        out[key] = f"{knobs} cubin " + cubins[inputs]
    return out, len(distinct)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--profiles", default="h200,a100-sxm-80gb")
    ap.add_argument("--cubins", action="store_true",
                    help="fingerprint the compiled cubins (NVRTC), not the rendered sources")
    ap.add_argument("--functions", default="",
                    help="comma-separated kernel names: only the builds that launch one of them")
    ap.add_argument("--jobs", type=int, default=2, help="NVRTC processes for --cubins")
    ap.add_argument("--schedules", action="store_true",
                    help="also every combination of the schedule choices on each tile (SCHEDULE_SHAPES)")
    args = ap.parse_args()
    profiles = args.profiles.split(",")
    functions = frozenset(f for f in args.functions.split(",") if f)
    got: dict[str, str] = {}
    if args.cubins:
        got, compiled = cubin_fingerprints(profiles, functions, args.jobs, args.schedules)
        print(f"{compiled} distinct cubins compiled, "
              f"{sum('compile error' in v for v in got.values())} cases failed to compile")
    else:
        for p in profiles:
            got.update(fingerprints(p, functions, args.schedules))
    print(f"{len(got)} cases, {sum(v.startswith(('violation', 'error')) for v in got.values())} refused")
    if args.out:
        args.out.write_text(json.dumps(got, indent=1, sort_keys=True))
    if args.compare:
        want = json.loads(args.compare.read_text())
        diff = [k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
        for k in diff[:40]:
            print(f"DIFF {k}\n  before {want.get(k)}\n  after  {got.get(k)}")
        print(f"{len(diff)} of {len(want)} differ")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
