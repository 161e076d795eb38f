"""The plan is a value: planned once in the caller, rendered once in the engine process."""

from __future__ import annotations

import collections

import pytest

import kernels
import kernels.sm90.planner as sm90_planner
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
    for owner, name, key in ((cls, "plan", "spec.plan"), (cls, "render", "spec.render"), (sm90_planner, "plan", "sm90.plan")):
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


def test_block_size_text_is_parsed_only_by_the_validator_and_tile():
    """No module of the product splits BLOCK_SIZE text itself: a ``.split("x")`` or a tile regex
    appears only in ``Tile.parse`` (kernels/spec.py) and the task's validator (engine/task.py)."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    allowed = {("kernels/spec.py", "parse"), ("engine/task.py", "parse_tile")}
    found = []
    for folder in ("engine", "kernels", "tui"):
        for path in (root / folder).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text())
            for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                for node in ast.walk(fn):
                    splits_x = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                                and node.func.attr == "split" and node.args
                                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "x")
                    tile_regex = isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(
                        re.search(r"\\d\{?[\d,]*\}?\)?x", node.value))
                    if (splits_x or tile_regex) and (rel, fn.name) not in allowed:
                        found.append(f"{rel}:{fn.name}:{node.lineno}")
    assert not found, f"BLOCK_SIZE parsed outside Tile.parse and the task validator: {sorted(set(found))}"
    from engine.task import TaskSpec
    from kernels.spec import Tile

    task = TaskSpec(block_size=" 128X256 ")
    assert task.block_size == Tile(128, 256) and task.model_dump(mode="json")["block_size"] == "128x256"
    assert task.model_copy(update={"block_size": "64x80"}).block_size == Tile(64, 80)
    with pytest.raises(TypeError, match="compare Tile.parse"):
        _ = task.block_size == "128x256"
