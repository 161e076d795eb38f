"""``--tail-bits``: each build with its partial last tiles moved back to end at M, N against the
same build clipped: correct, and bit for bit the same output where the engine shifts."""

from __future__ import annotations

import cupy as cp

from bench.sm90.gemm import (
    F32,
)
from bench.sm90.report import write_table
from bench.sm90.variants import engine_default, for_dtype, variant
from kernels.gemm_residual_experiments import hopper_knobs

TAIL_BITS_SHAPES = [(7976, 2560, 2560), (8000, 2560, 2560), (333, 1032, 520), (130, 264, 72),
                    (4096, 2504, 2560), (1571, 2560, 2560), (300, 136, 200), (2047, 2600, 704)]
TAIL_BITS_VARIANTS = [  # (tile, stages, dtype, fuse, streamk, pingpong, cluster)
    ("128x128", 5, "{dt}", True, False, True, 2), ("128x128", 5, "{dt}", True, True, True, 1),
    ("128x160", 5, "{dt}", True, True, False, 1), ("128x256", 3, "{dt}", True, True, False, 1),
    ("64x80", 8, "{dt}", True, False, False, 1), ("128x128", 4, "{dt}", False, True, False, 1),
]
TAIL_BITS_F32 = [  # fp32 (3xTF32) and tf32: unclustered cooperative tiles at depths that fit
    ("128x128", 4, "{dt}", True, True, False, 1), ("128x160", 4, "{dt}", True, True, False, 1),
    ("128x256", 2, "{dt}", True, True, False, 1), ("128x128", 4, "{dt}", False, True, False, 1),
]


def tail_bits_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """``--tail-bits``: each build with its partial last tiles moved back to end at M and N
    (``tail_shift``) against the same build without, on the same inputs, at shapes whose last tiles
    reach past M, N or both: correct against the float64 reference, and bit for bit the unshifted
    output (the rows and columns two tiles share are computed by both and stored twice: the same
    bits, or the result would depend on which store lands last). Bit identity fails the run only
    where ``use_tail_shift`` would shift (16-bit data, no stream-K code); elsewhere it is reported
    (stream-K and fp32-data builds can differ in the last bits, ADR-0007 E10)."""
    lines = ["tail shift: shifted vs unshifted build, bit for bit, and against the reference"]
    for dt in ("bf16", "fp16", "fp32", "tf32"):
        for v0 in [None, *(TAIL_BITS_F32 if dt in F32 else TAIL_BITS_VARIANTS)]:
            for m, n, k in TAIL_BITS_SHAPES:
                if v0 is None:  # the engine's default knobs at this shape, every choice its own
                    v = engine_default(*hopper_knobs(limits, dt, {"m": m, "n": n, "k": k}), dt)
                else:
                    v = for_dtype(v0, dt)
                bufs, _ref = get(m, n, k, dt)
                outs = []
                try:
                    for shift in (False, True):
                        ok = verify(m, n, k, variant(v)._replace(tail_shift=shift), label="tail bits")
                        outs.append(bufs["out"].copy())
                except Exception as e:  # noqa: BLE001 - a build that cannot run: record, go on
                    failures.append(f"tail bits {dt} {v} {(m, n, k)}: {type(e).__name__}: {e}")
                    print(failures[-1], flush=True)
                    continue
                same = bool(cp.array_equal(outs[0].view(cp.uint8), outs[1].view(cp.uint8)))
                # required where the engine's own choice (use_tail_shift) shifts this build
                required = "#define TAIL_SHIFT 1" in build(m, n, k, variant(v)._replace(tail_shift=None)).source
                if required and not same:
                    diff = int(cp.count_nonzero(outs[0] != outs[1]))
                    failures.append(f"tail bits {dt} {v} {(m, n, k)}: {diff} elements differ")
                who = "engine default " if v0 is None else ""
                lines.append(f"{dt} {who}{v[0]} s{v[1]} pp={v[5]} cl={v[6]} fuse={v[3]} {(m, n, k)}: "
                             f"correct {ok}, bit-identical {same}"
                             + ("" if required else " (not required: the engine does not shift this build)"))
                print(lines[-1], flush=True)
    lines.append(f"{len(failures)} failures")
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_tail_bits")
    return 0 if not failures else 1
