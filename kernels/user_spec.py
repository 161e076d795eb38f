"""A user kernel as a kernel spec: the engine plans, builds, runs, tunes and stores it like its own.

Knobs map onto the engine's: the BLOCK_SIZE knob (``UserKernelDef.block_knob``), an optional
MEMORY_PIPELINING knob, and every other knob as a schedule choice (its name in lowercase), so task
files, env overrides, ``tui tune`` and the cockpit's Tune screen need nothing new. The source is
rendered as the knobs' ``#define``s, the dtype prelude, then the user's file under ``#line 1`` so
that NVRTC's errors name the user's file and line.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from kernels.expr import ExprError, as_int, parse
from kernels.spec import (
    INT32_MAX,
    Buffer,
    Build,
    DeviceLimits,
    KernelPlan,
    KernelSpec,
    KnobDef,
    Launch,
    Tile,
    Violation,
)
from kernels.user_def import LIMIT_NAMES, UserKernelDef
from kernels.user_reference import Reference

ITEMSIZE = {"bf16": 2, "fp16": 2, "fp32": 4}
DTYPE_CODE = {"bf16": 0, "fp16": 1, "fp32": 2}
DEFAULT_RTOL = {"bf16": 1.6e-2, "fp16": 2e-3, "fp32": 1e-5}
GRID_MAX = (INT32_MAX, 65535, 65535)
BLOCK_MAX = (1024, 1024, 64)

PRELUDE = r"""
#if SOL_DTYPE == 2
typedef float scalar_t;
__device__ __forceinline__ float sol_to_f32(scalar_t x) { return x; }
__device__ __forceinline__ scalar_t sol_from_f32(float x) { return x; }
#else
typedef unsigned short scalar_t;
#if SOL_DTYPE == 1
__device__ __forceinline__ float sol_to_f32(scalar_t x) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x)); return f; }
__device__ __forceinline__ scalar_t sol_from_f32(float x) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x)); return h; }
#else
__device__ __forceinline__ float sol_to_f32(scalar_t x) { return __uint_as_float(((unsigned int)x) << 16); }
__device__ __forceinline__ scalar_t sol_from_f32(float x) {
    unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x)); return h; }
