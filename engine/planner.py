"""One planning call: what a task will run on a profile, decided once for every caller.

``plan(task, profile)`` resolves the knobs (the task's own, else a tuned entry from the tuning
cache, else the kernel's defaults), checks them against the profile's limits, lists the options
that fit and the fix for each violation, and predicts T_SOL. The runner, ``tui kernels``, ``tui
tune`` and every cockpit screen use it; none of them decides a default or rebuilds a spec's limits
itself. Pure: no I/O, no CUDA, no store (a tuned entry is looked up by the caller's ``tuned``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.profiles import Profile
from engine.sol import sol_figures
from engine.task import TaskSpec, format_pipelining
from engine.tuned_knobs import RULES_LABEL, TunedKnobs
from kernels import get_spec
from kernels.spec import DeviceLimits, KernelPlan, KnobDef, Refusal, Tile, Violation, fill_knobs

KNOB_FIELDS = ("block_size", "memory_pipelining")


@dataclass(frozen=True)
class Plan:
    """What a task will run: the resolved task, where each knob came from, what is wrong with it (and
    how to fix it), what fits, and how fast it could be."""

    task: TaskSpec
    """The task with its shape normalised and BLOCK_SIZE / MEMORY_PIPELINING filled in."""
    profile: Profile
    limits: DeviceLimits
    knob_source: dict[str, str]
    """'task', 'tuned' or 'default' for block_size, memory_pipelining and the schedule."""
    violations: tuple[Violation, ...] = ()
    fix: str = ""
    block_size_options: tuple[str, ...] = ()
    pipelining_options: tuple[int, ...] = ()
    schedule_options: tuple[KnobDef, ...] = ()
    schedule: dict[str, Any] = field(default_factory=dict)
    """Every schedule choice as the kernel will run it (the planner's where the task leaves one out)."""
    info: dict[str, Any] = field(default_factory=dict)
    """The kernel's own description of the build (path, tile, consumers, cluster, grid, ...)."""
    flops: int = 0
    bytes: int = 0
    t_sol_ms: float = 0.0
    sol_bound: str = ""
    tuned: TunedKnobs | None = None
    """The cache entry whose knobs this plan took (None: none applied)."""
    kernel: KernelPlan | None = None
    """The kernel's own plan (tile, stages, schedule, its path's detail and ``info``): what the engine
    process renders and runs. None for a plan with violations."""
    default_knobs: tuple[str, int] | None = None
    """The untuned BLOCK_SIZE and MEMORY_PIPELINING for this shape: the nearest tuned shape's in the
    profile's table of tuned defaults where one is near and fits, else the kernel's own rules'."""
    default_from: str = ""
    """Where the defaults came from when a tuned shape of this GPU model's table lent them, e.g. 'tuned
    table h200 (nearest 4096x4096x4096)'; empty for the kernel's own rules."""

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def source_label(self) -> str:
        """Where the knobs as a whole came from (the cockpit's and bench's ``knobs_from``): 'tuned on this
        GPU ...' (the tuning cache), 'tuned table <model> (nearest ...)' (this GPU model's table of tuned
        defaults), 'rules for this profile' (the kernel's own rules) or 'task'."""
        if self.tuned is not None and "tuned" in self.knob_source.values():
            return self.tuned.label
        if set(self.knob_source.values()) == {"task"}:
            return "task"
        return self.default_from or RULES_LABEL

    def error_text(self) -> str:
        return "; ".join(str(v) for v in self.violations)


def shape_words(shape: Any) -> str:
    """A shape as ``--shape`` takes it (``m=10,n=16``), never a Python dict."""
    if isinstance(shape, dict):
        return ",".join(f"{k}={v}" for k, v in shape.items())
    return str(shape)


class PlanError(ValueError):
    """The task cannot be planned at all (unknown kernel, unreadable shape, dtype not supported):
    the message names the field."""


def _knobs_fit(task: TaskSpec, tuned: TunedKnobs) -> bool:
    """A tuned entry applies only where every knob the task sets agrees with it (it fills the rest)."""
    if task.block_size is not None and task.block_size != Tile.parse(tuned.block_size):
        return False
    if task.memory_pipelining is not None and task.memory_pipelining != tuned.memory_pipelining:
        return False
    return all(tuned.schedule.get(k) == v for k, v in task.schedule.items())


def plan(task: TaskSpec, profile: Profile,
         tuned: Callable[[TaskSpec], TunedKnobs | None] | TunedKnobs | None = None) -> Plan:
    """Plan ``task`` on ``profile``. ``tuned`` is a tuning cache lookup (called with the task whose
    shape is normalised) or an entry. Raises PlanError when the task cannot be read; knob problems
    are violations in the plan, each naming the field and the limit, with ``fix``."""
    try:
        spec = get_spec(task.kernel)
    except KeyError as exc:
        raise PlanError(f"kernel={task.kernel!r}: {exc.args[0]}") from None
    try:
        shape = spec.normalize_shape(task.shape)
    except ValueError as exc:
        raise PlanError(f"shape={shape_words(task.shape)}: {exc}") from None
    dtype = task.dtype.value
    if dtype not in spec.dtypes:
        raise PlanError(f"dtype={dtype}: {spec.name} supports {', '.join(spec.dtypes)}")
    limits = DeviceLimits.from_profile(profile)
    task = task.model_copy(update={"shape": shape})

    entry = tuned(task) if callable(tuned) else tuned
    if entry is not None and not _knobs_fit(task, entry):
        entry = None
    source = {f: "task" for f in KNOB_FIELDS if getattr(task, f) is not None}
    source["schedule"] = "task" if task.schedule else "default"
    update: dict[str, Any] = {}
    if entry is not None:
        for f in KNOB_FIELDS:
            if getattr(task, f) is None:
                update[f], source[f] = getattr(entry, f), "tuned"
        if entry.schedule:
            update["schedule"], source["schedule"] = {**entry.schedule, **task.schedule}, "tuned"
    try:
        bs, pl = spec.default_knobs(limits, dtype, shape)
    except ValueError as exc:
        return _refused(task, profile, limits, spec, [Violation("block_size", None, str(exc))], source)
    near, near_plan = _from_table(task, profile, spec, limits, (bs, pl)) if entry is None else (None, None)
    if near is not None:
        bs, pl = near.block_size, near.memory_pipelining
        if near.schedule and not task.schedule:
            update["schedule"] = dict(near.schedule)
    if entry is None:
        with_schedule = task.model_copy(update={k: v for k, v in update.items() if k == "schedule"})
        for f, value in fill_knobs(spec, with_schedule, limits, (bs, pl)).items():
            update[f], source[f] = value, "default"
    task = task.model_copy(update=update)

    kp = near_plan if near_plan is not None and near_plan.task == task else _kernel_plan(spec, task, limits)
    if isinstance(kp, Refusal):
        return _refused(task, profile, limits, spec, list(kp.violations), source, entry)
    return Plan(task=task, profile=profile, limits=limits, knob_source=source, kernel=kp,
                schedule=dict(kp.schedule), info=dict(kp.info), tuned=entry, default_knobs=(bs, pl),
                default_from=near.label if near is not None else "",
                **_options(spec, limits, task), **_sol(spec, task, profile))


LEND_MARGIN = 0.10
"""A tuned neighbour's knobs are not lent where the kernel's cost model predicts them this much
slower than the kernel's own default at the task's shape, beyond what it predicted at the shape they
were tuned at: the model counts the rounds of tiles, which nearest-shape lending ignores (on the H200
a 128x160 tile tuned at M = 1024, one round of tiles, ran 1.21x the best at M = 1337, 1.33 rounds:
ADR-0002). Where the model already rated the knobs slower at their own tuned shape, the measurement
there overrules it, and only a further loss at the task's shape vetoes them (on the H100 the model
rates the seed's tuned 128x128/5 with cluster 1 and group order 1.17x the rules' knobs; measured 0.90x)."""


def _kernel_plan(spec: Any, task: TaskSpec, limits: DeviceLimits) -> KernelPlan | Refusal:
    """The spec's one planning call; a knob it cannot even read is a refusal naming BLOCK_SIZE."""
    try:
        return spec.plan(task, limits)
    except ValueError as exc:
        return Refusal((Violation("block_size", task.block_size, str(exc)),))


def _from_table(task: TaskSpec, profile: Profile, spec: Any, limits: DeviceLimits,
                own_knobs: tuple[Any, Any]) -> tuple[TunedKnobs | None, KernelPlan | None]:
    """The nearest tuned shape's knobs (``engine.tuned_defaults``) where the task leaves the knobs to
    the defaults, they build the same code path as the kernel's own default, fit this shape and the
    cost model does not rate them ``LEND_MARGIN`` slower than the kernel's own default ``own_knobs``
    (BLOCK_SIZE, MEMORY_PIPELINING) beyond its rating at the shape they were tuned at; else None. With the knobs, the kernel's plan of the trial
    (the final plan where the task takes them unchanged)."""
    if task.block_size is not None or task.memory_pipelining is not None:
        return None, None
    from engine.tuned_defaults import nearest

    near = nearest(task, profile)
    if near is None or (task.schedule and any(near.schedule.get(k) != v for k, v in task.schedule.items())):
        return None, None
    own, own_pl = own_knobs
    if not spec.same_family(limits, task.dtype.value, task.shape, own, near.block_size):
        return None, None
    trial = task.model_copy(update={"block_size": near.block_size, "memory_pipelining": near.memory_pipelining,
                                    "schedule": {**near.schedule, **task.schedule}})
    kp = _kernel_plan(spec, trial, limits)
    if isinstance(kp, Refusal):
        return None, None
    if near.shape and spec.normalize_shape(near.shape) == spec.normalize_shape(task.shape):
        return near, kp  # measured at this very shape: the model's rating here is the one it overrules
    try:
        if _model_ratio(spec, limits, profile, trial, own_knobs) > (1 + LEND_MARGIN) * max(
                1.0, _model_ratio(spec, limits, profile, trial.model_copy(update={"shape": near.shape}), None)
                if near.shape else 1.0):
            return None, None
    except ValueError:
        pass  # no model to veto with: the tuned neighbour's knobs stand
    return near, kp


def _model_ratio(spec: Any, limits: DeviceLimits, profile: Profile, trial: TaskSpec,
                 own_knobs: tuple[Any, Any] | None) -> float:
    """The cost model's time of ``trial`` over that of the kernel's own default knobs at the trial's
    shape (``own_knobs``, else the kernel's rules there). ValueError where the kernel has no model."""
    dtype = trial.dtype.value
    own, own_pl = own_knobs if own_knobs is not None else spec.default_knobs(limits, dtype, trial.shape)
    mine = trial.model_copy(update={"block_size": own, "memory_pipelining": own_pl, "schedule": {}})
    peak, bw = profile.sol_peak_flops(dtype), profile.bandwidth_bytes_per_s
    return spec.predict_ms(trial, limits, peak, bw) / spec.predict_ms(mine, limits, peak, bw)


def _options(spec: Any, limits: DeviceLimits, task: TaskSpec) -> dict[str, Any]:
    """What fits: tiles, stage counts for the task's tile, schedule choices (empty where nothing
    fits at all, e.g. a profile whose shared memory holds no tile)."""
    dtype, shape = task.dtype.value, task.shape
    try:
        bss = tuple(spec.block_size_options(limits, dtype, shape))
    except ValueError:
        bss = ()
    try:
        pls = tuple(spec.pipelining_options(limits, dtype, task.block_size, shape))
    except ValueError:
        pls = ()
    try:
        sched = tuple(spec.schedule_knobs(limits, dtype, shape, task.block_size))
    except ValueError:
        sched = ()
    return {"block_size_options": bss, "pipelining_options": pls, "schedule_options": sched}


def _sol(spec: Any, task: TaskSpec, profile: Profile) -> dict[str, Any]:
    dtype = task.dtype.value
    figs = sol_figures(spec.flops(task.shape), spec.bytes_moved(task.shape, dtype),
                       profile.sol_peak_flops(dtype), profile.bandwidth_bytes_per_s)
    return {"flops": figs.flops, "bytes": figs.bytes, "t_sol_ms": figs.t_sol_ms, "sol_bound": figs.sol_bound}


def _refused(task: TaskSpec, profile: Profile, limits: DeviceLimits, spec: Any, violations: list[Violation],
             source: dict[str, str], entry: TunedKnobs | None = None) -> Plan:
    """A plan that cannot run: its violations and the fix (the options that fit)."""
    opts = _options(spec, limits, task)
    fix = f"BLOCK_SIZE options on {profile.name}: {', '.join(opts['block_size_options']) or 'none fits'}"
    if opts["pipelining_options"]:
        fix += (f"; MEMORY_PIPELINING options for {task.block_size}: "
                f"{', '.join(format_pipelining(s) for s in opts['pipelining_options'])}")
    elif str(task.block_size) in opts["block_size_options"]:
        fix += f"; no MEMORY_PIPELINING fits BLOCK_SIZE={task.block_size} at this shape: pick another BLOCK_SIZE"
    if any(v.field.startswith("schedule") for v in violations) and opts["schedule_options"]:
        fix += "; schedule choices: " + "; ".join(
            f"{k.name} = {' | '.join(map(str, k.values))}" for k in opts["schedule_options"])
    return Plan(task=task, profile=profile, limits=limits, knob_source=source, violations=tuple(violations),
                fix=fix, tuned=entry, **opts, **_sol(spec, task, profile))


def kernel_dims(kernel: str) -> tuple[str, ...]:
    """The names of a kernel's dimensions (KeyError listing the known kernels when unknown)."""
    return tuple(get_spec(kernel).dims)


def kernel_default_shape(kernel: str) -> dict[str, int]:
    """A kernel's own default shape (KeyError when unknown)."""
    return dict(get_spec(kernel).default_shape)


def normalize_shape(kernel: str, shape: dict[str, int]) -> dict[str, int]:
    """A shape read onto the kernel's dimensions (ValueError naming the problem; KeyError for an
    unknown kernel)."""
    return get_spec(kernel).normalize_shape(shape)
