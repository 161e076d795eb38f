"""``gemm_residual``: the headline kernel, choosing its path by compute capability.

On Hopper (9.0) it runs the Hopper-native path (TMA + mbarrier pipeline + wgmma, warp-specialised,
persistent: kernels/sm90/, kernels/gemm_residual_sm90.cu) for bf16/fp16/tf32, and for fp32 by 3xTF32 (fp32-class
accuracy on the tensor cores); everywhere else the portable path (mma.sync + cp.async multistage,
or fp32 FFMA: kernels/gemm_residual.*). ``gemm_residual_mma`` forces the portable path on any GPU,
so it can be checked on Hopper too (and keeps true-FFMA fp32 there)."""

from __future__ import annotations

from typing import Any

import kernels.sm90.choices as sm90_choices_mod
import kernels.sm90.codegen as sm90_codegen
import kernels.sm90.defaults as sm90_defaults
import kernels.sm90.model as sm90_model
import kernels.sm90.planner as sm90_planner
import kernels.sm90.smem as sm90_smem
import kernels.sm90.tiles as sm90_tiles
from kernels import gemm_residual_skinny as sk
from kernels.gemm_residual import GemmResidualSpec
from kernels.gemm_residual_cost import (
    SKINNY_SIM_BANDWIDTH,
    decode_tile_share,
    skinny_cost_us,
    sm90_predict_ms,
)
from kernels.sm90.codegen import describe as sm90_describe
from kernels.spec import Build, DeviceLimits, KernelPlan, KnobDef, KnobError, Tile, Violation, tile_text

SM90_SCHEDULE = (
    KnobDef("consumers", ("pingpong", "cooperative"),
            "ping-pong: each consumer warpgroup owns whole tiles, alternately, so one's epilogue "
            "overlaps the other's main loop; cooperative: both share every tile"),
    KnobDef("cluster", (1, 2), "2: pairs of CTAs in thread-block clusters sharing an operand's tile by TMA "
            "multicast (W's unless multicast says otherwise)"),
    KnobDef("multicast", ("w", "a", "none"),
            "the operand a cluster's two CTAs share, each loading half its tile: w (neighbours along M) "
            "or a (neighbours along N); none: each loads its own, the cluster only places the pair on "
            "one GPC; alone it implies cluster=2"),
    KnobDef("raster", ("n", "m", "group"),
            "tile order of the persistent grid: N blocks fastest, M blocks fastest, or groups of 4 M blocks"),
    KnobDef("split", ("off", "streamk", "halves"),
            "the last, part-full round of tiles: as it falls (off), split over K across the grid "
            "(stream-K), or run as 64-row halves on twice the CTAs"),
)
"""The Hopper path's schedule choices (``TaskSpec.schedule``); left out, the planner decides."""
DECODE_MULTICAST = KnobDef("multicast", ("none",),
                           "none: a cluster's two CTAs each load their own tiles, the cluster only places the "
                           "pair on one GPC (a decode tile shares the tokens with cluster=2, never W)")
"""A decode tile's multicast choice (``SM90_SCHEDULE``'s w it refuses, a is its cluster=2)."""
SWAPPED_SCHEDULE = ("cluster", "multicast", "raster")
"""The choices a swapped tile (``sm90_tiles.SWAP_TILES``) has: its consumers are cooperative and its tiles
run whole (``_plan_swapped``)."""


