"""``gemm_residual``: the headline kernel, choosing its path by compute capability.

On Hopper (9.0) it runs the Hopper-native path (TMA + mbarrier pipeline + wgmma, warp-specialised,
persistent: kernels/gemm_residual_sm90.*) for bf16/fp16/tf32, and for fp32 by 3xTF32 (fp32-class
accuracy on the tensor cores); everywhere else the portable path (mma.sync + cp.async multistage,
or fp32 FFMA: kernels/gemm_residual.*). ``gemm_residual_mma`` forces the portable path on any GPU,
so it can be checked on Hopper too (and keeps true-FFMA fp32 there)."""

from __future__ import annotations

from typing import Any

from kernels import gemm_residual_sm90 as sm90
from kernels.gemm_residual import GemmResidualSpec
from kernels.spec import Build, DeviceLimits, KernelPlan, KnobDef, KnobError, Violation

SM90_SCHEDULE = (
    KnobDef("consumers", ("pingpong", "cooperative"),
            "ping-pong: each consumer warpgroup owns whole tiles, alternately, so one's epilogue "
            "overlaps the other's main loop; cooperative: both share every tile"),
    KnobDef("cluster", (1, 2), "2: 2x1 thread-block clusters sharing W's tile by TMA multicast"),
    KnobDef("raster", ("n", "m", "group"),
            "tile order of the persistent grid: N blocks fastest, M blocks fastest, or groups of 4 M blocks"),
    KnobDef("split", ("off", "streamk", "halves"),
            "the last, part-full round of tiles: as it falls (off), split over K across the grid "
            "(stream-K), or run as 64-row halves on twice the CTAs"),
)
"""The Hopper path's schedule choices (``TaskSpec.schedule``); left out, the planner decides."""


