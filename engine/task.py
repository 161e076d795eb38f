"""The task: which kernel, on which shapes, with which knobs, and how to measure it.

Sources, lowest to highest precedence: defaults, a TOML task file, the environment variables
``BLOCK_SIZE`` and ``MEMORY_PIPELINING`` (as deployment manifests pass them), command-line flags.
"""

from __future__ import annotations

import enum
import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from engine.energy import MAX_SECONDS as ENERGY_MAX_S
from engine.energy import MIN_SECONDS as ENERGY_MIN_S
from engine.errors import InputError
from engine.tomlio import TOML_KINDS, load_toml, short_key, short_repr, toml_kind
from kernels.spec import Tile

REST_MAX_S = 60.0
"""The longest rest a task may ask for before each timed implementation (``TaskSpec.rest_s``)."""

SEED_MAX = 2**63 - 1
"""The largest seed: what a TOML integer (64-bit) and the random generators carry."""

FILE_CONTEXT = {"source": "file"}
"""Validation context for values read from a task file: there types are strict (``FILE_TYPES``),
while flags, the cockpit's form and environment variables arrive as text and are read leniently."""

FILE_TYPES: dict[str, tuple[type, ...]] = {
    "kernel": (str,), "kernel_file": (str,), "dtype": (str,), "backend": (str,), "fault": (str,),
    "shape": (dict, str), "schedule": (dict, str), "block_size": (str, int, list, Tile),
    "memory_pipelining": (int, str),
    "fusion": (bool,), "verify": (bool,), "peers": (bool,),
    "warmup": (int,), "iterations": (int,), "device": (int,), "seed": (int,),
    "energy_s": (int, float), "rest_s": (int, float), "timeout_s": (int, float),
}
"""The TOML types each task field accepts in a task file. A boolean is never a number and a string
never a number or a boolean there (``iterations = true`` and ``timeout_s = "1e3"`` are refused, not
read as 1 and 1000); ``memory_pipelining = "off"`` and ``shape = "m=1,n=2,k=3"`` are the documented
text forms."""


def check_file_type(field: str, value: Any) -> None:
    """ValueError unless ``value`` is one of the TOML types ``FILE_TYPES`` allows for ``field``."""
    allowed = FILE_TYPES.get(field)
    if allowed is None or value is None:
        return
    scalar = next((t for t in (bool, int, float) if isinstance(value, t)), None)  # bool before int
    if scalar is not None:
        ok = scalar in allowed
    else:
        ok = isinstance(value, tuple(t for t in allowed if t not in (bool, int, float)))
    if not ok:
        want = " or ".join(TOML_KINDS[t] for t in allowed if not (t is int and float in allowed))
        hint = ": write numbers and booleans without quotes" if isinstance(value, str) else ""
        raise ValueError(f"expected {want}, got {toml_kind(value)}{hint}")


class DType(str, enum.Enum):
    """Element type of the inputs and output; accumulation is always fp32."""

    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"
    tf32 = "tf32"
    """fp32 inputs and output, multiplied on the tensor cores in TF32 (10-bit mantissa): opt-in."""

    @property
    def itemsize(self) -> int:
        return 4 if self in (DType.fp32, DType.tf32) else 2


class BackendName(str, enum.Enum):
    auto = "auto"
    cuda = "cuda"
    sim = "sim"


class Fault(str, enum.Enum):
    """A fault to inject, so that every failure path can be exercised on purpose."""

    none = "none"
    compile_error = "compile_error"
    launch_failure = "launch_failure"
    illegal_address = "illegal_address"
    hang = "hang"
    nan = "nan"


def format_pipelining(stages: int | None) -> str:
    """How a MEMORY_PIPELINING value is shown: 0 -> 'off', else the stage count (the inverse of
    ``parse_pipelining``)."""
    return "off" if stages == 0 else str(stages)


def parse_pipelining(value: Any) -> int:
    """``off``/``0`` -> 0 (synchronous loads); an integer >= 2 -> that many async-copy stages."""
    if isinstance(value, bool):
        raise ValueError("expected 'off' or a number of stages")
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("off", "none", "false", "no", "0", "sync"):
            return 0
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected 'off' or a number of stages, got {short_repr(value)}") from None
    if not isinstance(value, int):
        raise ValueError(f"expected 'off' or a number of stages, got {short_repr(value)}")
    if value == 1:
        raise ValueError("1 stage cannot overlap copies with compute: use 'off' or 2 or more stages")
    if value < 0:
        raise ValueError(f"must be 'off' or >= 2, got {value}")
    return value


