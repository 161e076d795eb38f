"""The contract every kernel spec fulfils: kernels are data plus a small Python description.

A spec declares its parameter space and constraints (checked against a profile's limits before
anything compiles), renders its CUDA source with knob values as validated integers only, names the
buffers and launches one run needs, counts FLOPs and bytes, gives a higher-precision reference and
its peers. It does no I/O and imports neither cupy nor any UI; array work takes an array module
``xp`` (numpy or cupy) from the caller.

What ``render`` returns (``Build``, ``Launch``, ``Buffer``, ``TensorMapArg``) and the peers
(``PeerSpec``) are defined in ``kernels.build``, the source assembly in ``kernels.source``; this
module names them as the contract's vocabulary.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kernels.build import Buffer as Buffer
from kernels.build import Build as Build
from kernels.build import Launch as Launch
from kernels.build import PeerSpec as PeerSpec
from kernels.build import TensorMapArg as TensorMapArg
from kernels.source import KERNEL_DIR as KERNEL_DIR
from kernels.source import kernel_source as kernel_source
from kernels.source import vec16_source as vec16_source

INT32_MAX = 2**31 - 1
"""Kernels take their dimensions as int32 arguments."""


@dataclass(frozen=True, order=True)
class Tile:
    """BLOCK_SIZE parsed once: rows along M x columns along N, and optionally the K depth of one
    stage ('128x256', '128x256x64'); a row-wise kernel's BLOCK_SIZE is one number (threads, '256').
    Planning passes this type, never the text. A Tile never equals text: comparing one with a
    string is a TypeError (parse the text with ``Tile.parse`` first), so a forgotten parse fails
    loudly instead of comparing unequal."""

    m: int
    n: int | None = None
    k: int | None = None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tile):
            return (self.m, self.n, self.k) == (other.m, other.n, other.k)
        if isinstance(other, str):
            raise TypeError(f"Tile {self} compared with the text {other!r}: compare Tile.parse(text)")
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))  # as its text's: a lookup in a table keyed by text reaches __eq__

    @classmethod
    def parse(cls, text: Any) -> Tile:
        """'128x256', '128X256x64', ' 256 ' or a Tile -> Tile; ValueError naming the text."""
        if isinstance(text, Tile):
            return text
        parts = str(text).strip().lower().split("x")
        if len(parts) > 3 or not all(p.isdigit() and 0 < len(p) <= 5 for p in parts):
            raise ValueError(f"BLOCK_SIZE {str(text)[:40]!r}: expected ROWSxCOLS or ROWSxCOLSxDEPTH, e.g. 128x256")
        vals = [int(p) for p in parts]
        if not all(vals):
            raise ValueError(f"BLOCK_SIZE {str(text)[:40]!r}: every side must be positive")
        return cls(*vals)

    @property
    def name(self) -> str:
        """'128x256' (without the depth): the key the specs' tile tables use."""
        return str(self.m) if self.n is None else f"{self.m}x{self.n}"

    @property
    def area(self) -> int:
        return self.m * (self.n or 1)

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}x{self.k}"


@dataclass(frozen=True)
class DeviceLimits:
    """The limits a kernel must fit, taken from a profile (or read off the device)."""

    compute_capability: tuple[int, int]
    sm_count: int
    shared_memory_per_block_bytes: int
    shared_memory_per_sm_bytes: int
    registers_per_sm: int = 65536
    max_threads_per_block: int = 1024
    profile: str = ""

    @classmethod
    def from_profile(cls, profile: Any) -> DeviceLimits:
        return cls(
            compute_capability=profile.cc,
            sm_count=profile.sm_count,
            shared_memory_per_block_bytes=profile.shared_memory_per_block_bytes,
            shared_memory_per_sm_bytes=profile.shared_memory_per_sm_bytes,
            registers_per_sm=profile.registers_per_sm,
            max_threads_per_block=profile.max_threads_per_block,
            profile=profile.name,
        )

    @property
    def arch(self) -> str:
        """NVRTC target: the device's own architecture; sm_90a on Hopper for wgmma/setmaxnreg."""
        major, minor = self.compute_capability
        suffix = "a" if (major, minor) == (9, 0) else ""
        return f"sm_{major}{minor}{suffix}"


