"""The bench tables' rows: ``Variant`` (a build's knobs, None = the engine's choice), the engine's own
build of a tile and stage count, building a row as it runs, and the shapes and M shared by modes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

from engine import get_spec
from kernels.gemm_residual_experiments import hopper_plan
from kernels.spec import DeviceLimits

SWEEP = (256, 512, 1024, 1571, 2048, 4096, 7976, 8192)
"""The M of the M sweeps (N = K = 2560)."""
CL_SHAPES = [(1, 2560, 2560), (586, 2560, 2560), (1571, 2560, 2560), (2048, 2560, 2560),
             (8192, 2560, 2560), (300, 136, 200), (130, 264, 72), (384, 520, 136)]
"""Check shapes: M = 1 to multi-wave, and N, K no tile divides."""


class Variant(NamedTuple):
    """One build of the tables: the first five fields always, the rest ``kernels.sm90.codegen.build``
    arguments whose default (None) is the engine's own choice. A table row is a plain tuple of the
    leading fields or a ``Variant`` with keywords; ``variant`` reads either."""

    tile: str
    stages: int
    dtype: str
    fuse: bool
    streamk: bool | None
    pingpong: bool | None = None
    cluster: Any = None
    split_hi: bool | None = None
    promote: int | None = None
    raster_m: bool | None = None
    raster_group: int | None = None
    epi_ring: bool | None = None
    epi_shared: bool | None = None
    grid: int | None = None  # CTAs launched (whole clusters), the tiles spread over them
    tail_shift: bool | None = None  # partial last tiles moved back to end at M, N (ADR-0007 E10)
    dp_tiles: int | None = None  # with it: schedule (grid or every SM, dp_tiles), stream-K past them
    half_tail: bool | None = None  # the last round's tiles as 64-row halves (ADR-0007 E11)


def engine_default(tile: str, stages: int, dtype: str) -> Variant:
    """The row for the engine's own build of these knobs: every choice left to ``build`` (forcing
    ``streamk=True`` would compile the stream-K code in where the engine leaves it out, ADR-0007 E3)."""
    return Variant(tile, stages, dtype, True, None)


def build_variant(limits: DeviceLimits, m: int, n: int, k: int, v: tuple,
                  schedule: tuple[int, int] | None = None):
    """One table row built as it runs: the Hopper plan with every ``Variant`` field forced
    (``hopper_plan``; ``grid``: that many CTAs, every tile data-parallel, unless ``schedule`` is
    given), rendered by the ``gemm_residual`` spec."""
    v = variant(v)
    if schedule is None and v.dp_tiles is not None:
        schedule = (v.grid or limits.sm_count, v.dp_tiles)  # the tiles past dp_tiles split
    if schedule is None and v.grid:
        schedule = (v.grid, 1 << 30)  # every tile data-parallel (the kernel clamps)
    task = SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=v.dtype)
    plan = hopper_plan(task, limits, v.tile, v.stages, fuse=v.fuse, streamk=v.streamk,
                       schedule=schedule, pingpong=v.pingpong, cluster=v.cluster,
                       split_hi=v.split_hi, promote=v.promote,
                       raster_m=v.raster_m, raster_group=v.raster_group,
                       epi_ring=v.epi_ring, epi_shared=v.epi_shared,
                       tail_shift=v.tail_shift, half_tail=v.half_tail)
    return get_spec("gemm_residual").render(plan, limits)


def variant(v: tuple) -> Variant:
    """A table row (a tuple of ``Variant``'s leading fields, or a ``Variant``) as a ``Variant``."""
    return Variant(*v)


def for_dtype(v: tuple, dt: str) -> tuple:
    """A duel table's variant with its "{dt}" placeholder filled in (a ``Variant`` stays one)."""
    filled = [x.format(dt=dt) if isinstance(x, str) else x for x in v]
    return Variant(*filled) if isinstance(v, Variant) else tuple(filled)



def cluster_tag(info: dict) -> str:
    """'2x1' where a build's info names a cluster ('2x1, W multicast'), '' for 'none'."""
    cl = str(info.get("cluster", "none"))
    return "" if cl == "none" else cl.split(",")[0]
