"""``gemm_residual``'s Hopper path for research probes: its own default knobs for a shape, and its
plan with the planner's choices forced, as a ``KernelPlan`` that the ``gemm_residual`` spec's
``render`` writes out (``get_spec("gemm_residual").render(plan, limits)``). The product plans
through the spec's ``plan``; these answer what a probe varies beyond a task's ``schedule``
(stream-K compiled in or not, a forced grid, split_hi, promote, the epilogue ring, the tail shift,
...). Probes import this module, never ``kernels.sm90`` (``tests/unit/test_bench_public_api.py``)."""

from __future__ import annotations

from typing import Any

import kernels.sm90.defaults as sm90_defaults
import kernels.sm90.model as sm90_model
import kernels.sm90.planner as sm90_planner
import kernels.sm90.tiles as sm90_tiles
from kernels.spec import DeviceLimits, KernelPlan


def hopper_tiles() -> tuple[str, ...]:
    """Every BLOCK_SIZE the Hopper path has (the limits and the dtype decide which fit)."""
    return tuple(sm90_tiles.TILES)


def hopper_knobs(limits: DeviceLimits, dtype: str, shape: dict[str, int]) -> tuple[str, int]:
    """The Hopper path's own default (BLOCK_SIZE, MEMORY_PIPELINING) for this shape; unlike the
    spec's, never the decode path's, so a probe at small M compares against the Hopper GEMM."""
    return sm90_defaults.default_knobs(limits, dtype, shape)


def hopper_schedules(m: int, n: int, k: int, bm: int, bn: int, sms: int) -> list[tuple[int, int]]:
    """The (grid, dp_tiles) schedules the Hopper planner weighs for a BM x BN tile on ``sms`` SMs:
    data-parallel first, then the stream-K ones (``hopper_plan(schedule=...)`` forces one)."""
    return sm90_model.schedule_candidates(m, n, k, bm, bn, sms)


def hopper_plan(task: Any, limits: DeviceLimits, block_size: str, stages: int, **choices: Any) -> KernelPlan:
    """The Hopper plan of ``task`` (its ``shape``, ``dtype``, optionally ``fusion``) for this tile and
    stage count, each keyword of ``choices`` forcing one of the planner's choices (``fuse``,
    ``streamk``, ``schedule`` = (grid, dp_tiles), ``pingpong``, ``cluster``, ``split_hi``,
    ``promote``, ``raster_m``, ``raster_group``, ``epi_ring``, ``epi_shared``, ``tail_shift``,
    ``half_tail``; None leaves it to the planner). ValueError for a combination the kernel cannot run."""
    p = sm90_planner.plan(task, limits, block_size, stages, **choices)
    return KernelPlan(p.tile, p.stages, p.schedule(), detail=p, task=task)