@dataclass(frozen=True)
class Violation:
    """A knob or shape that breaks a limit: names the field, the value, and the limit."""

    field: str
    value: Any
    message: str
    limit: str = ""

    ENV_NAMES = {"block_size": "BLOCK_SIZE", "memory_pipelining": "MEMORY_PIPELINING"}

    def __str__(self) -> str:
        name = self.ENV_NAMES.get(self.field, self.field)
        text = f"{name}={self.value}: {self.message}"
        return f"{text} (limit: {self.limit})" if self.limit else text


class KnobError(ValueError):
    """A knob value the planner cannot honour, naming the field (e.g. 'schedule.cluster'), the value
    and why; ``check`` turns it into a :class:`Violation`."""

    def __init__(self, field: str, value: Any, message: str) -> None:
        super().__init__(f"{field}={value}: {message}")
        self.violation = Violation(field, value, message)


@dataclass(frozen=True)
class KnobDef:
    """A schedule choice a kernel has beyond BLOCK_SIZE and MEMORY_PIPELINING (``TaskSpec.schedule``):
    its name, the values it takes, and what it does. 'auto' (the key left out) is the planner's
    choice; a tuner searches ``values``."""

    name: str
    values: tuple[Any, ...]
    doc: str


@dataclass(frozen=True)
class KernelPlan:
    """A spec's decisions for one task: the knobs that run, the schedule they run with (every
    choice resolved), the spec's own plan object (``detail``, e.g. the Hopper path's ``Sm90Plan``)
    and what to display of it. It is a value: planned once in the caller, it travels to the engine
    process, whose ``render`` takes no decision of its own."""

    block_size: Tile
    memory_pipelining: int
    schedule: dict[str, Any] = field(default_factory=dict)
    detail: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    """Resolved knobs and geometry for display (path, tile, stages, grid, ...): what ``render`` builds."""
    task: Any = None
    """The request this plan answers (its shape normalised, its knobs resolved): ``render`` reads
    the shape, dtype and fusion from it."""


@dataclass(frozen=True)
class Refusal:
    """Why a spec will not plan a task: each violation names the field, the value and the limit."""

    violations: tuple[Violation, ...]

    def __str__(self) -> str:
        return "; ".join(str(v) for v in self.violations)


def tile_text(block_size: Any) -> Any:
    """A BLOCK_SIZE (a Tile, or text a tool or test passes) as the name the kernels' tile tables are
    keyed by ('128x256', '128x256x64', '256'), read by ``Tile.parse``; None stays None."""
    return None if block_size is None else str(Tile.parse(block_size))


def _dtype_of(task: Any) -> str:
    return str(getattr(task.dtype, "value", task.dtype))


def with_fields(task: Any, update: Mapping[str, Any]) -> Any:
    """``task`` with ``update`` applied (a pydantic task's ``model_copy``, or a plain namespace's copy)."""
    if not update:
        return task
    if hasattr(task, "model_copy"):
        return task.model_copy(update=dict(update))
    return type(task)(**{**vars(task), **update})


