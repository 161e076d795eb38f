"""The schema of a user kernel's spec file: a TOML file beside a ``.cu`` file (``examples/kernels/``).

Every field is checked before anything compiles: unknown fields are refused, each expression is
parsed (``kernels.expr``) and may use only the names its field allows, and the error names the
field (``launch.grid[0]: unknown name TIL``). ``kernels.user_spec`` turns a checked definition into
a kernel spec the engine runs like its own.
"""

from __future__ import annotations

import keyword
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from kernels.expr import FUNCTIONS, Expr, ExprError, check_names, parse

LIMIT_NAMES = ("sm_count", "shared_memory_per_block_bytes", "shared_memory_per_sm_bytes", "registers_per_sm",
               "max_threads_per_block", "compute_capability")
"""The profile's limits, by name, in launch, constraint and efficiency expressions
(``compute_capability`` as one number: 90 for 9.0)."""
RESERVED = {"itemsize", "np", *LIMIT_NAMES, *FUNCTIONS}
DTYPES = ("bf16", "fp16", "fp32")


def _expr_text(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise ValueError("expected an expression (a string such as \"2 * m * n\", or a number)")
    return v


ExprText = Annotated[str | int | float, BeforeValidator(_expr_text)]
"""An expression as the TOML file holds it: a string, or a plain number."""


def _identifier(text: str, what: str) -> str:
    if not text.isidentifier() or keyword.iskeyword(text) or text.startswith(("_", "sol_", "SOL_")):
        raise ValueError(f"{text!r} is not a usable {what} (a C identifier, not starting with '_' or 'sol_')")
    return text


class ArgDef(BaseModel):
    """One argument of the entry function, in the order the function takes them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """The argument's name; buffers are named so in the reference expression."""
    kind: Literal["input", "output", "int32", "float32"] = "input"
    """input (filled with N(0,1)), output (verified against the reference), or an int32 / float32
    scalar passed by value."""
    shape: list[ExprText] | None = None
    """A buffer's shape, one expression of the dimensions per axis (row-major), e.g. ["m", "k"]."""
    value: ExprText | None = None
    """A scalar's value: an expression of the dimensions and knobs (e.g. "m", 0.5)."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _identifier(v, "argument name")

    @model_validator(mode="after")
    def _kind_fields(self) -> ArgDef:
        buffer = self.kind in ("input", "output")
        if buffer and not self.shape:
            raise ValueError(f"{self.name}: a {self.kind} buffer needs shape = [...]")
        if buffer and self.value is not None:
            raise ValueError(f"{self.name}: value is for scalars (kind int32 or float32), not buffers")
        if not buffer and self.value is None:
            raise ValueError(f"{self.name}: a {self.kind} scalar needs value = ...")
        if not buffer and self.shape is not None:
            raise ValueError(f"{self.name}: shape is for buffers (kind input or output), not scalars")
        return self


class KnobDef(BaseModel):
    """A tunable, rendered as ``#define NAME value`` before the source; always an integer."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    values: list[int] = Field(min_length=1, max_length=64)
    """The values it may take (the tuner searches them), e.g. [8, 16, 32]."""
    default: int | None = None
    """The value an untuned run takes (the first of ``values`` when left out)."""
    role: Literal["block_size", "memory_pipelining", "schedule"] | None = None
    """Which engine knob it is: BLOCK_SIZE (the first knob by default), MEMORY_PIPELINING (values 0 or
    >= 2), or a schedule choice (every other knob). Env BLOCK_SIZE / MEMORY_PIPELINING set these."""
    doc: str = ""
    """What it does, shown by ``tui kernels``."""

    @field_validator("values")
    @classmethod
    def _values(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("values repeat")
        if any(not 0 <= x <= 2**31 - 1 for x in v):
            raise ValueError("values must be in 0..2^31-1 (they become int constants)")
        return v

    @model_validator(mode="after")
    def _default(self) -> KnobDef:
        if self.default is not None and self.default not in self.values:
            raise ValueError(f"default {self.default} is not one of values {self.values}")
        if self.role == "memory_pipelining" and 1 in self.values:
            raise ValueError("a memory_pipelining knob takes 0 (off) or 2 or more stages, not 1")
        return self

    @property
    def default_value(self) -> int:
        return self.values[0] if self.default is None else self.default


class ConstraintDef(BaseModel):
    """A condition every configuration must meet, checked before compiling."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    expr: ExprText
    """An expression over dimensions, knobs, ``itemsize`` and the profile's limits, true when met,
    e.g. "2 * TILE * TILE * itemsize <= shared_memory_per_block_bytes"."""
    message: str = ""
    """What it means, shown when it fails (e.g. 'the two tiles must fit in shared memory')."""


class LaunchDef(BaseModel):
    """The launch geometry, as expressions over dimensions, knobs, ``itemsize`` and limits."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    grid: list[ExprText] = Field(min_length=1, max_length=3)
    """Blocks per grid, x[, y[, z]], e.g. ["cdiv(n, TILE)", "cdiv(m, TILE)"]."""
    block: list[ExprText] = Field(min_length=1, max_length=3)
    """Threads per block, x[, y[, z]], e.g. ["TILE", "TILE"]."""
    shared_mem_bytes: ExprText = 0
    """Dynamic shared memory per block in bytes (static ``__shared__`` arrays need none)."""


class ReferenceDef(BaseModel):
    """How verification computes the expected output, in float64 on the host or device."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    expr: str | None = None
    """A NumPy expression over the argument names, dimensions and ``np`` giving the (first) output,
    e.g. "alpha * A @ B"; CuPy evaluates it on a GPU where it can."""
    file: str | None = None
    """A Python file beside the spec defining ``reference(**arrays_scalars_and_dims)`` that returns
    the output array (or a dict of outputs by name); numpy arrays in, numpy arrays out."""
    rtol: dict[Literal["bf16", "fp16", "fp32"], float] = Field(default_factory=dict)
    """Relative tolerance per dtype (scaled by rms(ref), as for every kernel); the engine's defaults
    (bf16 1.6e-2, fp16 2e-3, fp32 1e-5) where left out."""

    @model_validator(mode="after")
    def _one(self) -> ReferenceDef:
        if (self.expr is None) == (self.file is None):
            raise ValueError("give exactly one of expr (a NumPy expression) or file (a Python file)")
        if any(not 0 < v < 1 for v in self.rtol.values()):
            raise ValueError("rtol values must be in (0, 1)")
        return self


class UserKernelDef(BaseModel):
    """A user kernel: the ``.cu`` source, its entry function and arguments, its knobs and their
    constraints, the launch geometry, FLOPs and bytes for SOL, and the reference."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """The kernel's name in ``tui kernels``, ``--kernel`` and the store (lowercase identifier)."""
    title: str = ""
    """One line saying what it computes."""
    description: str = ""
    """More about it, shown by ``tui kernels``."""
    source: str
    """The CUDA file, relative to the spec file (e.g. "scaled_matmul.cu")."""
    entry: str
    """The ``extern "C" __global__`` function to launch."""
    dims: list[str] = Field(min_length=1, max_length=8)
    """The problem's dimension names, lowercase, in positional order (e.g. ["m", "n", "k"])."""
    default_shape: dict[str, int]
    """The shape a run takes when none is given, every dimension named."""
    dtypes: list[Literal["bf16", "fp16", "fp32"]] = Field(default_factory=lambda: ["fp32"], min_length=1)  # type: ignore[arg-type]
    """Element types the kernel supports; the source sees ``scalar_t`` and SOL_DTYPE (0 bf16, 1 fp16,
    2 fp32) with ``sol_to_f32`` / ``sol_from_f32`` conversions."""
    args: list[ArgDef] = Field(min_length=1, max_length=32)
    """The entry function's arguments, in order."""
    knobs: dict[str, KnobDef] = Field(min_length=1, max_length=16)
    """Tunables by #define name, e.g. [knobs.TILE] values = [8, 16, 32]."""
    constraints: list[ConstraintDef | ExprText] = Field(default_factory=list, max_length=64)
    """Conditions on knobs, dimensions and limits (expressions, or {expr, message} tables)."""
    launch: LaunchDef
    """Grid, block and dynamic shared memory."""
    flops: ExprText
    """FLOPs of one launch for SOL, an expression of the dimensions (e.g. "2 * m * n * k")."""
    bytes: ExprText
    """Fewest bytes through device memory for SOL, an expression of the dimensions and ``itemsize``
    (each input read once, each output written once)."""
    sim_efficiency: ExprText | None = None
    """The simulated device's fraction of SOL for a configuration (0..1), an expression over knobs,
    dimensions and limits; a model of threads per block and waves when left out."""
    reference: ReferenceDef
    """The expected output, for verification."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        _identifier(v, "kernel name")
        if v != v.lower():
            raise ValueError(f"{v!r}: kernel names are lowercase")
        return v

    @field_validator("entry")
    @classmethod
    def _entry(cls, v: str) -> str:
        return _identifier(v, "function name")

    @field_validator("dims")
    @classmethod
    def _dims(cls, v: list[str]) -> list[str]:
        for d in v:
            _identifier(d, "dimension name")
            if d != d.lower():
                raise ValueError(f"{d!r}: dimension names are lowercase (task shapes are read case-insensitively)")
            if d in RESERVED:
                raise ValueError(f"{d!r} is a reserved name ({', '.join(sorted(RESERVED))})")
        if len(set(v)) != len(v):
            raise ValueError("dimension names repeat")
        return v

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("dtypes repeat")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> UserKernelDef:
        problems: list[str] = []
        dims = set(self.dims)
        if set(self.default_shape) != dims:
            problems.append(f"default_shape: must name exactly the dims {', '.join(self.dims)}")
        elif any(not 1 <= x <= 2**31 - 1 for x in self.default_shape.values()):
            problems.append("default_shape: every dimension must be in 1..2^31-1")
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            problems.append("args: argument names repeat")
        for i, a in enumerate(self.args):
            if a.name in RESERVED:
                problems.append(f"args[{i}].name: {a.name!r} is a reserved name")
            elif a.name in dims and not (a.kind == "int32" and str(a.value).strip() == a.name):
                problems.append(f"args[{i}].name: {a.name!r} is a dimension; only an int32 argument whose "
                                f"value is that dimension may share its name")
        if not any(a.kind == "output" for a in self.args):
            problems.append("args: at least one argument must be kind = \"output\"")
        for k in self.knobs:
            try:
                _identifier(k, "knob name")
            except ValueError as exc:
                problems.append(f"knobs.{k}: {exc}")
            if k in dims or k in RESERVED or k in names:
                problems.append(f"knobs.{k}: the name is taken by a dimension, an argument or a reserved name")
        if len({k.lower() for k in self.knobs}) != len(self.knobs):
            problems.append("knobs: names differ only in case (schedule choices are read case-insensitively)")
        roles = [knob.role for knob in self.knobs.values()]
        for role in ("block_size", "memory_pipelining"):
            if roles.count(role) > 1:
                problems.append(f"knobs: only one knob may have role = \"{role}\"")
        if "block_size" not in roles and None not in roles:
            problems.append("knobs: one knob must be BLOCK_SIZE (role = \"block_size\", or a knob without a role)")
        knobs, limits = set(self.knobs), set(LIMIT_NAMES)
        scopes = {"shape": dims, "scalar": dims | knobs | {"itemsize"},
                  "launch": dims | knobs | limits | {"itemsize"}, "sol": dims | {"itemsize"}}
        fields: list[tuple[str, ExprText, str]] = []
        for i, a in enumerate(self.args):
            fields += [(f"args[{i}].shape[{j}]", s, "shape") for j, s in enumerate(a.shape or [])]
            if a.value is not None:
                fields.append((f"args[{i}].value", a.value, "scalar"))
        fields += [(f"launch.grid[{j}]", e, "launch") for j, e in enumerate(self.launch.grid)]
        fields += [(f"launch.block[{j}]", e, "launch") for j, e in enumerate(self.launch.block)]
        fields.append(("launch.shared_mem_bytes", self.launch.shared_mem_bytes, "launch"))
        for i, c in enumerate(self.constraints):
            fields.append((f"constraints[{i}]", c.expr if isinstance(c, ConstraintDef) else c, "launch"))
        fields += [("flops", self.flops, "sol"), ("bytes", self.bytes, "sol")]
        if self.sim_efficiency is not None:
            fields.append(("sim_efficiency", self.sim_efficiency, "launch"))
        for where, text, scope in fields:
            try:
                check_names(parse(text), scopes[scope])
            except ExprError as exc:
                problems.append(f"{where}: {exc}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # --- parsed views --------------------------------------------------------------------------
    def block_knob(self) -> str:
        """The knob that is BLOCK_SIZE: the one with that role, else the first without a role."""
        named = [k for k, d in self.knobs.items() if d.role == "block_size"]
        return (named or [k for k, d in self.knobs.items() if d.role is None])[0]

    def pipelining_knob(self) -> str | None:
        return next((k for k, d in self.knobs.items() if d.role == "memory_pipelining"), None)

    def schedule_knobs(self) -> list[str]:
        special = {self.block_knob(), self.pipelining_knob()}
        return [k for k in self.knobs if k not in special]

    def constraint_exprs(self) -> list[tuple[Expr, str]]:
        return [(parse(c.expr), c.message) if isinstance(c, ConstraintDef) else (parse(c), "")
                for c in self.constraints]