#endif
#endif
"""
"""What a user source may use: ``scalar_t`` (the element's storage type) and fp32 conversions."""


def _dtype(task: Any) -> str:
    return str(getattr(task.dtype, "value", task.dtype))


class UserKernelSpec(KernelSpec):
    """A kernel read from a spec file (``UserKernelDef``) and the texts it names."""

    source_files = ()

    def __init__(self, defn: UserKernelDef, spec_path: Path, source_text: str, spec_text: str,
                 reference_text: str = "", origin: str = "file") -> None:
        self.defn = defn
        self.spec_path = Path(spec_path)
        self.source_path = self.spec_path.parent / defn.source
        self.source_text = source_text
        self.origin = origin
        self.extra_paths: list[Path] = []
        """Files beside the spec that it reads (source, reference file): a change reloads it."""
        """'file' (``--kernel-file``) or 'config' (found in the config dir's kernels/ folder)."""
        self.name, self.title, self.description = defn.name, defn.title or defn.name, defn.description
        self.dims = tuple(defn.dims)
        self.dtypes = tuple(defn.dtypes)
        self.default_shape = dict(defn.default_shape)
        self.outputs = tuple(a.name for a in defn.args if a.kind == "output")
        self.block_knob, self.pipe_knob = defn.block_knob(), defn.pipelining_knob()
        self.sched_knobs = {k.lower(): k for k in defn.schedule_knobs()}
        self._constraints = defn.constraint_exprs()
        self._grid = [parse(e) for e in defn.launch.grid]
        self._block = [parse(e) for e in defn.launch.block]
        self._smem = parse(defn.launch.shared_mem_bytes)
        self._flops, self._bytes = parse(defn.flops), parse(defn.bytes)
        self._eff = parse(defn.sim_efficiency) if defn.sim_efficiency is not None else None
        self._shapes = {a.name: [parse(s) for s in a.shape or []] for a in defn.args}
        self._values = {a.name: parse(a.value) for a in defn.args if a.value is not None}
        h = hashlib.sha256()
        for text in (spec_text, source_text, reference_text, PRELUDE):
            h.update(text.encode() + b"\0")
        self._hash = h.hexdigest()
        ref = defn.reference
        inferable = {str(e) for a in defn.args if a.kind == "input" for e in a.shape or [] if str(e) in self.dims}
        names = {"np", *inferable, *(a.name for a in defn.args if a.kind == "input"),
                 *(n for n, e in self._values.items() if e.names <= inferable)}
        self._reference = Reference(ref.expr, self.spec_path.parent / ref.file if ref.file else None, names,
                                    reference_text)

    def source_hash(self) -> str:
        """sha256 over the spec file, the source, the reference file and the prelude."""
        return self._hash

    # --- knobs -----------------------------------------------------------------------------
    def default_values(self) -> dict[str, int]:
        return {k: d.default_value for k, d in self.defn.knobs.items()}

    def knob_values(self, task: Any) -> tuple[dict[str, int], list[Violation]]:
        """The #define values a task asks for (defaults where it leaves one out), and the
        violations of values not offered or schedule choices the kernel does not have."""
        vals, out = self.default_values(), []
        knobs = self.defn.knobs

        def take(field: str, knob: str, raw: Any) -> None:
            try:
                v = int(str(raw).strip())
            except ValueError:
                v = None
            if v is None or v not in knobs[knob].values:
                out.append(Violation(field, raw, f"{knob} takes {', '.join(map(str, knobs[knob].values))}",
                                     f"#define {knob}"))
            else:
                vals[knob] = v

        if task.block_size is not None:
            take("block_size", self.block_knob, task.block_size)
        pl = getattr(task, "memory_pipelining", None)
        if pl is not None:
            if self.pipe_knob is not None:
                take("memory_pipelining", self.pipe_knob, pl)
            elif pl != 0:
                out.append(Violation("memory_pipelining", pl, f"{self.name} has no pipelining knob", "off (0)"))
        for key, raw in (getattr(task, "schedule", None) or {}).items():
            knob = self.sched_knobs.get(str(key).lower())
            if knob is None:
                out.append(Violation(f"schedule.{key}", raw, "not a knob of this kernel",
                                     ", ".join(self.sched_knobs) or "none"))
            else:
                take(f"schedule.{key}", knob, raw)
        return vals, out

    def _field_of(self, knob: str) -> str:
        if knob == self.block_knob:
            return "block_size"
        if knob == self.pipe_knob:
            return "memory_pipelining"
        return f"schedule.{knob.lower()}"

    def env(self, shape: dict[str, int], knobs: dict[str, int], dtype: str, limits: DeviceLimits) -> dict[str, Any]:
        """The names launch and constraint expressions see."""
        lim = {n: getattr(limits, n) for n in LIMIT_NAMES if n != "compute_capability"}
        lim["compute_capability"] = limits.compute_capability[0] * 10 + limits.compute_capability[1]
        return {**shape, **knobs, **lim, "itemsize": ITEMSIZE.get(dtype, 4)}

    def violations(self, shape: dict[str, int], knobs: dict[str, int], dtype: str,
                   limits: DeviceLimits) -> list[Violation]:
        """Constraints, buffer sizes, scalars and launch geometry against the limits."""
        env = self.env(shape, knobs, dtype, limits)
        out: list[Violation] = []
        for expr, message in self._constraints:
            try:
                ok = bool(expr.evaluate(env))
                why = f"breaks `{expr.text}`" + (f": {message}" if message else "")
            except ExprError as exc:
                ok, why = False, f"cannot evaluate a constraint: {exc}"
            if ok:
                continue
            knob = next((k for k in self.defn.knobs if k in expr.names), None)
            dim = next((d for d in self.dims if d in expr.names), None)
            field, value = ((self._field_of(knob), knobs[knob]) if knob else
                            (f"shape.{dim}", shape[dim]) if dim else ("constraint", expr.text))
            shown = [n for n in sorted(expr.names) if n in LIMIT_NAMES or n == "itemsize"]
            out.append(Violation(field, value, (f"{knob} = {value}: " if knob else "") + why,
                                 ", ".join(f"{n} = {env[n]}" for n in shown)))
        try:
            geo = self.geometry(shape, knobs, dtype, limits)
        except ExprError as exc:
            return [*out, Violation("launch", None, str(exc))]
        grid, block, smem = geo
        threads = math.prod(block)
        if threads > limits.max_threads_per_block or any(b > m for b, m in zip(block, BLOCK_MAX, strict=True)):
            out.append(Violation(self._field_of(self.block_knob), knobs[self.block_knob],
                                 f"block {block} is {threads} threads", f"{limits.max_threads_per_block} threads per block"))
        if any(b < 1 for b in block) or any(g < 1 for g in grid):
            out.append(Violation("launch", f"grid {grid} block {block}", "every grid and block size must be >= 1"))
        if any(g > m for g, m in zip(grid, GRID_MAX, strict=True)):
            out.append(Violation("launch", f"grid {grid}", "grid too large", "2^31-1 x 65535 x 65535"))
        if smem > limits.shared_memory_per_block_bytes or smem < 0:
            out.append(Violation(self._field_of(self.block_knob), knobs[self.block_knob],
                                 f"needs {smem} B of dynamic shared memory per block",
                                 f"{limits.shared_memory_per_block_bytes} B per block on {limits.profile or 'this device'}"))
        scalars = self.scalars(shape, knobs)
        for a in self.defn.args:
            if a.kind == "int32" and not -(2**31) <= scalars[a.name] <= INT32_MAX:
                out.append(Violation(f"args.{a.name}", scalars[a.name], "out of int32 range"))
        return out

    def geometry(self, shape: dict[str, int], knobs: dict[str, int], dtype: str,
                 limits: DeviceLimits) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared memory bytes); ExprError naming the field that fails."""
        env = self.env(shape, knobs, dtype, limits)

        def three(exprs: list[Any], what: str) -> tuple[int, int, int]:
            vals = [as_int(e.evaluate(env), f"launch.{what}[{i}] {e.text!r}") for i, e in enumerate(exprs)]
            return tuple((vals + [1, 1])[:3])  # type: ignore[return-value]

        return three(self._grid, "grid"), three(self._block, "block"), \
            as_int(self._smem.evaluate(env), "launch.shared_mem_bytes")

    def scalars(self, shape: dict[str, int], knobs: dict[str, int] | None = None) -> dict[str, Any]:
        """Scalar arguments' values (those needing a knob left out when ``knobs`` is None)."""
        env = {**shape, **(knobs or {}), "itemsize": 4}
        out: dict[str, Any] = {}
        for a in self.defn.args:
            if a.name in self._values and self._values[a.name].names <= set(env):
                v = self._values[a.name].evaluate(env)
                out[a.name] = as_int(v, f"args.{a.name}.value") if a.kind == "int32" else float(v)
        return out

    # --- the KernelSpec contract -----------------------------------------------------------
    def _fits(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None, **knobs: int) -> bool:
        if dtype not in self.dtypes:
            return False
        vals = {**self.default_values(), **knobs}
        return not self.violations(dict(shape or self.default_shape), vals, dtype, limits)

    def block_size_options(self, limits: DeviceLimits, dtype: str,
                           shape: dict[str, int] | None = None) -> list[str]:
        knob = self.defn.knobs[self.block_knob]
        order = [knob.default_value] + [v for v in knob.values if v != knob.default_value]
        pipes = self.defn.knobs[self.pipe_knob].values if self.pipe_knob else [None]
        out = []
        for v in order:
            if any(self._fits(limits, dtype, shape, **{self.block_knob: v},
                              **({self.pipe_knob: p} if self.pipe_knob and p is not None else {})) for p in pipes):
                out.append(str(v))
        return out

    def pipelining_options(self, limits: DeviceLimits, dtype: str, block_size: str,
                           shape: dict[str, int] | None = None) -> list[int]:
        try:
            bs = int(str(block_size))
        except ValueError:
            return []
        if bs not in self.defn.knobs[self.block_knob].values:
            return []
        if self.pipe_knob is None:
            return [0] if self._fits(limits, dtype, shape, **{self.block_knob: bs}) else []
        knob = self.defn.knobs[self.pipe_knob]
        order = [knob.default_value] + [v for v in knob.values if v != knob.default_value]
        return [p for p in order if self._fits(limits, dtype, shape, **{self.block_knob: bs, self.pipe_knob: p})]

    def default_knobs(self, limits: DeviceLimits, dtype: str,
                      shape: dict[str, int] | None = None) -> tuple[str, int]:
        if dtype not in self.dtypes:
            raise ValueError(f"{self.name}: dtype {dtype} not supported ({', '.join(self.dtypes)})")
        opts = self.block_size_options(limits, dtype, shape)
        if not opts:
            probs = self.violations(dict(shape or self.default_shape), self.default_values(), dtype, limits)
            raise ValueError(f"{self.name}: no {self.block_knob} value fits on {limits.profile or 'this device'}"
                             + (f": {probs[0]}" if probs else ""))
        pls = self.pipelining_options(limits, dtype, opts[0], shape)
        return opts[0], (pls[0] if pls else 0)

    def schedule_knobs(self, limits: DeviceLimits, dtype: str, shape: dict[str, int] | None = None,
                       block_size: Any = None) -> list[KnobDef]:
        return [KnobDef(low, tuple(self.defn.knobs[k].values),
                        f"#define {k}" + (f": {self.defn.knobs[k].doc}" if self.defn.knobs[k].doc else ""))
                for low, k in self.sched_knobs.items()]

    @property
    def reference_file(self) -> Path | None:
        """The Python reference file this kernel's verification runs (None: an expression)."""
        return self._reference.file if self._reference.runs_code else None

    @property
    def reference_sha256(self) -> str | None:
        """The reference file's content hash, as read when the spec loaded."""
        return self._reference.file_sha256

    @property
    def reference_trusted(self) -> bool:
        return self._reference.trusted

    @reference_trusted.setter
    def reference_trusted(self, value: bool) -> None:
        self._reference.trusted = value

    def check(self, task: Any, limits: DeviceLimits) -> list[Violation]:
        dtype = _dtype(task)
        if dtype not in self.dtypes:
            return [Violation("dtype", dtype, f"{self.name} supports {', '.join(self.dtypes)}", "spec dtypes")]
        out, shape = self.shape_violations(task, ", ".join(self.dims))
        knobs, bad = self.knob_values(task)
        out += bad
        if shape is None or out:
            return out
        try:
            sizes = {n: [as_int(e.evaluate(shape), f"args {n} shape") for e in exprs]
                     for n, exprs in self._shapes.items() if exprs}
        except ExprError as exc:
            return [Violation("shape", shape, str(exc))]
        for n, dims in sizes.items():
            if any(d < 1 for d in dims):
                out.append(Violation("shape", shape, f"buffer {n} would have shape {tuple(dims)}"))
        return out + self.violations(shape, knobs, dtype, limits)

    def decide(self, task: Any, limits: DeviceLimits) -> KernelPlan:
        knobs, _ = self.knob_values(task)
        sched = {low: knobs[k] for low, k in self.sched_knobs.items()}
        info: dict[str, Any] = {"knobs": knobs}
        if self.reference_file is not None:
            info["reference"] = f"runs Python from {self.reference_file}"
        return KernelPlan(Tile(knobs[self.block_knob]), knobs[self.pipe_knob] if self.pipe_knob else 0, sched,
                          info=info)

    def flops(self, shape: dict[str, int]) -> int:
        return int(round(self._flops.evaluate({**self.normalize_shape(shape), "itemsize": 4})))

    def bytes_moved(self, shape: dict[str, int], dtype: str) -> int:
        return int(round(self._bytes.evaluate({**self.normalize_shape(shape), "itemsize": ITEMSIZE.get(dtype, 4)})))

    def buffers(self, task: Any) -> list[Buffer]:
        shape = self.normalize_shape(dict(task.shape))
        dt = _dtype(task)
        return [Buffer(a.name, tuple(as_int(e.evaluate(shape), f"args {a.name} shape") for e in self._shapes[a.name]),
                       dt, a.kind)  # type: ignore[arg-type]
                for a in self.defn.args if a.kind in ("input", "output")]

    def source(self, dtype: str, knobs: dict[str, int]) -> str:
        head = f"// {self.name}: a user kernel from {self.spec_path.name}, knobs as #defines\n"
        head += "".join(f"#define {k} {int(v)}\n" for k, v in knobs.items())
        head += f"#define SOL_DTYPE {DTYPE_CODE[dtype]}\n" + PRELUDE
        return f'{head}#line 1 "{self.source_path.name}"\n{self.source_text}\n#line 1 "sol_cockpit_support"\n'

    def describe(self, plan: KernelPlan, task: Any, limits: DeviceLimits) -> dict[str, Any]:
        knobs = plan.info["knobs"]
        grid, block, smem = self.geometry(self.normalize_shape(dict(task.shape)), knobs, _dtype(task), limits)
        shown = ", ".join(f"{k}={v}" for k, v in knobs.items())
        runs = f"; verification runs Python from {self.reference_file}" if self.reference_file else ""
        return {**plan.info, "grid": grid, "block": block, "shared_mem_bytes": smem,
                "path": f"user kernel {self.source_path.name}: {shown}{runs}"}

    def render(self, plan: KernelPlan, limits: DeviceLimits) -> Build:
        task, knobs = plan.task, plan.info["knobs"]
        dtype = _dtype(task)
        shape = self.normalize_shape(dict(task.shape))
        grid, block, smem = self.geometry(shape, knobs, dtype, limits)
        scalars = self.scalars(shape, knobs)
        args = tuple(a.name if a.kind in ("input", "output") else scalars[a.name] for a in self.defn.args)
        launch = Launch(self.defn.entry, grid, block, smem, args)
        return Build(source=self.source(dtype, knobs), functions=(self.defn.entry,), launches=(launch,),
                     options=("-std=c++17",), info=dict(plan.info))

    def reference(self, xp: Any, inputs: dict[str, Any]) -> Any:
        shape = self.infer_dims(inputs)
        env = {**shape, **self.scalars(shape), **inputs}
        out = self._reference(xp, env)
        return out if isinstance(out, dict) else {self.outputs[0]: out}

    def reference_outputs(self, xp: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        refs = self.reference(xp, inputs)
        shape = self.infer_dims(inputs)
        for name in self.outputs:
            if name not in refs:
                raise ValueError(f"reference: returns no output {name!r}")
            exprs = self._shapes[name]
            if all(e.names <= set(shape) for e in exprs):
                want = tuple(as_int(e.evaluate(shape), name) for e in exprs)
                refs[name] = xp.broadcast_to(xp.asarray(refs[name], dtype=xp.float64), want)
        return refs

    def infer_dims(self, inputs: dict[str, Any]) -> dict[str, int]:
        """Dimensions read off the input arrays' shapes (an axis whose expression is a bare name)."""
        shape: dict[str, int] = {}
        for a in self.defn.args:
            if a.kind == "input" and a.name in inputs:
                for e, n in zip(self._shapes[a.name], inputs[a.name].shape, strict=False):
                    if e.text in self.dims:
                        shape.setdefault(e.text, int(n))
        return shape

    def rtol(self, dtype: str) -> float:
        return self.defn.reference.rtol.get(dtype, DEFAULT_RTOL.get(dtype, 1e-5))  # type: ignore[call-overload]

    def sim_efficiency(self, task: Any, limits: DeviceLimits) -> float:
        """The spec's ``sim_efficiency`` expression, else a model: 0.7 of SOL at 256 threads per
        block, less for smaller or larger blocks, and less for a grid that leaves SMs idle."""
        try:
            shape = self.normalize_shape(dict(task.shape))
            knobs, _ = self.knob_values(task)
            dtype = _dtype(task)
            if self._eff is not None:
                return max(0.01, min(0.95, float(self._eff.evaluate(self.env(shape, knobs, dtype, limits)))))
            grid, block, _ = self.geometry(shape, knobs, dtype, limits)
        except (ExprError, ValueError, TypeError):
            return 0.05
        threads, blocks = max(1, math.prod(block)), max(1, math.prod(grid))
        f_threads = max(0.3, 1.0 - 0.12 * abs(math.log2(threads / 256)))
        slots = limits.sm_count * max(1, min(32, 2048 // threads))
        f_wave = max(0.2, blocks / (math.ceil(blocks / slots) * slots))
        return max(0.01, min(0.95, 0.7 * f_threads * f_wave))