def fill_knobs(spec: KernelSpec, task: Any, limits: DeviceLimits,
               default: tuple[Any, int] | None = None) -> dict[str, Any]:
    """BLOCK_SIZE and MEMORY_PIPELINING for the knobs ``task`` leaves unset, by the kernel's rules:
    ``default`` (a tuned table's tile and stages) or the kernel's own default for the shape; a task
    that names another tile gets that tile's stages (``stages_for``), and schedule choices that
    change what a stage is decide them (``stages_for_schedule``). ValueError where no tile fits."""
    if getattr(task, "block_size", None) is not None and getattr(task, "memory_pipelining", None) is not None:
        return {}
    dtype = _dtype_of(task)
    shape = spec.normalize_shape(dict(task.shape))
    bs, pl = default or spec.default_knobs(limits, dtype, shape)
    out: dict[str, Any] = {}
    if task.block_size is None:
        out["block_size"] = bs
    if task.memory_pipelining is None:
        tile = out.get("block_size", task.block_size)
        stages = pl if str(tile) == str(bs) else spec.stages_for(limits, dtype, tile, shape)
        schedule = getattr(task, "schedule", None) or {}
        if schedule:
            by_schedule = spec.stages_for_schedule(limits, dtype, tile, shape, schedule)
            stages = stages if by_schedule is None else by_schedule
        out["memory_pipelining"] = stages
    return out


def plan_or_raise(spec: KernelSpec, task: Any, limits: DeviceLimits) -> KernelPlan:
    """``spec.plan``, with a refusal raised as ValueError naming the violations (for tools and tests
    that hold a task rather than a plan)."""
    out = spec.plan(task, limits)
    if isinstance(out, Refusal):
        raise ValueError(str(out))
    return out


def render_task(spec: KernelSpec, task: Any, limits: DeviceLimits) -> Build:
    """``spec.render(spec.plan(task))``: the build of a task, for tools and tests (ValueError when
    the spec refuses it)."""
    return spec.render(plan_or_raise(spec, task, limits), limits)


def violations_of(spec: KernelSpec, task: Any, limits: DeviceLimits) -> list[Violation]:
    """What a spec refuses in a task (empty when it plans)."""
    out = spec.plan(task, limits)
    return list(out.violations) if isinstance(out, Refusal) else []


def torch_view(x: Any) -> Any:
    """A torch tensor over a device (or host) array without a copy (DLPack), for the PyTorch peers;
    16-bit arrays that are not fp16 are bf16 stored as 16-bit words. ImportError where torch is not
    installed: the peer then reports that, and the score falls back to the next baseline."""
    import torch

    if x.dtype.itemsize == 2 and x.dtype.kind != "f":
        return torch.from_dlpack(x.view("uint16")).view(torch.bfloat16)
    return torch.from_dlpack(x)


