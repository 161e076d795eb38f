"""Cubin digests of a fixed sample of Hopper and decode builds (h200 limits): a quick check that a
refactor of the device code leaves the compiled kernels alone, where ``bench.product_data.build_hashes --cubins``
(every build) takes too long. Run it in each tree and compare the two JSON files.

    python -m bench.product_data.cubin_sample before.json   # old tree
    python -m bench.product_data.cubin_sample after.json    # new tree
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import sys
from typing import Any

from engine import DeviceLimits, TaskSpec, compile_inputs, get_spec, load_profiles
from kernels.nvrtc_check import compile_cubin
from kernels.spec import KernelSpec, render_task, violations_of

SHAPES = ({"m": 8192, "n": 2560, "k": 2560}, {"m": 777, "n": 2560, "k": 2560},
          {"m": 3000, "n": 4096, "k": 4096}, {"m": 2500, "n": 2600, "k": 704},
          {"m": 1, "n": 4096, "k": 4096}, {"m": 7, "n": 5120, "k": 5120}, {"m": 64, "n": 4096, "k": 14336},
          {"m": 40, "n": 2560, "k": 2560})
SEED = 11
"""The sample's random choices (two other tiles per shape, two schedule combinations per tile)."""


def _with_default_knobs(spec: KernelSpec, limits: DeviceLimits, t: Any) -> Any:
    sh = spec.normalize_shape(t.shape)
    dbs, dst = spec.default_knobs(limits, t.dtype.value, sh)
    return t.model_copy(update={"shape": sh, "block_size": t.block_size or dbs,
                                "memory_pipelining": dst if t.memory_pipelining is None else t.memory_pipelining})


def sample_tasks(spec: KernelSpec, limits: DeviceLimits) -> list[Any]:
    """Per dtype and shape: the default tile and two others with their stages, each with two of its
    schedule combinations; and the seed shape unfused."""
    rnd = random.Random(SEED)
    tasks = []
    for dtype in ("bf16", "fp16", "tf32", "fp32"):
        for shape in SHAPES:
            tiles = list(spec.block_size_options(limits, dtype))
            for bs in [None] + rnd.sample(tiles, min(2, len(tiles))):
                t = TaskSpec(kernel="gemm_residual", shape=shape, dtype=dtype, block_size=bs, backend="sim")
                sh = spec.normalize_shape(t.shape)
                dbs, dst = spec.default_knobs(limits, dtype, sh)
                t = t.model_copy(update={"shape": sh, "block_size": t.block_size or dbs, "memory_pipelining": dst})
                if bs is not None:
                    try:
                        t = t.model_copy(update={"memory_pipelining": spec.stages_for(limits, dtype, str(t.block_size), sh)})
                    except Exception:
                        continue
                if violations_of(spec, t, limits):
                    continue
                tasks.append(t)
                try:
                    knobs = spec.schedule_knobs(limits, dtype, sh, str(t.block_size))
                except Exception:
                    knobs = []
                combos = list(itertools.product(*(k.values for k in knobs))) if knobs else []
                for combo in rnd.sample(combos, min(2, len(combos))):
                    u = t.model_copy(update={"schedule": dict(zip((k.name for k in knobs), combo, strict=True))})
                    if not violations_of(spec, u, limits):
                        tasks.append(u)
        tasks.append(TaskSpec(kernel="gemm_residual", shape={"m": 8192, "n": 2560, "k": 2560}, dtype=dtype,
                              fusion=False, backend="sim"))
    return tasks


def digests(spec: KernelSpec, limits: DeviceLimits, tasks: list[Any]) -> dict[str, str]:
    """Each task's key -> its build's kernels and the sha256 of the cubin NVRTC compiles (or why not)."""
    res = {}
    for t in tasks:
        key = f"{t.dtype.value}|{t.shape}|{t.block_size}|{t.memory_pipelining}|{t.fusion}|{sorted((t.schedule or {}).items())}"
        try:
            if t.block_size is None or t.memory_pipelining is None:
                t = _with_default_knobs(spec, limits, t)
            b = render_task(spec, t, limits)
        except Exception as e:
            res[key] = "render error " + str(e)[:100]
            print(key, res[key], flush=True)
            continue
        src, arch, opts = compile_inputs(b, limits)
        r = compile_cubin(src, arch, tuple(opts))
        res[key] = (",".join(b.functions) + " " + (hashlib.sha256(r.cubin).hexdigest() if r.ok else "ERR " + r.log[:200]))
        print(key, res[key][:80], flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    out = (sys.argv[1:] if argv is None else argv)[0]
    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    spec = get_spec("gemm_residual")
    res = digests(spec, limits, sample_tasks(spec, limits))
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1, sort_keys=True)
    print(len(res), "builds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