SKINNY_SCHEDULE = (
    KnobDef("warps", sk.WARPS_OPTIONS, "warps per CTA: they split the CTA's rows of W and its K range"),
    KnobDef("split_k", sk.SPLIT_K_OPTIONS,
            "CTAs per output tile along K, their fp32 partials summed by the last to arrive (deterministic)"),
    KnobDef("a_smem", sk.A_SMEM_OPTIONS,
            "1: the CTA stages its slice of A in shared memory once (cp.async) for all its warps; 0: each "
            "warp loads A's fragments from L2"),
    KnobDef("w_bulk", sk.W_BULK_OPTIONS,
            "0: W straight into registers; a producer warp fills a shared-memory ring of W's rows and A's "
            "tokens, read with ldmatrix (Hopper, K % 8 == 0), by 1: one bulk copy per row, 2: TMA boxes"),
    KnobDef("bulk_k", sk.BULK_K_OPTIONS,
            "K elements per ring slot with w_bulk 1 or 2 (setting it alone implies w_bulk 1)"),
)
"""The decode path's schedule choices (``kernels.gemm_residual_skinny``)."""
SKINNY_DEFAULT_MAX_M = 16
"""The planner takes the decode path by default up to this M (16-bit data, cc >= 8.0): on the H200
its mma.sync work outgrows W's streaming time beyond (ADR-0003: M = 16 0.84x cuBLAS, M = 32 1.6x,
M = 64 2.2x); the tuner still tries it up to ``sk.MAX_M``."""
HOPPER_SKINNY_DEFAULT_MAX_M = 8
"""On Hopper the decode path is the default only up to this M; beyond, the Hopper GEMM's decode tiles
(ADR-0011: at M = 16 0.94-0.99 of cuBLAS against the decode path's 0.95-1.06; at M <= 8 and
N <= 5120 the decode path stayed 1-3 % ahead)."""
def sm90_choices(schedule: dict[str, Any], task: Any, limits: DeviceLimits, block_size: str,
                 stages: int) -> dict[str, Any]:
    """``sm90_planner.plan``'s keyword arguments for a task's schedule choices; ValueError naming the
    choice for an unknown name or value, or one this shape cannot take."""
    known = {k.name: k for k in SM90_SCHEDULE}
    out: dict[str, Any] = {}
    for key, value in (schedule or {}).items():
        if key not in known:
            raise KnobError(f"schedule.{key}", value, f"unknown choice (the Hopper path has {', '.join(known)})")
        if value not in known[key].values:
            raise KnobError(f"schedule.{key}", value, f"takes {', '.join(map(str, known[key].values))}")
    if "consumers" in schedule:
        out["pingpong"] = schedule["consumers"] == "pingpong"
    if "cluster" in schedule:
        out["cluster"] = int(schedule["cluster"])
        out["pairs"] = False
    if "multicast" in schedule:
        if schedule.get("cluster", 2) != 2:
            raise KnobError("schedule.multicast", schedule["multicast"], "an operand shared by a cluster: with cluster=2")
        if schedule["multicast"] == "none":
            out.update(cluster=1, pairs=True)
        else:
            out["cluster"] = sm90_tiles.multicast_cluster(schedule["multicast"], sm90_tiles.swapped(block_size))
    raster = schedule.get("raster")
    if raster is not None:
        # a swapped tile's kernel runs the problem's N as its M: its M-fastest order is the problem's N
        m_fastest = raster == ("n" if sm90_tiles.swapped(block_size) else "m")
        out["raster_m"], out["raster_group"] = m_fastest, (sm90_choices_mod.RASTER_GROUP_M_BLOCKS if raster == "group" else 0)
    split = schedule.get("split")
    if split == "off":
        out.update(streamk=False, half_tail=False)
    elif split == "halves":
        out.update(streamk=False, half_tail=True)
    elif split == "streamk":
        m, n, k = sm90_tiles._mnk(task.shape)
        k16 = sm90_tiles._k16(k, task.dtype)
        bm, bn, _ = sm90_tiles.parse_block_size(block_size, task.dtype)
        splits = sm90_model.schedule_candidates(m, n, k16, bm, bn, limits.sm_count)[1:]
        if not splits:
            raise KnobError("schedule.split", "streamk", "this shape's tiles leave no part-full round to split")
        best = min(splits, key=lambda c: sm90_model.schedule_cost(m, n, k16, block_size, limits.sm_count, *c))
        out.update(streamk=True, half_tail=False, schedule=best)
    return out


