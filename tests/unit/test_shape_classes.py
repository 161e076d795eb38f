"""The shape classes beyond N = K = 2560 are first-class: other hidden sizes (3584 to 8192), long K
(11008 to 18944), decode M and K that is not a multiple of 8 all plan without violations on the
H200 profile, and the build the planner picks (the table of tuned defaults or the kernel's rules)
compiles through NVRTC without spills."""

from __future__ import annotations

import pytest

from engine.planner import plan
from engine.profiles import load_profiles
from engine.task import TaskSpec
from kernels import get_spec, nvrtc_check
from kernels.spec import render_task

H200 = load_profiles().get("h200")

SHAPES = [
    (1, 3584, 3584), (12, 8192, 8192), (40, 6144, 6144),         # decode
    (1536, 3584, 3584), (2500, 6144, 6144), (777, 8192, 8192),   # other hidden sizes
    (2048, 4096, 11008), (1000, 5120, 13824), (3000, 3584, 18944),  # long K (MLP down-projections)
    (5000, 2560, 1003), (9, 4096, 4095),                         # K not a multiple of 8
]


@pytest.mark.parametrize("m, n, k", SHAPES)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_each_class_plans_and_its_default_compiles(m, n, k, dtype):
    from engine.backends.cuda import compile_inputs

    p = plan(TaskSpec(backend="sim", shape={"m": m, "n": n, "k": k}, dtype=dtype), H200)
    assert p.ok, p.error_text()
    assert p.block_size_options and p.pipelining_options and p.schedule_options
    build = render_task(get_spec("gemm_residual"), p.task, p.limits)
    src, arch, opts = compile_inputs(build, p.limits)
    report = nvrtc_check.compile_cubin(src, arch, tuple(opts))
    assert report.ok and not report.spills, report.log[-400:]


def test_sustained_regime_is_a_tune_regime_and_is_slower_simulated(tmp_path, monkeypatch):
    from engine.store import ResultStore
    from engine.tuner import tune

    monkeypatch.setenv("SOL_SIM_DELAY", "0")
    store = ResultStore(tmp_path / "s.db")
    task = TaskSpec(backend="sim", shape={"m": 8, "n": 4096, "k": 4096})
    burst = tune(task, "h200", budget_s=5, store=store)
    sustained = tune(task, "h200", budget_s=5, regime="sustained", store=store)
    assert sustained.regime == "sustained" and sustained.best.median_ms > burst.best.median_ms
    assert {e["regime"] for e in store.list_tuned()} == {"burst", "sustained"}
