"""Cubin digests of a fixed sample of Hopper and decode builds (h200 limits): a quick check that a
refactor of the device code leaves the compiled kernels alone, where ``bench.build_hashes --cubins``
(every build) takes too long. Run it in each tree and compare the two JSON files.

    python -m bench.cubin_sample before.json   # old tree
    python -m bench.cubin_sample after.json    # new tree
"""
import hashlib, itertools, json, random, sys
from engine.profiles import load_profiles
from engine.task import TaskSpec
from engine.backends.cuda import compile_inputs
from kernels import get_spec
from kernels.spec import DeviceLimits, render_task, violations_of
from kernels.nvrtc_check import compile_cubin
limits = DeviceLimits.from_profile(load_profiles().get("h200"))
spec = get_spec("gemm_residual")
rnd = random.Random(11)
tasks = []
for dtype in ("bf16", "fp16", "tf32", "fp32"):
    for shape in ({"m": 8192, "n": 2560, "k": 2560}, {"m": 777, "n": 2560, "k": 2560},
                  {"m": 3000, "n": 4096, "k": 4096}, {"m": 2500, "n": 2600, "k": 704},
                  {"m": 1, "n": 4096, "k": 4096}, {"m": 7, "n": 5120, "k": 5120}, {"m": 64, "n": 4096, "k": 14336},
                  {"m": 40, "n": 2560, "k": 2560}):
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
                u = t.model_copy(update={"schedule": dict(zip((k.name for k in knobs), combo))})
                if not violations_of(spec, u, limits):
                    tasks.append(u)
    tasks.append(TaskSpec(kernel="gemm_residual", shape={"m": 8192, "n": 2560, "k": 2560}, dtype=dtype, fusion=False, backend="sim"))
res = {}
for t in tasks:
    key = f"{t.dtype.value}|{t.shape}|{t.block_size}|{t.memory_pipelining}|{t.fusion}|{sorted((t.schedule or {}).items())}"
    try:
        if t.block_size is None or t.memory_pipelining is None:
            sh = spec.normalize_shape(t.shape); dbs, dst = spec.default_knobs(limits, t.dtype.value, sh)
            t = t.model_copy(update={"shape": sh, "block_size": t.block_size or dbs, "memory_pipelining": dst if t.memory_pipelining is None else t.memory_pipelining})
        b = render_task(spec, t, limits)
    except Exception as e:
        res[key] = "render error " + str(e)[:100]; print(key, res[key], flush=True); continue
    src, arch, opts = compile_inputs(b, limits)
    r = compile_cubin(src, arch, tuple(opts))
    res[key] = (",".join(b.functions) + " " + (hashlib.sha256(r.cubin).hexdigest() if r.ok else "ERR " + r.log[:200]))
    print(key, res[key][:80], flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1, sort_keys=True)
print(len(res), "builds")
