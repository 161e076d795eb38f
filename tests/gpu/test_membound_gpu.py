"""GPU tests (marker `gpu`) for the memory-bound kernels add_rmsnorm and bias_gelu.

Correctness for every dtype, odd M (1, 777), every knob combination; peers; and a bandwidth sweep
that prints one JSON line per variant (run with -s) and checks the fused defaults against the
targets of issue 5 (>= 3.5 TB/s effective for add_rmsnorm bf16 at [32768, 4096] and [8192, 2560])."""

from __future__ import annotations

import json

import pytest

from engine.backends.base import Emitter, RunContext
from engine.result import RunStatus
from engine.runner import prepare
from engine.task import TaskSpec
from kernels import get_spec
from kernels.spec import DeviceLimits

pytestmark = pytest.mark.gpu
KERNELS = {"add_rmsnorm": {"n": 2560}, "bias_gelu": {"n": 1000}}


def _backend_run(task: TaskSpec):
    from engine.backends.cuda import CudaBackend

    prep = prepare(TaskSpec.model_validate(task.model_dump() | {"backend": "cuda"}))
    ctx = RunContext(task=prep.task, profile=prep.profile, spec=get_spec(prep.task.kernel),
                     emit=Emitter(send=lambda e: None))
    return CudaBackend().run(ctx)


def _combos(kernel: str, dtype: str, shape: dict[str, int]):
    from types import SimpleNamespace

    from engine.profiles import load_profiles

    spec = get_spec(kernel)
    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    for bs in spec.block_size_options(limits, dtype):
        for st in spec.pipelining_options(limits, dtype, bs):
            for fusion in (True, False):
                t = SimpleNamespace(shape=shape, dtype=dtype, block_size=bs, memory_pipelining=st, fusion=fusion)
                if not spec.check(t, limits):
                    yield bs, st, fusion


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("m", [1, 777])
def test_odd_m_correct(kernel, dtype, m):
    for fusion in (True, False):
        res = _backend_run(TaskSpec(kernel=kernel, shape={"m": m, **KERNELS[kernel]}, dtype=dtype,
                                    fusion=fusion, warmup=1, iterations=2, peers=False))
        assert res.status is RunStatus.ok, (fusion, res.error)
        assert res.correctness.correct and res.correctness.unwritten_count == 0


def test_long_rows_reread_path_correct():
    for dtype in ("bf16", "fp16", "fp32"):
        for st in (0, 2):
            for fusion in (True, False):
                res = _backend_run(TaskSpec(kernel="add_rmsnorm", shape={"m": 7, "n": 131072}, dtype=dtype,
                                            block_size="256", memory_pipelining=st, fusion=fusion,
                                            warmup=1, iterations=2, peers=False))
                assert res.status is RunStatus.ok, (dtype, st, fusion, res.error)
                assert res.launch["info"]["vectors_per_thread"] == 0


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_every_knob_combination_correct(kernel, dtype):
    shape = {"m": 777, **KERNELS[kernel]}
    failures = []
    for bs, st, fusion in _combos(kernel, dtype, shape):
        res = _backend_run(TaskSpec(kernel=kernel, shape=shape, dtype=dtype, block_size=bs, memory_pipelining=st,
                                    fusion=fusion, warmup=1, iterations=2, peers=False))
        if res.status is not RunStatus.ok:
            failures.append((bs, st, fusion, res.status.value, (res.error or "")[:200]))
    assert failures == []


def _line(res, **extra):
    t = res.task
    peers = {p.name: (round(p.timing.median_ms, 4) if p.timing else p.error, p.correct) for p in res.peers}
    return json.dumps({"kernel": t["kernel"], "shape": t["shape"], "dtype": t["dtype"], "bs": t["block_size"],
                       "st": t["memory_pipelining"], "fusion": t["fusion"], "ms": round(res.timing.median_ms, 4),
                       "gbps": round(res.sol["gbps"]), "ok": res.status.value, "peers": peers,
                       "score": res.solexec_score, "info": res.launch.get("info", {}).get("path"), **extra})


SWEEP = [("add_rmsnorm", {"m": 32768, "n": 4096}), ("add_rmsnorm", {"m": 8192, "n": 2560}),
         ("bias_gelu", {"m": 8192, "n": 10240})]


@pytest.mark.parametrize("kernel,shape", SWEEP)
def test_bandwidth_sweep(kernel, shape):
    """Every fused knob combination for bf16 (5 warm-ups, 30 timed: a quick ranking), then the
    default knobs for each dtype, fused (with peers) and unfused (10 + 100), printed as JSON lines;
    the fused bf16 default of add_rmsnorm must reach 3.5 TB/s."""
    best = 0.0
    for bs, st, fusion in _combos(kernel, "bf16", shape):
        if not fusion:
            continue
        res = _backend_run(TaskSpec(kernel=kernel, shape=shape, dtype="bf16", block_size=bs, memory_pipelining=st,
                                    warmup=5, iterations=30, peers=False))
        print("SWEEP", _line(res))
        assert res.status is RunStatus.ok, res.error
        best = max(best, res.sol["gbps"])
    for dtype in ("bf16", "fp16", "fp32"):
        for fusion in (True, False):
            res = _backend_run(TaskSpec(kernel=kernel, shape=shape, dtype=dtype, fusion=fusion,
                                        warmup=10, iterations=100, peers=fusion))
            print("DEFAULT", _line(res))
            assert res.status is RunStatus.ok, res.error
            if fusion:
                assert all(p.correct for p in res.peers), res.peers
            if fusion and dtype == "bf16" and kernel == "add_rmsnorm":
                assert res.sol["gbps"] >= 3500, res.sol["gbps"]
    print("BEST of the short sweep runs", kernel, shape, round(best))
