"""Residual add + RMSNorm, fused: one pass over the data (memory-bound).

``residual_out = x + r`` (rounded to the dtype) and ``out = s * rsqrt(mean(s^2) + 1e-6) * weight``
where ``s = x + r`` is the fp32 sum *before* rounding: the norm and the normalised value come from
it, the weight is applied in fp32, each output is rounded once. (With fusion off the second kernel
can only read the rounded residual_out back, so there the norm is of the rounded sum: within the
dtype's tolerance of the same reference.) The reference is the same formula in float64.

Knobs:

* BLOCK_SIZE = threads per block ("128", "256", "512", "1024"). One block works on one row at a
  time; thread t owns the 16-byte vectors t, t + BLOCK_SIZE, ... of the row, kept in registers
  (vectors per thread = ceil(N * itemsize / 16 / BLOCK_SIZE), a compile-time constant, at most 8).
  Rows longer than that fall back to two passes, the second re-reading residual_out (from L2).
* MEMORY_PIPELINING = rows in flight per block. off: load a row, reduce, write, then load the next.
  S (2, 3, 4): the block's next S-1 rows are loaded (into S register slots) before the current
  row's reduction and stores, so each thread always has loads outstanding across the barrier. On
  the long-row path S is the number of vectors each thread has in flight in the first pass.
* fusion off: ``residual_add`` writes residual_out, then ``rmsnorm`` reads it back: one more pass
  over [M, N] (5 instead of 4) and a second launch.

The grid is persistent: sm_count x blocks-per-SM (the launch bounds promise that many, so the
register budget of each variant is fixed and checked for spills), striding over the rows.

Two paths, chosen by the device (not a knob): on Hopper and later (compute capability >= 9.0) the
fused kernel with rows in registers takes the TMA bulk ring (``uses_bulk``): thread 0 copies whole
rows of x and r into a ring of MEMORY_PIPELINING shared-memory slots with ``cp.async.bulk`` (off =
one slot, refilled after the row's stores), the threads read their vectors from the slot; same
arithmetic in the same order, so bit-identical outputs, and more bytes in flight than the register
path's (faster on the H200: ADR-0006).
Elsewhere (older GPUs, fusion off, rows too long for registers or for the ring) the register path.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kernels.rowwise import DTYPE_CODE, ITEMSIZE, check_rows, threads_per_sm
from kernels.rowwise import dtype_of as _dtype
from kernels.spec import (
    Buffer,
    Build,
    DeviceLimits,
    KernelPlan,
    KernelSpec,
    Launch,
    PeerSpec,
    Violation,
    fill_knobs,
    torch_view,
    with_fields,
)

STAGE_CHOICES = (0, 2, 3, 4)
"""MEMORY_PIPELINING: off (0) or rows in flight per block."""
MAX_VPT = 8
"""Most 16-byte vectors per thread kept in registers; longer rows take the re-read path."""
EPS = 1e-6


def vectors_per_row(n: int, dtype: str) -> int:
    return n * ITEMSIZE[dtype] // 16


def vpt_for(n: int, dtype: str, threads: int) -> int:
    """Vectors per thread held in registers, or 0 for the long-row (re-read) path."""
    v = math.ceil(vectors_per_row(n, dtype) / threads)
    return v if v <= MAX_VPT else 0


BULK_RING_STAGES = 3
"""Rows in flight per block on the bulk path, its default MEMORY_PIPELINING (H200: 3 and 4 slots
level, 256 threads x 4 blocks / 3 slots within 0.3 % of the best variant at [32768, 4096], 128 x 4
/ 3 at [8192, 2560])."""
BULK_MAX_BLOCKS = 4
"""Most blocks per SM on the bulk path (the H200 measurement went up to 4; more are not measured)."""
BULK_STATIC_SMEM = 512
"""Upper bound of the bulk kernel's static shared memory: the reduction's partial sums (2 x 32
floats) and one 8-byte barrier per slot (at most 4)."""
RESERVED_SMEM = 1024
"""Shared memory the driver reserves per block on sm_80 and later."""


def slot_bytes(n: int, dtype: str) -> int:
    """One slot of the bulk ring: a row of x and one of r, rounded up to 128 bytes."""
    return (2 * n * ITEMSIZE[dtype] + 127) // 128 * 128


def ring_bytes(n: int, dtype: str, stages: int) -> int:
    """The bulk ring's dynamic shared memory: max(1, stages) slots (MEMORY_PIPELINING off: one)."""
    return max(1, stages) * slot_bytes(n, dtype)