class KernelSpec(ABC):
    """Base class for a kernel's spec. Subclasses set the class attributes and implement the rest."""

    name: str = ""
    title: str = ""
    description: str = ""
    dims: tuple[str, ...] = ()
    """Names of the shape's dimensions, in positional order."""
    dtypes: tuple[str, ...] = ("bf16", "fp16", "fp32")
    default_shape: dict[str, int] = {}
    outputs: tuple[str, ...] = ("out",)
    """Output buffers that verification checks (``reference`` returns the first, or a dict of all)."""

    @property
    def output(self) -> str:
        return self.outputs[0]

    def reference_outputs(self, xp: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        """``reference`` as a dict output name -> float64 array."""
        ref = self.reference(xp, inputs)
        return ref if isinstance(ref, dict) else {self.outputs[0]: ref}

    source_files: tuple[str, ...] = ()
    """Files under kernels/ whose text decides what this spec builds (templates and planners): a
    tuning result is valid only for the hash of these (``source_hash``)."""

    def source_hash(self) -> str:
        """sha256 over ``source_files`` (and the shared spec contract with its source assembly):
        changes whenever a template or a planning rule changes, which invalidates tuned entries."""
        h = hashlib.sha256()
        for name in sorted({*self.source_files, "spec.py", "source.py"}):
            h.update(name.encode() + b"\0" + (KERNEL_DIR / name).read_bytes() + b"\0")
        return h.hexdigest()

    def schedule_knobs(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None,
                       block_size: Any = None) -> list[KnobDef]:
        """The schedule choices this kernel has for these limits, dtype, shape and tile (none by
        default)."""
        return []

    def plan(self, task: Any, limits: DeviceLimits) -> KernelPlan | Refusal:
        """The spec's one decision for a task whose BLOCK_SIZE and MEMORY_PIPELINING are resolved:
        its constraints checked (a ``Refusal`` naming each violation), then its knobs, schedule and
        display ``info`` decided. ``render`` builds from the plan without deciding anything."""
        try:
            task = with_fields(task, fill_knobs(self, task, limits))
        except ValueError as exc:  # an unreadable dtype or shape, or no tile fits
            return Refusal(tuple(self.check(task, limits))
                           or (Violation("block_size", getattr(task, "block_size", None), str(exc)),))
        violations = self.check(task, limits)
        if violations:
            return Refusal(tuple(violations))
        try:
            kp = self.decide(task, limits)
        except KnobError as exc:
            return Refusal((exc.violation,))
        return replace(kp, task=task, info=self.describe(kp, task, limits))

    def decide(self, task: Any, limits: DeviceLimits) -> KernelPlan:
        """The knobs and schedule of a checked task: by default the knobs themselves (specs with
        schedule choices or code paths override this); KnobError for a choice it cannot honour."""
        return KernelPlan(Tile.parse(task.block_size), int(task.memory_pipelining or 0),
                          dict(getattr(task, "schedule", {}) or {}))

    def describe(self, plan: KernelPlan, task: Any, limits: DeviceLimits) -> dict[str, Any]:
        """What to display of a plan (``KernelPlan.info``), without rendering its source."""
        return dict(plan.info)

    def read_source(self, filename: str) -> str:
        """A template's text, its ``#include "file"`` lines inlined (``kernel_source``)."""
        return kernel_source(filename)

    def vec16(self, dtype_code: int) -> str:
        """``vec16_source`` for a kernel spec."""
        return vec16_source(dtype_code)

    # --- shape and knobs -------------------------------------------------------------------
    def normalize_shape(self, shape: dict[str, int]) -> dict[str, int]:
        """Map positional ('_0', '_1', ...) or aliased dimensions onto ``dims``; raise ValueError
        naming the problem when the shape cannot be read."""
        if all(k.startswith("_") for k in shape) and shape:
            vals = [shape[k] for k in sorted(shape, key=lambda s: int(s[1:]))]
            if len(vals) != len(self.dims):
                raise ValueError(f"{self.name} takes {len(self.dims)} dimensions "
                                 f"({', '.join(self.dims)}), got {len(vals)}")
            return dict(zip(self.dims, vals, strict=True))
        missing = [d for d in self.dims if d not in shape]
        extra = [d for d in shape if d not in self.dims]
        if missing or extra:
            raise ValueError(f"{self.name} takes dimensions {', '.join(self.dims)}"
                             + (f"; missing {', '.join(missing)}" if missing else "")
                             + (f"; unknown {', '.join(extra)}" if extra else ""))
        return {d: shape[d] for d in self.dims}

    def shape_violations(self, task: Any, hint: str) -> tuple[list[Violation], dict[str, int] | None]:
        """(violations, shape or None): the task's shape read onto ``dims`` (a problem names the
        expected dimensions, ``hint``) and each dimension in 1..INT32_MAX."""
        try:
            shape = self.normalize_shape(dict(task.shape))
        except ValueError as exc:
            return [Violation("shape", dict(task.shape), str(exc), hint)], None
        return [Violation(f"shape.{d}", shape[d], f"{d} must be in 1..{INT32_MAX}", "int32 kernel arguments")
                for d in self.dims if not 1 <= shape[d] <= INT32_MAX], shape

    @abstractmethod
    def block_size_options(self, limits: DeviceLimits, dtype: str,
                           shape: dict[str, int] | None = None) -> list[str]:
        """BLOCK_SIZE values that fit these limits for this dtype (and, where a kernel's tiles depend
        on it, this shape), best default first."""

    @abstractmethod
    def pipelining_options(self, limits: DeviceLimits, dtype: str, block_size: str,
                           shape: dict[str, int] | None = None) -> list[int]:
        """MEMORY_PIPELINING values (0 = off, or stage counts) that fit with this BLOCK_SIZE; with
        ``shape``, those that fit for that shape (the Hopper GEMM's deeper one-wave rings)."""

    @abstractmethod
    def default_knobs(self, limits: DeviceLimits, dtype: str,
                      shape: dict[str, int] | None = None) -> tuple[str, int]:
        """(BLOCK_SIZE, MEMORY_PIPELINING) used when the task leaves them unset; ``shape`` (when
        known) lets a spec pick a tile that fills the GPU for that problem size."""

    def same_family(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None, block_size: str,
                    other: str) -> bool:
        """Whether knobs tuned with tile ``other`` may stand in for this kernel's own default tile
        ``block_size`` (a kernel with several code paths keeps each path's knobs to itself)."""
        return True

    def stages_for_schedule(self, limits: DeviceLimits, dtype: str, block_size: str,
                            shape: dict[str, int] | None, schedule: dict[str, Any]) -> int | None:
        """The MEMORY_PIPELINING a task without a stage count gets where its schedule choices change
        what a stage is (None: ``stages_for`` decides)."""
        return None

    def stages_for(self, limits: DeviceLimits, dtype: str, block_size: str,
                   shape: dict[str, int] | None = None) -> int:
        """The MEMORY_PIPELINING a task that names ``block_size`` but no stage count gets: the
        default's where it is the default tile, else the deepest that fits (0 where none does)."""
        bs, pl = self.default_knobs(limits, dtype, shape)
        if str(block_size) == bs:
            return pl
        try:
            fits = self.pipelining_options(limits, dtype, block_size, shape)
        except ValueError:
            return pl
        return pl if pl in fits or not fits else max(fits)

    @abstractmethod
    def check(self, task: Any, limits: DeviceLimits) -> list[Violation]:
        """Every constraint, checked before compiling: dtype, shape rules, shared memory for the
        tile and stage count against the per-block limit, threads per block, divisibility."""

    # --- arithmetic ------------------------------------------------------------------------
    @abstractmethod
    def flops(self, shape: dict[str, int]) -> int:
        """FLOPs counted for SOL (the arithmetic the roofline's compute term is about)."""

    @abstractmethod
    def bytes_moved(self, shape: dict[str, int], dtype: str) -> int:
        """Fewest bytes through device memory: each input read once, each output written once."""

    # --- running ---------------------------------------------------------------------------
    @abstractmethod
    def buffers(self, task: Any) -> list[Buffer]:
        """The buffers one run needs (inputs, outputs, scratch)."""

    @abstractmethod
    def render(self, plan: KernelPlan, limits: DeviceLimits) -> Build:
        """The source for the plan's knobs (integers only) and its launches; never decides."""

    @abstractmethod
    def reference(self, xp: Any, inputs: dict[str, Any]) -> Any:
        """The output computed in higher precision (float64 on ``xp``); a dict name -> array for a
        kernel with several outputs."""

    @abstractmethod
    def rtol(self, dtype: str) -> float:
        """Elementwise relative tolerance for this dtype (scaled by rms(ref), see Correctness)."""

    def peers(self, task: Any) -> list[PeerSpec]:
        """Peer implementations to time alongside; none by default."""
        return []

    def predict_ms(self, task: Any, limits: DeviceLimits, peak_flops: float, bandwidth_bytes_per_s: float) -> float:
        """The cost model's time for these knobs (a tuner's search order, never a measurement):
        by default the roofline over ``sim_efficiency``."""
        shape = self.normalize_shape(task.shape)
        dtype = str(getattr(task.dtype, "value", task.dtype))
        t_sol = max(self.flops(shape) / peak_flops, self.bytes_moved(shape, dtype) / bandwidth_bytes_per_s)
        return 1e3 * t_sol / max(1e-3, self.sim_efficiency(task, limits))

    def sim_efficiency(self, task: Any, limits: DeviceLimits) -> float:
        """For the simulated device only: the fraction of SOL these knobs plausibly reach (0..1)."""
        return 0.6
