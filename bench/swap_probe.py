"""Check and time the swapped-operand tiles (``SWAP_TILES``, R x 128 and R x 256; GPU machine).

    python3 -m bench.swap_probe [--m-list 2400,2500,2560] [--n 2560] [--k 2560] [--rows fit,200,104x256@5,200:2x1]

For each M (N = ``--n``, K = ``--k``; bf16 and fp16): the engine's default build, and the swapped build of
each ``--rows`` (the R x 128 tile's side along M, a multiple of 8 from 136 to 200, or a whole
swapped tile R x C such as 104x256; ``fit`` / ``fitR`` the R x 128 rows that fill 2 / R rounds,
``fit_rows``; ``:2x1`` a cluster in the kernel's frame, sharing A's box
between CTAs along N; ``@S`` S stages instead of ``--stages``), first checked
against the float64 reference at M and at odd shapes (M past a tile, short K), then timed as the issue times them (10
warm-ups + 100 launches after ``--idle`` s of rest, shuffled, median of ``--rounds`` runs) beside
cuBLAS gemmEx with the residual in place (beta=1). Exits 1 if any build is wrong.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from types import SimpleNamespace

import cupy as cp

import kernels.sm90.codegen as sm90_codegen
import kernels.sm90.defaults as sm90_defaults
import kernels.sm90.smem as sm90_smem
import kernels.sm90.tiles as sm90_tiles
from bench.sm90.gemm import (
    Runner,
    compare,
    cublas_gemm,
    limits_of_device,
    make_inputs,
    reference,
    time_fn,
    torch_matmul_add_fn,
)


def fit_rows(m: int, n: int, r: int | str, sms: int) -> int:
    """``r`` itself, or for "fitR" (R rounds; "fit" = 2) the fewest rows of a swapped tile (a multiple
    of 8 from 136 to 200) that cut M into at most R x sms // ceil(N / 128) row blocks, so that the
    tiles fill R rounds."""
    if isinstance(r, int):
        return r
    blocks = max(1, int(r[3:] or 2) * sms // -(-n // 128))
    return min(sm90_tiles.SWAP_ROWS[-1], max(sm90_tiles.SWAP_ROWS[0], (-(-m // blocks) + 7) // 8 * 8))


def tile_of(m: int, n: int, r: int | str, sms: int) -> str:
    """The swapped tile a ``--rows`` item names at M, N: R x 128 for rows (``fit_rows``), else the
    tile R x C it spells."""
    if isinstance(r, str) and not r.startswith("fit"):
        return r
    return f"{fit_rows(m, n, r, sms)}x128"


def _rows_item(r: str) -> int | str:
    """A ``--rows`` item's tile part: fit / fitR, a whole tile R x C, or R (of R x 128)."""
    if r.startswith("fit"):
        int(r[3:] or 2)
        return r
    return r if "x" in r else int(r)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m-list", default="2400,2500,2560")
    ap.add_argument("--n", type=int, default=2560, help="the timed shapes' N")
    ap.add_argument("--k", type=int, default=2560, help="the timed shapes' K")
    ap.add_argument("--rows", default="fit", help="comma-separated; \"\" for none")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--orders", default="default",
                    help="tile orders of the timed swapped builds: default (the build's), m (the problem's M "
                         "blocks fastest), n (its N blocks fastest)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=float, default=0.3)
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--pre-swap", action="store_true",
                    help="also time the default without the swapped tiles and torch matmul + add")
    ap.add_argument("--pre-wide", action="store_true",
                    help="also time the default without the swapped R x 256 tiles (``_wide_swap_tile``)")
    args = ap.parse_args()
    try:
        ms = [int(x) for x in args.m_list.split(",")]
        rows = []
        for x in filter(None, args.rows.split(",")):
            x, _, st = x.partition("@")
            r, _, cl = x.partition(":")
            cm, cn = (int(c) for c in cl.split("x")) if cl else (1, 1)
            rows.append((_rows_item(r), (cm, cn), int(st or args.stages)))
        if (not ms or min(ms) < 1 or args.n < 1 or args.k < 1
                or any(not (isinstance(r, str) and r.startswith("fit")) and tile_of(1, 1, r, 1) not in sm90_tiles.SWAP_TILES
                       or cl[0] not in (1, 2) or cl[1] != 1 or st < 0 for r, cl, st in rows)):
            raise ValueError
    except ValueError:
        ap.error(f"--m-list {args.m_list!r} / --n {args.n} / --k {args.k} / --rows {args.rows!r}: positive M, N, K; "
                 "rows a multiple of 8 from 136 to 200, a swapped tile R x C, or fit / fitR, each optionally :2x1 and @S")
    orders = {"default": {}, "m": {"raster_m": False, "raster_group": 0}, "n": {"raster_m": True}}
    if not args.orders or not set(args.orders.split(",")) <= set(orders):
        ap.error(f"--orders {args.orders!r}: default, m, n")
    if not set(args.dtypes.split(",")) <= {"bf16", "fp16"}:
        ap.error(f"--dtypes {args.dtypes!r}: the swapped tiles take bf16, fp16")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: rounds >= 1")
    limits = limits_of_device()
    bad = 0
    for dt in args.dtypes.split(","):
        for shape in ((333, 2560, 520), (1000, 1032, 200), (2500, 2600, 2560)):
            bufs = make_inputs(*shape, dt, seed=5)
            ref = reference(bufs, dt)
            for r, cl, st in rows:
                tile = tile_of(shape[0], shape[1], r, limits.sm_count)
                if st not in sm90_smem.pipelining_options(limits, dt, tile, dict(zip("mnk", shape, strict=True))):
                    continue  # (the deeper counts with the epilogue tile in the ring: ring_stage_options)
                for fuse in (True, False):
                    b = sm90_codegen.build(SimpleNamespace(shape=dict(zip("mnk", shape, strict=True)), dtype=dt), limits,
                                   tile, st, cluster=cl, fuse=fuse)
                    bufs["out"].fill(0xFFFF)
                    Runner(b, bufs, dt)()
                    c = compare(bufs["out"], ref, dt)
                    print(f"check {dt} {shape} swapped {tile} s{st} cluster {cl} fuse {fuse}: "
                          f"{'ok' if c['ok'] else 'WRONG'} {c}", flush=True)
                    bad += not c["ok"]
        for m in ms:
            n = args.n
            shape = {"m": m, "n": n, "k": args.k}
            bufs = make_inputs(m, n, args.k, dt, seed=3)
            ref = reference(bufs, dt)
            bs, st = sm90_defaults.default_knobs(limits, dt, shape)
            runs = {f"default {bs} s{st}": Runner(sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), limits, bs, st),
                                                  bufs, dt)}
            if args.pre_swap:
                pb, pst = sm90_defaults._base_knobs(limits, dt, shape)
                pb, pst = sm90_defaults._fit_tile(limits, dt, shape, pb, pst) or (pb, pst)
                runs.setdefault(f"pre-swap {pb} s{pst}", Runner(
                    sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), limits, pb, pst), bufs, dt))
            if args.pre_wide:
                pb, pst = sm90_defaults._base_knobs(limits, dt, shape)
                pb, pst = sm90_defaults._fit_tile(limits, dt, shape, pb, pst) or (pb, pst)
                pb, pst = sm90_defaults._swap_tile(limits, dt, shape, pb, pst) or (pb, pst)
                runs.setdefault(f"pre-wide {pb} s{pst}", Runner(
                    sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), limits, pb, pst), bufs, dt))
            for r, cl, st in rows:
                tile = tile_of(m, n, r, limits.sm_count)
                if st not in sm90_smem.pipelining_options(limits, dt, tile, shape):
                    continue
                for o in args.orders.split(","):
                    b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), limits, tile, st, cluster=cl,
                                   **orders[o])
                    runs[f"swapped {tile} s{st}{f' cl{cl[0]}x{cl[1]}' if cl != (1, 1) else ''}"
                         f"{'' if o == 'default' else ' ' + b.info['tile_order']}"] = Runner(b, bufs, dt)
            for nm, run in runs.items():
                bufs["out"].fill(0xFFFF)
                run()
                c = compare(bufs["out"], ref, dt)
                if not c["ok"]:
                    print(f"WRONG {dt} M={m} {nm}: {c}", flush=True)
                    bad += 1
            runs["cuBLAS beta=1"] = cublas_gemm(bufs, bufs["r"].copy(), dt, 1.0)
            if args.pre_swap and (tfn := torch_matmul_add_fn(m, n, args.k, dt)) is not None:
                runs["torch mm+add"] = tfn
            per: dict[str, list[float]] = {nm: [] for nm in runs}
            names = list(runs)
            for _ in range(args.rounds):
                random.shuffle(names)
                for nm in names:
                    time.sleep(args.idle)
                    per[nm].append(time_fn(runs[nm], warmup=10, iters=100)["median_ms"])
            print(f"{dt} M={m} N={n}: " + "; ".join(f"{nm} {statistics.median(v):.4f}" for nm, v in per.items()),
                  flush=True)
            cp.get_default_memory_pool().free_all_blocks()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