def bulk_register_estimate(dtype: str, vpt: int) -> int:
    """Registers per thread of the bulk kernel, fitted to ptxas' figures for sm_90a without launch
    bounds (bf16 36-160, fp32 24-96 for 1-8 vectors per thread, any depth: the ring is in shared
    memory, not registers); tests/unit/test_membound_compile.py checks no variant spills."""
    return 20 + (10 if dtype == "fp32" else 19) * vpt


def bulk_blocks_per_sm(dtype: str, n: int, threads: int, stages: int,
                       limits: DeviceLimits | None) -> int:
    """Blocks per SM of the bulk path (0: it does not apply): the ring of max(1, stages) slots fits
    one block's shared memory, and as many blocks as registers, threads, shared memory and
    ``BULK_MAX_BLOCKS`` allow."""
    vpt = vpt_for(n, dtype, threads)
    if limits is None or vpt == 0:
        return 0
    smem = ring_bytes(n, dtype, stages) + BULK_STATIC_SMEM
    if smem > limits.shared_memory_per_block_bytes:
        return 0
    regs = 8 * math.ceil(bulk_register_estimate(dtype, vpt) / 8)
    return max(0, min(BULK_MAX_BLOCKS, threads_per_sm(limits) // threads,
                      limits.registers_per_sm // (regs * threads),
                      limits.shared_memory_per_sm_bytes // (smem + RESERVED_SMEM)))


def uses_bulk(dtype: str, n: int, threads: int, stages: int, fused: bool,
              limits: DeviceLimits | None) -> bool:
    """The TMA bulk ring applies: compute capability >= 9.0, fused, the row in registers, and the
    ring fits (``bulk_blocks_per_sm`` >= 1)."""
    return (limits is not None and tuple(limits.compute_capability) >= (9, 0) and fused
            and bulk_blocks_per_sm(dtype, n, threads, stages, limits) >= 1)


def register_estimate(dtype: str, threads: int, vpt: int, stages: int, fused: bool) -> int:
    """Registers per thread a variant needs, fitted to ptxas' figures for sm_90a without launch
    bounds (tests/unit/test_membound_compile.py checks no variant spills under the bounds this
    implies): a base, the current row (raw vectors and fp32 values) per vector per thread, and
    each further row in flight per vector per thread. The long-row path needs ~96."""
    if vpt == 0:
        return 96
    slots = max(1, stages)
    if dtype == "fp32":
        base, per_vec, per_slot = (28, 16, 11) if fused else (28, 10, 10)
    else:
        base, per_vec, per_slot = (32, 22, 10) if fused else (30, 18, 7)
    return base + per_vec * vpt + per_slot * vpt * (slots - 1)


def blocks_per_sm(dtype: str, threads: int, vpt: int, stages: int, fused: bool,
                  limits: DeviceLimits | None = None) -> int:
    """Blocks per SM the launch bounds promise (0 when even one block cannot get its registers):
    as many as the register estimate (rounded up to 8) and the SM's resident threads allow, at
    most 16. The persistent grid is sm_count times this, so every block is resident at once."""
    est = register_estimate(dtype, threads, vpt, stages, fused)
    if est > 255:
        return 0
    regs = 8 * math.ceil(est / 8)
    regs_sm = limits.registers_per_sm if limits is not None else 65536
    return max(0, min(16, threads_per_sm(limits) // threads, regs_sm // (regs * threads)))


class AddRmsNormSpec(KernelSpec):
    """Residual add + RMSNorm with both outputs written (fused or as two kernels)."""

    source_files = ("add_rmsnorm.py", "add_rmsnorm.cu", "rowwise.py", "vec16.cuh", "mbarrier.cuh")

    name = "add_rmsnorm"
    title = "residual add + RMSNorm"
    description = ("residual_out = x + r; out = rmsnorm(x + r) * weight (eps 1e-6, fp32 statistics); "
                   "one pass, 16-byte vectors; rows in flight in registers, on Hopper in a shared-memory ring "
                   "filled by TMA bulk copies")
    dims = ("m", "n")
    default_shape = {"m": 32768, "n": 4096}
    outputs = ("out", "residual_out")

    # --- shape and knobs -------------------------------------------------------------------
    def block_size_options(self, limits: DeviceLimits, dtype: str,
                           shape: dict[str, int] | None = None) -> list[str]:
        if dtype not in DTYPE_CODE:
            return []
        opts = [t for t in (256, 128, 512, 1024) if t <= limits.max_threads_per_block]
        return [str(t) for t in opts]

    def pipelining_options(self, limits: DeviceLimits, dtype: str, block_size: str,
                           shape: dict[str, int] | None = None) -> list[int]:
        """Off, 2, 3, 4 (deepest first, off last); with a shape, the depths that fit it fused (the
        register path's registers or Hopper's ring in shared memory depend on the row length, as
        check() tests), so the Tune screen and the runner's fix list only what runs."""
        if dtype not in DTYPE_CODE or str(block_size) not in self.block_size_options(limits, dtype):
            return []
        opts = [4, 3, 2, 0]
        if shape:
            try:
                s = self.normalize_shape(dict(shape))
            except ValueError:
                return opts
            if s["n"] > 0 and s["n"] % 8 == 0:
                opts = [st for st in opts if self._fits(dtype, s, int(str(block_size)), st, True, limits)]
        return opts

    def _fits(self, dtype: str, shape: dict[str, int], threads: int, stages: int, fused: bool,
              limits: DeviceLimits) -> bool:
        vpt = vpt_for(shape["n"], dtype, threads)
        return all(uses_bulk(dtype, shape["n"], threads, stages, f, limits)
                   or blocks_per_sm(dtype, threads, vpt, stages, f, limits) >= 1
                   for f in {fused, True})

    def default_knobs(self, limits: DeviceLimits, dtype: str,
                      shape: dict[str, int] | None = None) -> tuple[str, int]:
        """Among the thread counts whose registers fit, the one that wastes the fewest vector slots
        of a row (ties: 2 vectors per thread, then more threads), with 2 rows in flight on the
        register path (measured on the H200 within 1 % of its best variant at [32768, 4096] and
        [8192, 2560] bf16) and ``BULK_RING_STAGES`` where the bulk ring applies."""
        opts = [int(t) for t in self.block_size_options(limits, dtype)]
        if not opts:
            raise ValueError(f"{self.name}: dtype {dtype} not supported")
        if not shape or "n" not in shape:
            return str(opts[0]), 2
        v = max(1, vectors_per_row(shape["n"], dtype))

        def score(t: int) -> tuple[float, int, int]:
            vpt = vpt_for(shape["n"], dtype, t)
            if vpt == 0:                      # long rows: the re-read path, 256 threads
                return (2.0, abs(t - 256), -t)
            return (1.0 - v / (t * vpt), abs(vpt - 2), -t)

        fitting = [t for t in opts if self._fits(dtype, shape, t, 0, True, limits)] or opts
        best = min(fitting, key=score)
        if uses_bulk(dtype, shape["n"], best, BULK_RING_STAGES, True, limits):
            return str(best), BULK_RING_STAGES
        stages = 2 if self._fits(dtype, shape, best, 2, True, limits) else 0
        return str(best), stages

    def check(self, task: Any, limits: DeviceLimits) -> list[Violation]:
        """dtype; m, n in int32 range; n a multiple of 8 (16-byte vectors, for every dtype);
        BLOCK_SIZE in the space and within the thread limit; MEMORY_PIPELINING offered; the
        variant's register estimate fits one block on an SM."""
        def size(shape: dict[str, int], dtype: str) -> list[Violation]:
            if shape["m"] * shape["n"] > 2**31 * 8:
                return [Violation("shape.m", shape["m"], "m * n too large", f"m * n <= {2**34}")]
            return []

        out, shape, threads = check_rows(self, task, limits, size)
        if any(v.field == "dtype" for v in out):
            return out
        dtype = _dtype(task)
        stages = task.memory_pipelining
        if stages is not None and stages not in STAGE_CHOICES:
            out.append(Violation("memory_pipelining", stages, "rows in flight not offered", "off (0), 2, 3 or 4"))
            stages = None
        if threads is not None and stages is not None and shape is not None and shape["n"] % 8 == 0:
            fused = bool(getattr(task, "fusion", True))
            if not self._fits(dtype, shape, threads, stages, fused, limits):
                vpt = vpt_for(shape["n"], dtype, threads)
                need = register_estimate(dtype, threads, vpt, stages, True)
                out.append(Violation("memory_pipelining", stages,
                                     f"{stages or 1} row(s) in flight of {vpt} vectors per thread need about "
                                     f"{need} registers per thread x {threads} threads",
                                     f"{limits.registers_per_sm} registers per SM, 255 per thread"))
        return out

    # --- arithmetic ------------------------------------------------------------------------
    def flops(self, shape: dict[str, int]) -> int:
        """5 per element: the add, the square and its accumulation (one FMA = 2), the scale by
        rstd and by the weight. The per-row rsqrt is not counted."""
        s = self.normalize_shape(shape)
        return 5 * s["m"] * s["n"]

    def bytes_moved(self, shape: dict[str, int], dtype: str) -> int:
        """x and r read once, residual_out and out written once, the weight read once."""
        s = self.normalize_shape(shape)
        return ITEMSIZE[dtype] * (4 * s["m"] * s["n"] + s["n"])

    # --- running ---------------------------------------------------------------------------
    def buffers(self, task: Any) -> list[Buffer]:
        s = self.normalize_shape(dict(task.shape))
        dt = _dtype(task)
        m, n = s["m"], s["n"]
        return [Buffer("x", (m, n), dt, "input"), Buffer("r", (m, n), dt, "input"),
                Buffer("weight", (n,), dt, "input"), Buffer("residual_out", (m, n), dt, "output"),
                Buffer("out", (m, n), dt, "output")]

    def source(self, dtype: str, threads: int, vpt: int, stages: int, minb: int, fusion: bool,
               bulk: bool = False) -> str:
        defines = {"AR_DTYPE": DTYPE_CODE[dtype], "AR_THREADS": int(threads), "AR_VPT": int(vpt),
                   "AR_STAGES": max(1, int(stages)), "AR_MINB": int(minb), "AR_FUSE": int(bool(fusion))}
        if bulk:
            defines["AR_BULK"] = 1
        head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
        return head + self.vec16(defines["AR_DTYPE"]) + self.read_source("add_rmsnorm.cu")

    def _resolve(self, task: Any, limits: DeviceLimits) -> tuple[int, int]:
        """(threads, stages) of a task, its unset knobs filled by the kernel's rules (``fill_knobs``)."""
        task = with_fields(task, fill_knobs(self, task, limits))
        return int(str(task.block_size)), task.memory_pipelining

    def describe(self, plan: KernelPlan, task: Any, limits: DeviceLimits) -> dict[str, Any]:
        return self._layout(replace(plan, task=task), limits)[1]

    def render(self, plan: KernelPlan, limits: DeviceLimits) -> Build:
        launches, _, source_args = self._layout(plan, limits)
        return Build(source=self.source(*source_args), functions=tuple(ln.function for ln in launches),
                     launches=tuple(launches), options=("-std=c++17",), info=dict(plan.info))

    def _layout(self, plan: KernelPlan, limits: DeviceLimits) -> tuple[list[Launch], dict[str, Any], tuple[Any, ...]]:
        """(launches, display info, the source's arguments) of a plan."""
        task = plan.task
        dtype = _dtype(task)
        s = self.normalize_shape(dict(task.shape))
        m, n = s["m"], s["n"]
        threads, stages = int(str(plan.block_size)), plan.memory_pipelining
        fusion = bool(task.fusion)
        vpt = vpt_for(n, dtype, threads)
        bulk = uses_bulk(dtype, n, threads, stages, fusion, limits)
        if bulk:
            minb = bulk_blocks_per_sm(dtype, n, threads, stages, limits)
            smem = ring_bytes(n, dtype, stages)
        else:
            minb, smem = blocks_per_sm(dtype, threads, vpt, stages, fusion, limits), 0
        grid = (max(1, min(m, limits.sm_count * minb)), 1, 1)
        block = (threads, 1, 1)
        if fusion:
            launches = [Launch("add_rmsnorm", grid, block, smem,
                               ("x", "r", "weight", "residual_out", "out", m, n))]
        else:
            nvec = m * vectors_per_row(n, dtype)
            add_grid = (max(1, min(math.ceil(nvec / threads), limits.sm_count * (threads_per_sm(limits) // threads))), 1, 1)
            launches = [Launch("residual_add", add_grid, block, 0, ("x", "r", "residual_out", m, n)),
                        Launch("rmsnorm", grid, block, 0,
                               ("residual_out", "residual_out", "weight", "residual_out", "out", m, n))]
        path = ("TMA bulk ring" if bulk else "registers" if vpt else "re-read") + (
            f", {stages} rows in flight" if stages else ", no overlap")
        info = {"threads": threads, "vectors_per_thread": vpt, "rows_in_flight": max(1, stages),
                "blocks_per_sm": minb, "grid": grid, "fusion": fusion, "path": path,
                "register_estimate": (bulk_register_estimate(dtype, vpt) if bulk
                                      else register_estimate(dtype, threads, vpt, stages, fusion))}
        if bulk:
            info["shared_memory_bytes"] = smem
        return launches, info, (dtype, threads, vpt, stages, minb, fusion, bulk)

    def reference(self, xp: Any, inputs: dict[str, Any]) -> Any:
        """float64: s = x + r; out = s * rsqrt(mean(s^2) + eps) * weight."""
        x = inputs["x"].astype(xp.float64)
        r = inputs["r"].astype(xp.float64)
        w = inputs["weight"].astype(xp.float64)
        s = x + r
        rstd = 1.0 / xp.sqrt(xp.mean(s * s, axis=-1, keepdims=True) + EPS)
        return {"out": s * rstd * w, "residual_out": s}

    def rtol(self, dtype: str) -> float:
        return {"bf16": 1.6e-2, "fp16": 2e-3, "fp32": 1e-5}[dtype]

    def peers(self, task: Any) -> list[PeerSpec]:
        """PyTorch's eager add then rms_norm (the baseline where torch is installed; its output is
        copied into ours for verification, one more pass over out); CuPy ops in fp32, a strawman
        (five passes, not what a framework runs), the baseline only without torch."""
        return [PeerSpec("torch_add_rmsnorm", "torch add + rms_norm (PyTorch eager, + a copy into out)",
                         _peer_torch, baseline=True, dtypes=("bf16", "fp16", "fp32"), needs="torch"),
                PeerSpec("cupy_add_rmsnorm", "CuPy ops in fp32 (strawman: five unfused passes)", _peer_cupy,
                         baseline=True, dtypes=("bf16", "fp16", "fp32"))]

    def sim_efficiency(self, task: Any, limits: DeviceLimits) -> float:
        """Fraction of the bandwidth SOL for the simulated device (factors from an H200: ADR-0005):
        0.75 for 128-512 threads whatever the depth; 1024 threads, one block per SM: off 0.55, 2 rows
        in flight 0.65. A thread count that leaves vector slots empty costs a little, so does the
        persistent grid's row quantisation; the long-row re-read path is modelled at 0.8x (not
        measured); fusion off 0.83x (5/4 of the bytes, two launches). Hopper's bulk ring: 0.80 with 4
        or more rows in flight per SM, 0.76 with 2-3; one row per SM is modelled as the register
        path's (0.55, not measured)."""
        dtype = _dtype(task)
        try:
            s = self.normalize_shape(dict(task.shape))
            threads, stages = self._resolve(task, limits)
        except (ValueError, TypeError):
            return 0.05
        vpt = vpt_for(s["n"], dtype, threads)
        if uses_bulk(dtype, s["n"], threads, stages, bool(task.fusion), limits):
            minb = bulk_blocks_per_sm(dtype, s["n"], threads, stages, limits)
            rows_sm = minb * max(1, stages)
            f_pipe = 0.80 if rows_sm >= 4 else 0.76 if rows_sm >= 2 else 0.55
        else:
            minb = max(1, blocks_per_sm(dtype, threads, vpt, stages, bool(task.fusion), limits))
            if minb == 1:
                f_pipe = 0.65 if stages else 0.55
            else:
                f_pipe = 0.75 if stages else 0.74
        if vpt == 0:
            f_pipe *= 0.8
            util = 1.0
        else:
            util = vectors_per_row(s["n"], dtype) / (threads * vpt)
        f_util = 0.95 + 0.05 * util
        g = max(1, min(s["m"], limits.sm_count * minb))
        f_quant = s["m"] / (g * math.ceil(s["m"] / g))
        f_fuse = 1.0 if task.fusion else 0.83
        return max(0.01, min(0.95, f_pipe * f_util * f_quant * f_fuse))


def _peer_torch(xp: Any, blas: Any, inputs: dict[str, Any], outs: dict[str, Any]) -> None:
    """torch.add into residual_out, then F.rms_norm over the last dimension, copied into out."""
    import torch

    res = torch_view(outs["residual_out"])
    torch.add(torch_view(inputs["x"]), torch_view(inputs["r"]), out=res)
    w = torch_view(inputs["weight"])
    torch_view(outs["out"]).copy_(torch.nn.functional.rms_norm(res, (res.shape[-1],), w, EPS))


def _peer_cupy(xp: Any, blas: Any, inputs: dict[str, Any], outs: dict[str, Any]) -> None:
    """CuPy ops in fp32: s = x + r; out = s * rsqrt(mean(s^2) + eps) * w; cast on assignment."""
    f32 = xp.float32
    s = inputs["x"].astype(f32) + inputs["r"].astype(f32)
    outs["residual_out"][...] = s.astype(outs["residual_out"].dtype)
    rstd = 1.0 / xp.sqrt(xp.mean(s * s, axis=-1, keepdims=True) + f32(EPS))
    outs["out"][...] = (s * rstd * inputs["weight"].astype(f32)).astype(outs["out"].dtype)


SPEC = AddRmsNormSpec()