def parse_tile(v: Any) -> Tile | None:
    """BLOCK_SIZE as a task file, an environment variable or a flag gives it ('128x256', ' 128X256 ',
    '128*256', 256, [128, 256, 64]) -> Tile; ValueError saying what is expected."""
    if v is None or isinstance(v, Tile):
        return v
    if isinstance(v, bool):
        raise ValueError("expected a tile shape such as '128x128'")
    if isinstance(v, int):
        return Tile.parse(str(v))
    if isinstance(v, (list, tuple)):
        if not 1 <= len(v) <= 3 or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in v):
            raise ValueError("expected 1 to 3 positive integers, e.g. [128, 256] or [128, 256, 64]")
        return Tile.parse("x".join(str(x) for x in v))
    if not isinstance(v, str):
        raise ValueError("expected a tile shape such as '128x128' or [128, 128]")
    text = v.strip().lower().replace("*", "x").replace(",", "x").replace(" ", "")
    if not text:
        raise ValueError("empty: give a tile shape such as '128x128', or leave it out for the default")
    return Tile.parse(text)


class TaskSpec(BaseModel):
    """One benchmark task. Every field has a default; the default task is the seeds' case:
    attention output projection + residual add, batch 16 x seq 512 x hidden 2560, bf16."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    kernel: str = "gemm_residual"
    """Kernel name, as listed by ``tui kernels`` (e.g. gemm_residual, add_rmsnorm)."""
    kernel_file: str | None = None
    """A user kernel's spec file (TOML beside its .cu, see examples/kernels/); ``kernel`` is then the
    name it defines. Set by itself for a user kernel found by name in the config dir's kernels/."""
    shape: dict[str, int] = Field(default_factory=lambda: {"m": 16 * 512, "n": 2560, "k": 2560})
    """Problem dimensions by name; the kernel spec says which (gemm: m, n, k; or batch, seq, hidden)."""
    dtype: DType = DType.bf16
    """Input/output element type (bf16, fp16, fp32, or tf32 = fp32 data on TF32 tensor cores);
    accumulation is fp32."""
    block_size: Tile | None = None
    """BLOCK_SIZE: the tile shape, e.g. '128x128' or '128x256x64' (kernel default when unset), parsed
    once here into a ``Tile`` and written back as its text, so TOML, JSON and the store read
    '128x256' as before."""
    memory_pipelining: int | None = None
    """MEMORY_PIPELINING: 0 = off (synchronous loads) or the number of async-copy stages (>= 2)."""
    schedule: dict[str, str | int] = Field(default_factory=dict)
    """Schedule choices beyond BLOCK_SIZE and MEMORY_PIPELINING (``tui kernels`` lists each kernel's),
    e.g. {consumers = "pingpong", cluster = 2}; a choice left out is the planner's or the tuner's."""
    fusion: bool = True
    """Fuse the epilogue (residual add) into the kernel; off = the kernel and a separate add."""
    warmup: int = Field(default=10, ge=0, le=100_000)
    """Untimed launches before measuring (module load, clocks, caches)."""
    iterations: int = Field(default=100, ge=1, le=1_000_000)
    """Timed launches; median, p10 and p90 are taken over them."""
    energy_s: float = Field(default=0.0, ge=0.0, le=ENERGY_MAX_S)
    """Seconds of back-to-back launches after the timed runs for board power and energy per launch
    from NVML's total-energy counter (0 = off; at least 0.5 s: the counter advances in ~100 ms steps,
    so the figure is good to about 2 steps / window, e.g. +-4 % over 5 s)."""
    rest_s: float = Field(default=0.0, ge=0.0, le=REST_MAX_S)
    """Seconds the GPU idles before our timed launches and before each peer's, so that every
    implementation starts from the same rested card (0 = no rest). A GEMM timed right after another
    one runs slower than after a rest, which flatters whichever runs first: ours (ADR-0004)."""
    device: int = Field(default=0, ge=0, le=63)
    """GPU index as CUDA enumerates it (after CUDA_VISIBLE_DEVICES)."""
    backend: BackendName = BackendName.auto
    """auto (CUDA when a driver and device answer, else the simulated device), cuda or sim."""
    verify: bool = True
    """Check the output against a higher-precision reference."""
    peers: bool = True
    """Time the peer implementations (cuBLAS, CuPy) on the same inputs in the same run."""
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    """Seed for the N(0,1) inputs and for the simulated device's noise."""
    timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    """Wall-clock limit for the whole run; the engine process is killed when it passes."""
    fault: Fault = Fault.none
    """Deliberately inject a fault (tests and rehearsals): compile_error, launch_failure, ..."""

    @field_validator("*", mode="before")
    @classmethod
    def _file_types(cls, v: Any, info: ValidationInfo) -> Any:
        """Strict TOML types for values from a task file (``FILE_CONTEXT``)."""
        if info.context is not None and info.context.get("source") == "file" and info.field_name:
            check_file_type(info.field_name, v)
        return v

    @field_validator("energy_s")
    @classmethod
    def _energy_s(cls, v: float) -> float:
        if 0 < v < ENERGY_MIN_S:
            raise ValueError(f"energy_s: 0 (off) or at least {ENERGY_MIN_S:g} s (NVML's energy counter "
                             "advances in steps, about 100 ms apart on an H200)")
        return v

    @field_validator("memory_pipelining", mode="before")
    @classmethod
    def _pipelining(cls, v: Any) -> int | None:
        return None if v is None else parse_pipelining(v)

    @field_validator("block_size", mode="before")
    @classmethod
    def _block_size(cls, v: Any) -> Tile | None:
        return parse_tile(v)

    @field_serializer("block_size")
    def _block_size_text(self, v: Tile | None) -> str | None:
        return None if v is None else str(v)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> TaskSpec:
        """A copy with ``update`` applied; a BLOCK_SIZE in it is parsed as the validator parses it
        (pydantic's copy does not validate), so ``block_size`` is always a Tile or None."""
        if update and update.get("block_size") is not None and not isinstance(update["block_size"], Tile):
            update = {**update, "block_size": parse_tile(update["block_size"])}
        return super().model_copy(update=update, deep=deep)

    @field_validator("schedule", mode="before")
    @classmethod
    def _schedule(cls, v: Any) -> dict[str, str | int]:
        if v is None:
            return {}
        if isinstance(v, str):
            v = parse_schedule_text(v)
        if not isinstance(v, Mapping):
            raise ValueError("expected a table of schedule choices, e.g. {consumers = \"pingpong\", cluster = 2}")
        out: dict[str, str | int] = {}
        for key, val in v.items():
            if isinstance(val, bool) or not isinstance(val, (str, int)):
                raise ValueError(f"schedule.{key}: expected a word or an integer, got {short_repr(val)}")
            text = str(key).strip().lower()
            if not text.isidentifier():
                raise ValueError(f"schedule: {short_repr(key)} is not a choice name")
            out[text] = val.strip().lower() if isinstance(val, str) else val
        return out

    @field_validator("shape", mode="before")
    @classmethod
    def _shape(cls, v: Any) -> dict[str, int]:
        if isinstance(v, str):
            v = parse_shape_text(v)
        if isinstance(v, Mapping):
            out: dict[str, int] = {}
            for key, val in v.items():
                if isinstance(val, bool) or not isinstance(val, int):
                    raise ValueError(f"dimension {short_repr(key)} must be an integer, got {short_repr(val)}")
                if val <= 0:
                    raise ValueError(f"dimension {key!r} must be positive, got {val}")
                out[str(key).lower()] = val
            return out
        raise ValueError("expected a table of dimensions, e.g. {m = 8192, n = 2560, k = 2560}")

    @model_validator(mode="before")
    @classmethod
    def _kernel_default_shape(cls, data: Any) -> Any:
        """A kernel named without a shape takes its own default shape (the field's default is the
        GEMM seed's m, n, k: `tui bench --kernel add_rmsnorm` failed on its k); an unknown kernel
        is left to prepare(), which names the known ones. A user kernel's spec is loaded first
        (``engine.user_kernels``: InputError for a bad one)."""
        if isinstance(data, Mapping) and (data.get("kernel_file") or data.get("kernel") not in (None, "gemm_residual")):
            from engine.user_kernels import resolve_task_data

            try:
                data = resolve_task_data(data)
            except InputError as exc:  # a ValidationError like every other bad field
                raise ValueError(str(exc)) from None
        if isinstance(data, Mapping) and "shape" not in data and data.get("kernel") not in (None, "gemm_residual"):
            from kernels import get_spec

            try:
                default = get_spec(str(data["kernel"])).default_shape
            except KeyError:
                return data
            if default:
                return {**data, "shape": dict(default)}
        return data

    def label(self) -> str:
        dims = "x".join(f"{v}" for v in self.shape.values())
        return f"{self.kernel} {dims} {self.dtype.value}"