def _schedule_text(schedule: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(schedule.items())) or "auto"


class PortableGemmResidualSpec(GemmResidualSpec):
    name = "gemm_residual_mma"
    title = "GEMM + residual, portable path (mma.sync + cp.async; fp32 FFMA)"


class AutoGemmResidualSpec(GemmResidualSpec):
    name = "gemm_residual"
    source_files = (*GemmResidualSpec.source_files, "gemm_residual_auto.py", *sm90_codegen.SOURCE_FILES,
                    "gemm_residual_skinny.py", "gemm_residual_skinny.cu", "mbarrier.cuh")
    title = "GEMM + residual add (attention output projection), Hopper wgmma path on 9.0"

    @staticmethod
    def _hopper(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None) -> bool:
        return sm90_tiles.supported(limits, dtype, shape)

    @staticmethod
    def _skinny_fits(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None) -> bool:
        """The decode path applies: 16-bit data, mma.sync's bf16 (cc >= 8.0), M <= 64 (any shape
        when it is unknown)."""
        return (dtype in sk.DTYPES and tuple(limits.compute_capability) >= (8, 0)
                and (shape is None or shape.get("m", 0) <= sk.MAX_M))

    def _shape(self, task: Any) -> dict[str, int] | None:
        try:
            return self.normalize_shape(task.shape)
        except ValueError:
            return None

    def _path(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None, block_size: Any) -> str:
        """'skinny', 'sm90' or 'portable': the path these knobs build (no BLOCK_SIZE: the default's)."""
        block_size = tile_text(block_size)
        if block_size is None:
            block_size = self.default_knobs(limits, dtype, shape)[0]
        path = "sm90" if self._hopper(limits, dtype, shape) else "portable"
        if self._skinny_tile(limits, dtype, block_size, path):
            return "skinny"
        return path

    def _skinny_tile(self, limits: DeviceLimits, dtype: str, block_size: Any, other: str) -> bool:
        """A decode-path tile; a name the other path also has (the portable 64x64, 64x128) stays
        that path's."""
        block_size = tile_text(block_size)
        name = str(block_size)
        if name not in sk.TILES or not self._skinny_fits(limits, dtype, None):
            return False
        theirs = sm90_tiles.TILES if other == "sm90" else [Tile.parse(t).name
                                                      for t in super().block_size_options(limits, dtype)]
        return name not in theirs

    def _skinny_tiles(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None) -> list[str]:
        if not self._skinny_fits(limits, dtype, shape):
            return []
        other = "sm90" if self._hopper(limits, dtype) else "portable"
        return [t for t in sk.TILES if self._skinny_tile(limits, dtype, t, other)]

    @staticmethod
    def _decode_tiles_for(tiles: list[str], shape: dict[str, int] | None) -> list[str]:
        """With a shape, of the Hopper path's decode tiles only the one holding M in one row of tiles
        (``sm90_tiles.decode_tile``; none past its largest M): a narrower one streams W once per row of
        tiles, a wider one computes rows past M. Any one of them still runs where a task names it."""
        if not shape:
            return tiles
        try:
            own = sm90_tiles.decode_tile(shape.get("m", 0))
        except ValueError:
            own = None
        return [t for t in tiles if t not in sm90_tiles.DECODE_TILES or t == own]

    def block_size_options(self, limits: DeviceLimits, dtype: str,
                           shape: dict[str, int] | None = None) -> list[str]:
        skinny = self._skinny_tiles(limits, dtype, shape)
        if self._hopper(limits, dtype):
            return self._decode_tiles_for(sm90_smem.block_size_options(limits, dtype), shape) + skinny
        return super().block_size_options(limits, dtype) + skinny

    def pipelining_options(self, limits: DeviceLimits, dtype: str, block_size: str,
                           shape: dict[str, int] | None = None) -> list[int]:
        block_size = tile_text(block_size)
        if self._path(limits, dtype, shape, block_size) == "skinny":
            bm, bn = sk.parse_block_size(block_size)
            k = (shape or {}).get("k", 8)
            if sk.default_w_bulk(k, limits):  # a stage is a ring slot
                p = sk.plan((shape or {}).get("m", bm), (shape or {}).get("n", bn), k, dtype, limits, block_size)
                return sk.bulk_stages_that_fit(bm, bn, p.warps, p.bulk_k, limits, p.w_bulk)
            return sk.stages_that_fit(bm, bn, sk.DEFAULT_WARPS, k)
        if self._hopper(limits, dtype, shape):
            return sm90_smem.pipelining_options(limits, dtype, block_size, shape)
        return super().pipelining_options(limits, dtype, block_size, shape)

    def default_knobs(self, limits: DeviceLimits, dtype: str,
                      shape: dict[str, int] | None = None) -> tuple[str, int]:
        top = HOPPER_SKINNY_DEFAULT_MAX_M if self._hopper(limits, dtype, shape) else SKINNY_DEFAULT_MAX_M
        if shape and self._skinny_fits(limits, dtype, shape) and shape["m"] <= top:
            p = sk.plan(shape["m"], shape["n"], shape["k"], dtype, limits)
            return p.block_size, p.stages
        if self._hopper(limits, dtype, shape):
            return sm90_defaults.default_knobs(limits, dtype, shape)
        return super().default_knobs(limits, dtype, shape)

    def same_family(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None, block_size: str,
                    other: str) -> bool:
        """Both tiles build the same path (decode, Hopper or portable) for this shape: a default lent
        from a tuned shape must not carry one path's knobs across to another's (but for a Hopper decode
        tile, lent where either path would run). On the decode path
        the lent tile must also hold the tokens in no more CTA rows than the path's own (each row
        of CTAs streams W again: an 8-token tile lent from M = 8 to M = 16 reads W twice); a Hopper
        decode tile only where it is the one for M (``sm90_tiles.decode_tile``): one row of tiles."""
        block_size = tile_text(block_size)
        other = tile_text(other)
        if other in sm90_tiles.DECODE_TILES and self._path(limits, dtype, shape, other) == "sm90":
            # the Hopper decode design, for M either path would take: lent only where it holds M in
            # one row of tiles (a narrower R streams W twice, a wider one stages rows past M)
            try:
                return shape is not None and sm90_tiles.decode_tile(shape["m"]) == other
            except (KeyError, ValueError):
                return False
        path = self._path(limits, dtype, shape, block_size)
        if path != self._path(limits, dtype, shape, other):
            return False
        if path == "skinny":
            return sk.parse_block_size(other)[0] >= sk.parse_block_size(block_size)[0]
        return True

    def stages_for_schedule(self, limits: DeviceLimits, dtype: str, block_size: str,
                            shape: dict[str, int] | None, schedule: dict[str, Any]) -> int | None:
        """The decode path with W by bulk copies: a stage is a ring slot, its count the bulk plan's."""
        block_size = tile_text(block_size)
        if shape is None or not (schedule.get("w_bulk") or schedule.get("bulk_k")):
            return None
        if self._path(limits, dtype, shape, block_size) != "skinny":
            return None
        try:
            return sk.plan(shape["m"], shape["n"], shape["k"], dtype, limits, block_size, None,
                           schedule.get("warps"), schedule.get("split_k"), a_smem=schedule.get("a_smem"),
                           w_bulk=schedule.get("w_bulk"), bulk_k=schedule.get("bulk_k")).stages
        except ValueError:
            return None  # the check names the knob

    def stages_for(self, limits: DeviceLimits, dtype: str, block_size: str,
                   shape: dict[str, int] | None = None) -> int:
        block_size = tile_text(block_size)
        path = self._path(limits, dtype, shape, block_size)
        if path == "skinny":
            bm, bn = sk.parse_block_size(block_size)
            k = (shape or {}).get("k", 8)
            if shape is not None and sk.default_w_bulk(k, limits):
                try:
                    return sk.plan(shape["m"], shape["n"], k, dtype, limits, block_size).stages
                except ValueError:
                    return 0
            return sk.default_stages(bm, bn, sk.DEFAULT_WARPS, k)
        if path == "sm90":
            try:
                return sm90_defaults.default_stages(limits, dtype, block_size, shape)
            except ValueError:
                return super().stages_for(limits, dtype, block_size, shape)
        stages = self.default_stages(limits, dtype, block_size)
        return stages if stages is not None else super().stages_for(limits, dtype, block_size, shape)

    def schedule_knobs(self, limits: DeviceLimits, dtype: str,
                       shape: dict[str, int] | None = None, block_size: Any = None) -> list[KnobDef]:
        block_size = tile_text(block_size)
        tile = block_size if block_size is not None else self.default_knobs(limits, dtype, shape)[0]
        path = self._path(limits, dtype, shape, tile)
        if path == "sm90":
            if sm90_tiles.swapped(str(tile)):  # cooperative and whole tiles whatever is asked: no choice there
                if str(tile) in sm90_tiles.DECODE_TILES:
                    # a decode tile streams W evict-first: a cluster shares only the tokens (cluster=2)
                    # or nothing (pairs)
                    return [DECODE_MULTICAST if k.name == "multicast" else k
                            for k in SM90_SCHEDULE if k.name in SWAPPED_SCHEDULE]
                return [k for k in SM90_SCHEDULE if k.name in SWAPPED_SCHEDULE]
            return list(SM90_SCHEDULE)
        return list(SKINNY_SCHEDULE) if path == "skinny" else []

    def check(self, task: Any, limits: DeviceLimits) -> list[Violation]:
        dtype = task.dtype.value
        shape = self._shape(task)
        path = self._path(limits, dtype, shape, tile_text(task.block_size)) if shape is not None else "portable"
        if path == "skinny":
            return self._skinny_check(task, limits, shape)
        if path == "sm90":  # the planner's own refusals come from ``decide``
            return sm90_planner.check(task.model_copy(update={"shape": shape}), limits)
        out = super().check(task, limits)
        if task.schedule:
            out.append(Violation("schedule", dict(task.schedule),
                                 "this path has no schedule choices (the Hopper and decode paths have)"))
        return out

    def _skinny_check(self, task: Any, limits: DeviceLimits, shape: dict[str, int]) -> list[Violation]:
        known = {k.name for k in SKINNY_SCHEDULE}
        out = [Violation(f"schedule.{key}", value, f"unknown choice (the decode path has {', '.join(sorted(known))})")
               for key, value in task.schedule.items() if key not in known]
        if out:
            return out
        p = self._skinny_plan(task, limits, shape)
        if isinstance(p, Violation):
            return [p]
        return sk.check(shape["m"], shape["n"], shape["k"], task.dtype.value, limits, tile_text(task.block_size),
                        p.stages, p.warps, p.split_k, a_smem=p.a_smem, w_bulk=p.w_bulk, bulk_k=p.bulk_k)

    def _skinny_plan(self, task: Any, limits: DeviceLimits, shape: dict[str, int]) -> Any:
        """The decode path's plan, or the Violation its planner names."""
        sched = task.schedule or {}
        try:
            return sk.plan(shape["m"], shape["n"], shape["k"], task.dtype.value, limits, tile_text(task.block_size),
                           task.memory_pipelining, sched.get("warps"), sched.get("split_k"), bool(task.fusion),
                           a_smem=sched.get("a_smem"), w_bulk=sched.get("w_bulk"), bulk_k=sched.get("bulk_k"))
        except ValueError as exc:
            text = str(exc)
            field, _, rest = text.partition("=")
            value, _, message = rest.partition(": ")
            if field.startswith(("schedule.", "shape.", "memory_pipelining", "block_size", "dtype")) and message:
                return Violation(field, value, message)
            return Violation("block_size", tile_text(task.block_size), text)

    def decide(self, task: Any, limits: DeviceLimits) -> KernelPlan:
        try:
            return self._decide(task, limits)
        except KnobError:
            raise
        except ValueError as exc:  # the planner cannot build these choices together
            raise KnobError("schedule", _schedule_text(task.schedule), str(exc)) from None

    def _decide(self, task: Any, limits: DeviceLimits) -> KernelPlan:
        dtype = task.dtype.value
        shape = self.normalize_shape(task.shape)
        path = self._path(limits, dtype, shape, tile_text(task.block_size))
        if path == "skinny":
            p = self._skinny_plan(task, limits, shape)
            if isinstance(p, Violation):
                raise KnobError(p.field, p.value, p.message)
            schedule = {"warps": p.warps, "split_k": p.split_k, "a_smem": p.a_smem}
            if p.w_bulk:
                schedule.update(w_bulk=p.w_bulk, bulk_k=p.bulk_k)
            return KernelPlan(block_size=Tile(p.bm, p.bn), memory_pipelining=p.stages, schedule=schedule, detail=p)
        if path == "portable":
            return super().decide(task, limits)
        t = task.model_copy(update={"shape": shape})
        stages = task.memory_pipelining or 0
        choices = sm90_choices(dict(task.schedule or {}), t, limits, tile_text(task.block_size), stages)
        p = sm90_planner.plan(t, limits, tile_text(task.block_size), stages, **choices)
        resolved = p.schedule()
        for key, value in (task.schedule or {}).items():
            if resolved.get(key) != value:
                raise KnobError(f"schedule.{key}", value, f"BLOCK_SIZE={tile_text(task.block_size)} with {stages} stages "
                                f"runs {key}={resolved.get(key)} at this shape")
        return KernelPlan(block_size=p.tile, memory_pipelining=stages, schedule=resolved, detail=p)

    def describe(self, plan: KernelPlan, task: Any, limits: DeviceLimits) -> dict[str, Any]:
        if isinstance(plan.detail, sm90_planner.Sm90Plan):
            return sm90_describe(plan.detail, limits)
        if isinstance(plan.detail, sk.SkinnyPlan):
            return plan.detail.info()
        return super().describe(plan, task, limits)

    def render(self, plan: KernelPlan, limits: DeviceLimits) -> Build:
        if isinstance(plan.detail, sm90_planner.Sm90Plan):
            return sm90_codegen.render(plan.detail, limits)
        if isinstance(plan.detail, sk.SkinnyPlan):
            shape = self.normalize_shape(plan.task.shape)
            return sk.render(plan.detail, shape["m"], shape["n"], shape["k"], plan.task.dtype.value)
        return super().render(plan, limits)

    def predict_ms(self, task: Any, limits: DeviceLimits, peak_flops: float, bandwidth_bytes_per_s: float) -> float:
        """The tuner's prior. Decode path: its own model (``sk.cost_us``). Hopper path: a roofline per
        tile (``sm90_predict_ms``): each CTA's tiles at the tensor-core rate or at its share of the
        L2's bandwidth for the tile's operands, whichever is slower, times the rounds of tiles the
        plan runs (wave quantisation), against the DRAM floor."""
        shape = self.normalize_shape(task.shape)
        kp = self.decide(task, limits)
        if isinstance(kp.detail, sk.SkinnyPlan):
            return 1e-3 * skinny_cost_us(kp.detail, shape, task.dtype.value, bandwidth_bytes_per_s, limits)
        if isinstance(kp.detail, sm90_planner.Sm90Plan):
            return sm90_predict_ms(kp.detail, limits, peak_flops, bandwidth_bytes_per_s,
                                   self.bytes_moved(shape, task.dtype.value))
        return super().predict_ms(task, limits, peak_flops, bandwidth_bytes_per_s)

    def sim_efficiency(self, task: Any, limits: DeviceLimits) -> float:
        shape = self._shape(task)
        if shape is not None and self._path(limits, task.dtype.value, shape, tile_text(task.block_size)) == "skinny":
            return self._skinny_efficiency(task, limits, shape)
        if not self._hopper(limits, task.dtype.value):
            return super().sim_efficiency(task, limits)
        if shape is not None and str(tile_text(task.block_size)) in sm90_tiles.DECODE_TILES:
            return self._decode_tile_efficiency(task, limits, shape)
        # Factors from an H200 (ADR-0005): 128x256 with 3 stages and ping-pong 128x128 with 5
        # reach about 72 % of the bf16 datasheet peak; 2 stages ~54 %, off ~37 %; 256x128 -4 %;
        # unfused -12 %.
        stages = task.memory_pipelining or 0
        eff = {0: 0.37, 2: 0.54}.get(stages, 0.72 if stages in (3, 5) else 0.70)
        if tile_text(task.block_size) and str(tile_text(task.block_size)).startswith("256x128"):
            eff *= 0.96
        if not task.fusion:
            eff *= 0.88
        if task.dtype.value == "fp32":  # 3xTF32: 1.00 ms vs its ceiling's 0.65 at the seed shape
            eff *= 0.9
        return eff * self._sim_fill(task, limits)

    def _decode_tile_efficiency(self, task: Any, limits: DeviceLimits, shape: dict[str, int]) -> float:
        """The Hopper decode tiles on the SIMULATED device: the bytes' roofline over W's streaming
        time (``decode_tile_share``)."""
        m, n, k = shape["m"], shape["n"], shape["k"]
        share, row_blocks = decode_tile_share(str(tile_text(task.block_size)), task.memory_pipelining or 0, m, n, limits)
        if not task.fusion:
            share *= 0.88
        return max(0.01, min(0.95, (n * k + m * k + 2 * m * n) / (n * k * row_blocks / share)))

    def _skinny_efficiency(self, task: Any, limits: DeviceLimits, shape: dict[str, int]) -> float:
        """The decode path's cost model (``sk.cost_us``) as a fraction of the bandwidth roofline."""
        p = self._skinny_plan(task, limits, shape)
        if isinstance(p, Violation):
            return 0.05
        m, n, k = shape["m"], shape["n"], shape["k"]
        bw = SKINNY_SIM_BANDWIDTH
        t_bytes_us = 2 * (n * k + m * k + 2 * m * n) / bw * 1e6
        return max(0.01, min(0.95, t_bytes_us / skinny_cost_us(p, shape, task.dtype.value, bw, limits)))

    SIM_SEED_FILL = 8192 * 2560 / (10 * 128 * 128 * 132)
    """The seed shape's share of its rounds' tile slots (128x128: 1280 tiles in 10 rounds of 132),
    where the figures of ``sim_efficiency`` were measured."""

    def _sim_fill(self, task: Any, limits: DeviceLimits) -> float:
        """Wave quantisation for the simulated device: the share of the tile slots this shape's
        rounds fill, counted as the Hopper path's rules count them (``tile_rounds`` with the
        build's cluster and a last round in halves), relative to the seed's; 1.0 where the knobs
        are not resolved. On the H200 M = 1201 (one round of 128x256, 71 % full) ran at 52 % of
        SOL and M = 2500 (128x160, two rounds and one of halves) at 60 %, against 74 % at the seed;
        this gives 53 % and 63 %."""
        shape = self._shape(task)
        dtype = task.dtype.value
        if not shape or not tile_text(task.block_size):
            return 1.0
        try:
            _, work = sm90_choices_mod.round_work(limits, dtype, tile_text(task.block_size), task.memory_pipelining or 0, shape)
        except ValueError:
            return 1.0
        fill = shape["m"] * shape["n"] / (work * limits.sm_count)
        return min(1.0, fill / self.SIM_SEED_FILL)


SPEC = AutoGemmResidualSpec()
PORTABLE_SPEC = PortableGemmResidualSpec()
