"""The tune's search space: the (tile, stages) candidates the plan offers for the profile and shape,
in the cost model's order with the planner's own choice first, and the schedule variations around
the fastest timed trials. Pure planning: nothing here times or runs anything."""

from __future__ import annotations

from engine.errors import InputError
from engine.planner import Plan, PlanError, plan
from engine.profiles import Profile
from engine.task import TaskSpec
from engine.tune_types import Candidate, Trial


def _predicted_ms(p: Plan) -> float | None:
    """The kernel's cost model's time for a plan (``KernelSpec.predict_ms``: a roofline with the
    tile's reuse and its rounds of tiles), or None where the model has nothing to say."""
    from kernels import get_spec

    dtype = p.task.dtype.value
    try:
        return float(get_spec(p.task.kernel).predict_ms(p.task, p.limits, p.profile.sol_peak_flops(dtype),
                                                         p.profile.bandwidth_bytes_per_s))
    except Exception:
        return None


def _check(base: TaskSpec, profile: Profile, cand: Candidate) -> tuple[Plan | None, str]:
    """(plan, '') where the candidate fits, else (None, the reason naming the limit)."""
    try:
        p = plan(cand.task(base), profile)
    except PlanError as exc:
        return None, str(exc)
    return (p, "") if p.ok else (None, p.error_text())


def held_fixed(base_plan: Plan, task: TaskSpec) -> TaskSpec:
    """The task every candidate starts from: the plan's resolved task with only the knobs the user
    set (tile, stages, schedule choices); what the planner chose or lent is the tuner's to vary."""
    return base_plan.task.model_copy(update={"block_size": task.block_size, "memory_pipelining": task.memory_pipelining,
                                             "schedule": dict(task.schedule)})


def search_space(task: TaskSpec, profile: Profile) -> tuple[Plan, list[Candidate], list[Trial]]:
    """(the task's own plan, the (tile, stages) candidates that fit in search order, the ones
    pruned with their reasons). Knobs the task sets are held fixed; the planner's choice comes first,
    then the rest by predicted time."""
    try:
        base_plan = plan(task, profile)
    except PlanError as exc:
        raise InputError(str(exc)) from None
    if not base_plan.ok:
        raise InputError(base_plan.error_text(), fix=base_plan.fix)
    base = held_fixed(base_plan, task)
    tiles = [str(task.block_size)] if task.block_size else list(base_plan.block_size_options)
    out: list[Candidate] = []
    skipped: list[Trial] = []
    # the default as the planner gives it: with the schedule it lends from a tuned shape (a knob the
    # tuner varies, not one held fixed), beside the same tile and depth with the kernel's own choices
    lent = {k: v for k, v in base_plan.task.schedule.items() if k not in task.schedule}
    default = Candidate(str(base_plan.task.block_size), int(base_plan.task.memory_pipelining or 0), lent,
                        _predicted_ms(base_plan))
    seen = {default.key}
    for tile in tiles:
        try:
            stages = ([task.memory_pipelining] if task.memory_pipelining is not None else
                      list(plan(base.model_copy(update={"block_size": tile}), profile).pipelining_options))
        except PlanError:
            stages = []
        if not stages:
            skipped.append(Trial(tile, 0, {}, "skipped", reason=f"no MEMORY_PIPELINING fits BLOCK_SIZE={tile}"))
        for st in stages:
            cand = Candidate(tile, int(st), {})
            if cand.key in seen:
                continue
            seen.add(cand.key)
            p, why = _check(base, profile, cand)
            if p is None:
                skipped.append(Trial(tile, int(st), {}, "skipped", reason=why))
            else:
                out.append(Candidate(tile, int(st), {}, _predicted_ms(p)))
    out.sort(key=lambda c: (c.predicted_ms is None, c.predicted_ms or 0.0))
    return base_plan, [default, *out], skipped


def _resolved_key(block_size: str, stages: int, p: Plan) -> str:
    """A build's identity among the variations: its knobs and every schedule choice as planned."""
    return f"plan {block_size}/{stages} " + ",".join(f"{k}={v}" for k, v in sorted(p.schedule.items()))


def variations(base: TaskSpec, profile: Profile, seeds: list[Trial],
               seen: set[str]) -> tuple[list[Candidate], list[Trial]]:
    """Schedule choices around the fastest timed trials: each choice the kernel has that neither the
    task nor the seed sets, set to each value other than the one the planner resolved, one at a
    time on top of the seed's own choices; (candidates, pruned). A variation that resolves to a build
    already offered (multicast=w is cluster=2 on an unswapped tile) is not offered again."""
    out: list[Candidate] = []
    skipped: list[Trial] = []
    for t in seeds:
        try:
            p = plan(base.model_copy(update={"block_size": t.block_size, "memory_pipelining": t.memory_pipelining,
                                              "schedule": {**base.schedule, **t.schedule}}), profile)
        except PlanError:
            continue
        seen.add(_resolved_key(t.block_size, t.memory_pipelining, p))
        for knob in p.schedule_options:
            if knob.name in base.schedule or knob.name in t.schedule:
                continue
            for value in knob.values:
                if p.schedule.get(knob.name) == value:
                    continue
                cand = Candidate(t.block_size, t.memory_pipelining, {**t.schedule, knob.name: value}, phase=2)
                if cand.key in seen:
                    continue
                seen.add(cand.key)
                cp, why = _check(base, profile, cand)
                if cp is None:
                    skipped.append(Trial(cand.block_size, cand.memory_pipelining, cand.schedule, "skipped",
                                         reason=why, phase=2))
                elif (rk := _resolved_key(cand.block_size, cand.memory_pipelining, cp)) in seen:
                    continue
                else:
                    seen.add(rk)
                    out.append(Candidate(cand.block_size, cand.memory_pipelining, cand.schedule,
                                         _predicted_ms(cp), phase=2))
    return out, skipped