def parse_shape_text(text: str) -> dict[str, int]:
    """'m=8192,n=2560,k=2560' -> named dims; '8192,2560,2560' or '16x512x2560' -> positional dims,
    which the kernel spec names (a gemm reads 3 as m,n,k and 'BxSxH' style as batch,seq,hidden)."""
    text = text.strip().lower()
    if not text:
        raise ValueError("empty shape")
    if "=" in text:
        out: dict[str, int] = {}
        for part in text.replace(";", ",").split(","):
            if not part.strip():
                continue
            key, _, val = part.partition("=")
            try:
                out[key.strip()] = int(val)
            except ValueError:
                raise ValueError(f"dimension {short_repr(key.strip())}: {short_repr(val.strip())} is not an integer") from None
        return out
    sep = "x" if "x" in text else ","
    try:
        nums = [int(p) for p in text.split(sep) if p.strip()]
    except ValueError:
        raise ValueError(f"cannot read shape {short_repr(text)}: use e.g. 8192,2560,2560 or m=8192,n=2560,k=2560") from None
    return {f"_{i}": n for i, n in enumerate(nums)}


def parse_schedule_text(text: str) -> dict[str, str | int]:
    """'consumers=pingpong,cluster=2' -> {'consumers': 'pingpong', 'cluster': 2} (integers where the
    value is one); '' -> {}."""
    out: dict[str, str | int] = {}
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise ValueError(f"schedule: {part.strip()!r} is not NAME=VALUE (e.g. consumers=pingpong,cluster=2)")
        val = val.strip()
        out[key.strip().lower()] = int(val) if val.lstrip("-").isdigit() else val.lower()
    return out