def sm90_choices(schedule: dict[str, Any], task: Any, limits: DeviceLimits, block_size: str,
                 stages: int) -> dict[str, Any]:
    """``sm90.plan``'s keyword arguments for a task's schedule choices; ValueError naming the
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
    raster = schedule.get("raster")
    if raster is not None:
        out["raster_m"], out["raster_group"] = raster == "m", (sm90.RASTER_GROUP_DEFAULT if raster == "group" else 0)
    split = schedule.get("split")
    if split == "off":
        out.update(streamk=False, half_tail=False)
    elif split == "halves":
        out.update(streamk=False, half_tail=True)
    elif split == "streamk":
        m, n, k = sm90._mnk(task.shape)
        k16 = sm90._k16(k, task.dtype)
        bm, bn, _ = sm90.parse_block_size(block_size, task.dtype)
        splits = sm90.schedule_candidates(m, n, k16, bm, bn, limits.sm_count)[1:]
        if not splits:
            raise KnobError("schedule.split", "streamk", "this shape's tiles leave no part-full round to split")
        best = min(splits, key=lambda c: sm90.schedule_cost(m, n, k16, block_size, limits.sm_count, *c))
        out.update(streamk=True, half_tail=False, schedule=best)
    return out


def _schedule_text(schedule: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(schedule.items())) or "auto"


class PortableGemmResidualSpec(GemmResidualSpec):
    name = "gemm_residual_mma"
    title = "GEMM + residual, portable path (mma.sync + cp.async; fp32 FFMA)"


class AutoGemmResidualSpec(GemmResidualSpec):
    name = "gemm_residual"
    source_files = (*GemmResidualSpec.source_files, "gemm_residual_auto.py", "gemm_residual_sm90.py",
                    "gemm_residual_sm90.cu")
    title = "GEMM + residual add (attention output projection), Hopper wgmma path on 9.0"

    @staticmethod
    def _hopper(limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None) -> bool:
        return sm90.supported(limits, dtype, shape)

    def _shape(self, task: Any) -> dict[str, int] | None:
        try:
            return self.normalize_shape(task.shape)
        except ValueError:
            return None

    def block_size_options(self, limits: DeviceLimits, dtype: str) -> list[str]:
        if self._hopper(limits, dtype):
            return sm90.block_size_options(limits, dtype)
        return super().block_size_options(limits, dtype)

    def pipelining_options(self, limits: DeviceLimits, dtype: str, block_size: str,
                           shape: dict[str, int] | None = None) -> list[int]:
        if self._hopper(limits, dtype, shape):
            return sm90.pipelining_options(limits, dtype, block_size, shape)
        return super().pipelining_options(limits, dtype, block_size, shape)

    def default_knobs(self, limits: DeviceLimits, dtype: str,
                      shape: dict[str, int] | None = None) -> tuple[str, int]:
        if self._hopper(limits, dtype, shape):
            return sm90.default_knobs(limits, dtype, shape)
        return super().default_knobs(limits, dtype, shape)

    def schedule_knobs(self, limits: DeviceLimits, dtype: str,
                       shape: dict[str, int] | None = None) -> list[KnobDef]:
        return list(SM90_SCHEDULE) if self._hopper(limits, dtype, shape) else []

    def check(self, task: Any, limits: DeviceLimits) -> list[Violation]:
        dtype = task.dtype.value
        shape = self._shape(task)
        if shape is not None and self._hopper(limits, dtype, shape):
            out = sm90.check(task.model_copy(update={"shape": shape}), limits)
            if not out:
                try:
                    self.plan(task, limits)
                except KnobError as exc:
                    out.append(exc.violation)
                except ValueError as exc:  # the planner cannot build these choices together
                    out.append(Violation("schedule", _schedule_text(task.schedule), str(exc)))
            return out
        out = super().check(task, limits)
        if task.schedule:
            out.append(Violation("schedule", dict(task.schedule),
                                 "this path has no schedule choices (the Hopper path has)"))
        return out

    def plan(self, task: Any, limits: DeviceLimits) -> KernelPlan:
        dtype = task.dtype.value
        shape = self.normalize_shape(task.shape)
        if not self._hopper(limits, dtype, shape):
            return super().plan(task, limits)
        t = task.model_copy(update={"shape": shape})
        stages = task.memory_pipelining or 0
        choices = sm90_choices(dict(task.schedule or {}), t, limits, task.block_size, stages)
        p = sm90.plan(t, limits, task.block_size, stages, **choices)
        resolved = p.schedule()
        for key, value in (task.schedule or {}).items():
            if resolved.get(key) != value:
                raise KnobError(f"schedule.{key}", value, f"BLOCK_SIZE={task.block_size} with {stages} stages "
                                f"runs {key}={resolved.get(key)} at this shape")
        return KernelPlan(block_size=p.tile, memory_pipelining=stages, schedule=resolved, detail=p)

    def build(self, task: Any, limits: DeviceLimits) -> Build:
        kp = self.plan(task, limits)
        if isinstance(kp.detail, sm90.Sm90Plan):
            return sm90.render(kp.detail, limits)
        return super().build(task, limits)

    def sim_efficiency(self, task: Any, limits: DeviceLimits) -> float:
        if not self._hopper(limits, task.dtype.value):
            return super().sim_efficiency(task, limits)
        # Shaped on the H200 measurements of this path (bench/NOTES.md, NOTES-sm90.md): 128x256
        # with 3 stages and ping-pong 128x128 with 5 reach about 72 % of the bf16 datasheet peak;
        # 2 stages ~54 %, off ~37 %; 256x128 -4 %; unfused -12 %.
        stages = task.memory_pipelining or 0
        eff = {0: 0.37, 2: 0.54}.get(stages, 0.72 if stages in (3, 5) else 0.70)
        if task.block_size and str(task.block_size).startswith("256x128"):
            eff *= 0.96
        if not task.fusion:
            eff *= 0.88
        if task.dtype.value == "fp32":  # 3xTF32: 1.00 ms vs its ceiling's 0.65 at the seed shape
            eff *= 0.9
        return eff * self._sim_fill(task, limits)

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
        if not shape or not task.block_size:
            return 1.0
        try:
            _, work = sm90.round_work(limits, dtype, task.block_size, task.memory_pipelining or 0, shape)
        except ValueError:
            return 1.0
        fill = shape["m"] * shape["n"] / (work * limits.sm_count)
        return min(1.0, fill / self.SIM_SEED_FILL)


SPEC = AutoGemmResidualSpec()
PORTABLE_SPEC = PortableGemmResidualSpec()
