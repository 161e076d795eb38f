"""The plan is a value: planned once in the caller, rendered once in the engine process."""

from __future__ import annotations

import collections
from unittest import mock

import pytest

import kernels
import kernels.gemm_residual_auto as auto
from engine.backends.select import BackendChoice
from engine.job import REPLANNED, JobRequest
from engine.runner import prepare
from engine.task import TaskSpec
from engine.worker import child_main
from kernels.spec import DeviceLimits, KernelPlan, Refusal


class _Pipe:
    def __init__(self) -> None:
        self.msgs: list[dict] = []

    def send(self, msg: dict) -> None:
        self.msgs.append(msg)

    def close(self) -> None:
        pass


@pytest.fixture
def counts(monkeypatch):
    seen: collections.Counter[str] = collections.Counter()
    cls = type(kernels.get_spec("gemm_residual"))
    for owner, name, key in ((cls, "plan", "spec.plan"), (cls, "render", "spec.render"), (auto.sm90, "plan", "sm90.plan")):
        original = getattr(owner, name)

        def counted(*a, _original=original, _key=key, **k):
            seen[_key] += 1
            return _original(*a, **k)

        monkeypatch.setattr(owner, name, counted)
    return seen


def test_a_hopper_bench_plans_once_in_the_caller_and_renders_once_in_the_engine(counts, monkeypatch):
    monkeypatch.setenv("SOL_SIM_DELAY", "0")
    prep = prepare(TaskSpec(backend="sim", peers=False), "h100-sxm", backend_choice=BackendChoice(name="sim"))
    assert isinstance(prep.plan.kernel, KernelPlan) and prep.plan.info["path"].startswith("wgmma+TMA")
    assert counts == {"spec.plan": 1, "sm90.plan": 1}  # no render in the caller
    counts.clear()
    pipe = _Pipe()
    child_main(JobRequest("run", prep.task, prep.profile, "sim", prep.plan.kernel), pipe)
    result = pipe.msgs[-1]["result"]
    assert result["status"] == "ok" and result["launch"]["info"] == prep.plan.info
    assert counts == {"spec.render": 1}  # the plan it was given, not planned again


def test_the_engine_plans_again_only_where_the_device_differs_and_says_so(monkeypatch):
    from engine.backends.base import Emitter, RunContext

    monkeypatch.setenv("SOL_SIM_DELAY", "0")
    prep = prepare(TaskSpec(backend="sim", peers=False), "h100-sxm", backend_choice=BackendChoice(name="sim"))
    sent = []
    ctx = RunContext(task=prep.task, profile=prep.profile, spec=kernels.get_spec(prep.task.kernel),
                     emit=Emitter(send=sent.append), plan=prep.plan.kernel)
    same = DeviceLimits.from_profile(prep.profile)
    assert ctx.device_plan(same) is prep.plan.kernel and not ctx.emit.log
    fewer = DeviceLimits(**{**same.__dict__, "sm_count": same.sm_count - 18})
    again = ctx.device_plan(fewer)
    assert isinstance(again, KernelPlan) and again is not prep.plan.kernel
    assert ctx.emit.log[0].startswith(REPLANNED) and "sm_count 132 -> 114" in ctx.emit.log[0]


def test_a_refusal_names_each_violation():
    spec = kernels.get_spec("gemm_residual")
    out = spec.plan(TaskSpec(block_size="96x96", backend="sim"), DeviceLimits.from_profile(
        __import__("engine.profiles", fromlist=["load_profiles"]).load_profiles().get("h100-sxm")))
    assert isinstance(out, Refusal) and out.violations[0].field == "block_size"