def _format_validation_error(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "task"
        value = err.get("input")
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            known = ", ".join(TaskSpec.model_fields)
            msg = f"unknown field (known: {known})"
            lines.append(f"{source}: {short_key(field)}: {msg}")
        elif not err["loc"]:  # the whole task (a user kernel's spec file): the message names the field
            lines.append(f"{source}: {msg}")
        else:
            shown = (",".join(f"{short_key(str(k))}={short_repr(v)}" for k, v in value.items())
                     if isinstance(value, dict) and len(value) <= 8 else short_repr(value))
            lines.append(f"{source}: {short_key(field)}={shown}: {msg}")
    return "; ".join(lines)


ENV_KNOBS = {"BLOCK_SIZE": "block_size", "MEMORY_PIPELINING": "memory_pipelining"}


def task_table(doc: dict[str, Any], path: Path | str) -> dict[str, Any]:
    """The task in a task file: its keys at the top level, or all of them under ``[task]`` (the
    seeds' form). Both at once is refused, naming the top-level keys: they would be ignored."""
    if "task" not in doc:
        return doc
    others = [short_repr(k) for k in doc if k != "task"]
    if others:
        raise InputError(f"task file {path}: has a [task] table and top-level keys {', '.join(others)}, "
                         "which would be ignored",
                         fix="put every task key under [task], or drop the [task] header")
    table = doc["task"]
    if not isinstance(table, dict):
        raise InputError(f"task file {path}: task: expected a table ([task]), got {toml_kind(table)}")
    return table


def resolve_task(
    task_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TaskSpec:
    """Merge defaults < task file < env (BLOCK_SIZE, MEMORY_PIPELINING) < overrides (CLI/TUI).

    Raises InputError naming the source and field of the first bad value."""
    data: dict[str, Any] = {}
    if task_file is not None:
        raw = task_table(load_toml(Path(task_file), "task file"), task_file)
        try:
            TaskSpec.model_validate(raw, context=FILE_CONTEXT)
        except ValidationError as exc:
            raise InputError(_format_validation_error(exc, f"task file {task_file}")) from None
        data.update(raw)
    env = os.environ if env is None else env
    for var, field in ENV_KNOBS.items():
        if env.get(var, "").strip():
            data[field] = env[var]
            try:
                TaskSpec.model_validate({field: env[var]})
            except ValidationError as exc:
                raise InputError(_format_validation_error(exc, f"environment {var}")) from None
    for key, val in (overrides or {}).items():
        if val is not None:
            data[key] = val
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(_format_validation_error(exc, "task")) from None


def task_to_toml_dict(task: TaskSpec) -> dict[str, Any]:
    """The task as a TOML-ready dict (unset knobs left out, enums as strings). The backend is left
    out: it belongs to the session (a task saved on the simulated device must run on the GPU of the
    box it is opened on)."""
    d = task.model_dump(mode="json", exclude_none=True)
    d.pop("backend", None)
    if d.get("fault") == "none":
        d.pop("fault")
    if not d.get("schedule"):
        d.pop("schedule", None)
    return d


def save_task(task: TaskSpec, path: Path) -> None:
    """Write the task as TOML atomically (a crash never leaves half a file); OSError when it cannot."""
    import tomli_w

    from engine.safe_files import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # never through a link at the path or beside it; callers take OSError
        write_atomic(path, tomli_w.dumps(task_to_toml_dict(task)), mode=0o644)
    except InputError as exc:
        raise OSError(errno.ELOOP, exc.message) from None
