"""``kernels.gemm_residual_experiments``: the Hopper path's research entry gives the planner's own
build for every forced choice, through the ``gemm_residual`` spec's ``render``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import kernels.sm90.codegen as sm90_codegen
import kernels.sm90.defaults as sm90_defaults
import kernels.sm90.model as sm90_model
import kernels.sm90.tiles as sm90_tiles
from engine import get_spec, load_profiles
from kernels.gemm_residual_experiments import hopper_knobs, hopper_plan, hopper_schedules, hopper_tiles
from kernels.spec import DeviceLimits

H200 = DeviceLimits.from_profile(load_profiles().get("h200"))


@pytest.mark.parametrize("shape,dtype,tile,stages,choices", [
    ((8192, 2560, 2560), "bf16", "128x128", 5, {}),
    ((8192, 2560, 2560), "bf16", "128x256", 3, {"streamk": False, "pingpong": False, "cluster": 2}),
    ((1337, 2560, 2560), "fp16", "128x160", 4, {"schedule": (132, 3), "streamk": True}),
    ((8192, 2560, 2560), "fp32", "128x128", 3, {"split_hi": True, "promote": 2}),
    ((1571, 2560, 2560), "bf16", "128x256", 3, {"tail_shift": False, "raster_m": True}),
    ((2500, 2560, 2560), "bf16", "128x160", 4, {"half_tail": False, "streamk": False}),
    ((8192, 2560, 2560), "tf32", "128x128", 4, {"fuse": False}),
    ((16, 4096, 4096), "bf16", "16x64", 12, {}),  # a swapped decode tile
    ((1000, 2560, 2560), "bf16", "104x256", 4, {"tail_shift": False}),  # a swapped tile
])
def test_a_forced_plan_renders_as_the_planner_builds_it(shape, dtype, tile, stages, choices):
    task = SimpleNamespace(shape=dict(zip("mnk", shape, strict=True)), dtype=dtype)
    plan = hopper_plan(task, H200, tile, stages, **choices)
    assert get_spec("gemm_residual").render(plan, H200) == sm90_codegen.build(task, H200, tile, stages, **choices)
    assert plan.memory_pipelining == stages and plan.detail.stages == stages


def test_hopper_knobs_are_the_hopper_paths_even_where_the_spec_takes_the_decode_path():
    shape = {"m": 4, "n": 4096, "k": 4096}
    assert hopper_knobs(H200, "bf16", shape) == sm90_defaults.default_knobs(H200, "bf16", shape) == ("8x64", 12)
    spec = get_spec("gemm_residual")
    from engine import TaskSpec
    from kernels.spec import plan_or_raise

    planned = plan_or_raise(spec, TaskSpec(kernel="gemm_residual", shape=shape, dtype="bf16"), H200)
    assert type(planned.detail).__name__ == "SkinnyPlan"  # the product's default here: the decode path


def test_the_tiles_and_schedules_are_the_planners():
    assert hopper_tiles() == tuple(sm90_tiles.TILES)
    for m in (1, 1337, 8192):
        assert hopper_schedules(m, 2560, 2560, 128, 256, 132) == sm90_model.schedule_candidates(m, 2560, 2560, 128, 256, 132)
