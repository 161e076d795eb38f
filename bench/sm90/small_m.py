"""``--small-m``: every build that could serve small M against cuBLAS and torch, timed as the engine
times them (rotated input sets, queued launches, rested, shuffled rounds)."""

from __future__ import annotations

import re
import time

import cupy as cp

from bench.sm90.gemm import (
    Runner,
    compare,
    cublas_gemm,
    make_inputs,
    score,
)
from bench.sm90.report import write_table
from bench.sm90.variants import Variant, engine_default, for_dtype, variant
from kernels.gemm_residual_experiments import hopper_knobs, hopper_schedules
from kernels.spec import Tile

SMALL_M = {  # name: variant (see ``Variant``); the narrow and 128x160 rows without "M-fastest" in
    # their name are numbered N-fastest (raster_m=False), as they were measured in v17-v21
    "coop 128x128 s4 (planned)": ("128x128", 4, "{dt}", True, True, False, 1),
    "coop 128x128 s4 data-parallel": ("128x128", 4, "{dt}", True, False, False, 1),
    "coop 128x128 s4 cl2": ("128x128", 4, "{dt}", True, False, False, 2),
    "coop 128x256 s3 (planned)": ("128x256", 3, "{dt}", True, True, False, 1),
    "coop 128x256 s3 cl2": ("128x256", 3, "{dt}", True, False, False, 2),
    "coop 128x160 s5 (planned)": Variant("128x160", 5, "{dt}", True, True, False, 1, raster_m=False,
                                         raster_group=0),
    # the narrow tiles (N = 80): 128 CTAs with the whole K loop each at M = 256 (64x80) and
    # M = 512 (128x80), as cuBLAS runs there (its 80x64 / 80x128 tiles, 11 / 8 stages, 2-CTA clusters)
    "64x80 s8 data-parallel": Variant("64x80", 8, "{dt}", True, False, False, 1, raster_m=False),
    "64x80 s11 data-parallel": Variant("64x80", 11, "{dt}", True, False, False, 1, raster_m=False),
    "64x80 s8 cl2": ("64x80", 8, "{dt}", True, False, False, 2),
    "64x80 s11 cl2": ("64x80", 11, "{dt}", True, False, False, 2),
    "64x80 s11 (planned)": Variant("64x80", 11, "{dt}", True, True, False, 1, raster_m=False),
    "coop 128x80 s7 data-parallel": Variant("128x80", 7, "{dt}", True, False, False, 1, raster_m=False),
    "coop 128x80 s7 cl2": ("128x80", 7, "{dt}", True, False, False, 2),
    # tile order (ADR-0007): M-fastest tiles put the CTAs that share a W tile side by side,
    # as cuBLAS's grid does
    "64x80 s8 dp, M-fastest": Variant("64x80", 8, "{dt}", True, False, False, 1, raster_m=True),
    "64x80 s8 cl2 M-fastest": Variant("64x80", 8, "{dt}", True, False, False, 2, raster_m=True),
    "coop 128x80 s7 dp, M-fastest": Variant("128x80", 7, "{dt}", True, False, False, 1, raster_m=True),
    # the wide one-wave defaults (N = K = 2560: M = 1024 128x160, M = 1571 128x256) in the same order
    "coop 128x160 s5 dp, M-fastest": Variant("128x160", 5, "{dt}", True, False, False, 1, raster_m=True),
    "coop 128x256 s3 dp, M-fastest": Variant("128x256", 3, "{dt}", True, False, False, 1, raster_m=True),
    # the epilogue tile staged in the ring's freed slots (one tile per CTA): its shared memory goes
    # to the ring, one stage more than the defaults' (ADR-0007; rows skipped where a CTA
    # would get two tiles)
    "coop 128x256 s3 dp, R in ring": Variant("128x256", 3, "{dt}", True, False, False, 1, epi_ring=True),
    "coop 128x256 s4 dp, R in ring": Variant("128x256", 4, "{dt}", True, False, False, 1, epi_ring=True),
    "coop 128x160 s6 dp, M-fastest, R in ring": Variant("128x160", 6, "{dt}", True, False, False, 1,
                                                        raster_m=True, epi_ring=True),
    "coop 128x80 s8 dp, M-fastest, R in ring": Variant("128x80", 8, "{dt}", True, False, False, 1,
                                                       raster_m=True, epi_ring=True),
    "64x80 s12 dp, M-fastest, R in ring": Variant("64x80", 12, "{dt}", True, False, False, 1,
                                                  raster_m=True, epi_ring=True),
    # (1x2 and 2x2 clusters, A multicast, build(cluster=(1, 2)): slower everywhere (ADR-0007),
    # 128x256 in 1x2 at M = 1571 too (one wave of 130 CTAs): 4-5 % slower;
    # two consumers splitting 64x80's k-blocks: level, removed again)
}


def small_m_mode(args, limits, report, failures, verify, get, out_dir, build) -> int:
    """``--small-m``: where ours loses to torch matmul + add (M = 256, 512 at N = K = 2560), every
    existing build that could serve small M, timed the way the engine times ours and the peers:
    input sets rotated as the engine rotates them (W comes from DRAM, not the L2), launches queued
    back to back between events (behind the hold kernel where the host cannot keep ahead), 10
    warm-ups and ``--iters`` timed, the median, after ``--idle`` s of rest, candidates shuffled,
    ``--rounds`` rounds. Candidates: the default knobs, cooperative 128x128 s4 under the planned,
    the data-parallel and every forced stream-K schedule, 2x1 clusters (W multicast) on 128x128 and
    128x256, 128x256 and 128x160 planned; cuBLAS beta=1 (in place), its GEMM alone, torch
    matmul + add. Each of ours is verified before and again after its timed runs."""
    import random

    from engine import input_sets, queued_timer, time_queued

    n = k = 2560
    dt = args.sweep_dtype
    sms = limits.sm_count
    rng = random.Random(3)
    timer = queued_timer()
    l2 = int(cp.cuda.runtime.getDeviceProperties(0).get("l2CacheSize", 50 * 2**20))
    ms = args.m_list if args.m_list_given else [256, 512, 1024]

    def applies(v: tuple, m: int, n: int) -> bool:
        """False for a row staging R in the ring where a CTA would get two tiles (data-parallel on
        at most one wave: ``build`` refuses it)."""
        x = variant(v)
        tile = Tile.parse(x.tile)
        bm, bn = tile.m, int(tile.n or 0)
        return not x.epi_ring or -(-m // bm) * -(-n // bn) <= sms

    def wanted(name: str) -> bool:  # --only: the table rows whose name matches (the default always)
        return args.only is None or re.search(args.only, name) is not None

    def order_rows(bs: str, st: int) -> dict[str, Variant]:
        """--orders G,...: the default knobs numbered N-fastest, M-fastest and in groups of G M blocks
        (the schedule, consumers and cluster stay the engine's choice)."""
        if not args.orders:
            return {}
        rows = {"N-fastest": Variant(bs, st, dt, True, None, raster_m=False, raster_group=0),
                "M-fastest": Variant(bs, st, dt, True, None, raster_m=True, raster_group=0)}
        for g in args.orders:
            rows[f"groups of {g}"] = Variant(bs, st, dt, True, None, raster_group=g)
        return rows
    lines = [f"{dt} small M, N = K = {n}: {args.rounds} rounds, {args.idle:g} s idle before each "
             f"run of 10 warm-ups + {args.iters} timed, input sets rotated, launches queued "
             "(median of the runs' medians, ms; score against torch in the same rounds)"]

    def one_m(m: int) -> None:
        shape = {"m": m, "n": n, "k": k}
        bufs0, ref0 = get(m, n, k, dt)
        in_bytes = sum(bufs0[x].nbytes for x in ("a", "w", "r"))
        n_sets = input_sets(in_bytes, l2)
        sets = [bufs0] + [make_inputs(m, n, k, dt, seed=1000 + i) for i in range(1, n_sets)]
        out = bufs0["out"]  # set 0's output, which the checks read; each set writes its own, as the engine's
        cands: dict[str, tuple] = {}
        bs, st = hopper_knobs(limits, dt, shape)
        cands[f"default {bs} s{st}"] = (engine_default(bs, st, dt), None)  # as the engine builds it
        for name, v in SMALL_M.items():
            if wanted(name):
                cands[name] = (for_dtype(v, dt), None)
        for sch in hopper_schedules(m, n, k, 128, 128, sms)[1:]:
            if wanted(f"coop 128x128 s4 sk {sch[0]}/{sch[1]}"):
                cands[f"coop 128x128 s4 sk {sch[0]}/{sch[1]}"] = (("128x128", 4, dt, True, True, False, 1), sch)
        for name, v in order_rows(bs, st).items():  # --orders: the default build in each tile order
            cands[f"default, {name}"] = (v, None)
        launches: dict = {}
        ours: dict = {}
        for name, (v, sch) in list(cands.items()):
            if not applies(v, m, n):
                print(f"M={m} {name}: skipped (R in ring needs one tile a CTA)", flush=True)
                del cands[name]
                continue
            b = build(m, n, k, v, sch)
            runners = [Runner(b, s, dt) for s in sets]
            ours[name] = (runners[0], b.info)
            launches[name] = lambda i, rs=runners: rs[i % len(rs)]()
        cub1 = [cublas_gemm(s, s["r"].copy(), dt, 1.0) for s in sets]  # one C = R per set
        launches["cuBLAS beta=1 (in place)"] = lambda i: cub1[i % len(cub1)]()
        cub0 = [cublas_gemm(s, s["out"], dt, 0.0) for s in sets]
        launches["cuBLAS GEMM alone"] = lambda i: cub0[i % len(cub0)]()
        if not args.no_torch:
            try:
                import torch

                if torch.cuda.current_stream().cuda_stream != 0:
                    raise RuntimeError("torch's current stream is not the legacy default stream")
                tdt = torch.bfloat16 if dt == "bf16" else torch.float16
                # int16 crosses DLPack everywhere (uint16 not in older torch); same bits, viewed as bf16/fp16
                tsets = [tuple(torch.from_dlpack(s[x].view(cp.int16)).view(tdt) for x in ("a", "w", "r"))
                         for s in sets]
                launches["torch matmul + add"] = (
                    lambda i: torch.matmul(tsets[i % len(tsets)][0], tsets[i % len(tsets)][1].t())
                    + tsets[i % len(tsets)][2])
            except Exception as exc:  # noqa: BLE001
                print(f"no torch peer: {type(exc).__name__}: {exc}", flush=True)

        def check(name: str, when: str) -> None:
            runner, info = ours[name]
            out.fill(0xFFFF)  # NaN-poisoned
            runner()
            cp.cuda.runtime.deviceSynchronize()
            c = compare(out, ref0, dt)
            c.update(name=name, shape=(m, n, k), label=f"small-m {when}", info_schedule=info["schedule"])
            report["checks"].append(c)
            if not c["ok"]:
                failures.append(f"small-m {name} M={m} {when}: {c}")
                print("WRONG", failures[-1], flush=True)

        for name in ours:
            check(name, "before timing")
        cp.cuda.runtime.deviceSynchronize()
        per: dict[str, list[float]] = {nm: [] for nm in launches}
        held: dict[str, int] = {nm: 0 for nm in launches}
        for _r in range(args.rounds):
            for nm in rng.sample(list(launches), len(launches)):
                cp.cuda.runtime.deviceSynchronize()
                time.sleep(args.idle)
                before = timer.stats["held_chunks"]
                ts = sorted(time_queued(timer, nm, launches[nm], args.iters))
                held[nm] += timer.stats["held_chunks"] - before
                per[nm].append(ts[len(ts) // 2])
                if nm in ours:
                    check(nm, "after timing")
        med = {nm: sorted(ts)[len(ts) // 2] for nm, ts in per.items()}
        t_b = med.get("torch matmul + add")
        lines.append(f"M={m} ({n_sets} input sets of {in_bytes / 2**20:.1f} MiB, L2 {l2 / 2**20:.0f} MiB):")
        for nm in sorted(med, key=med.get):
            sc = score(med[nm], t_b, m, n, k) if nm in ours else None
            info = ours[nm][1] if nm in ours else None
            lines.append(f"   {nm:34s} {med[nm]:.4f}" + (f"  score {sc:.3f}" if sc is not None else "")
                         + (f"  grid {ours[nm][0].grid} {info['schedule']} {info['tile_order']}" if info else "")
                         + ("  held" if held[nm] else "")
                         + "  runs " + " ".join(f"{t:.4f}" for t in per[nm]))
        report["sweep"].append({"m": m, "n_sets": n_sets, "runs": per, "held_chunks": held})
        print("\n".join(lines[-len(med) - 1:]), flush=True)

    # every candidate build (the clustered narrow tiles too, which the GPU tests' knob sweep does
    # not reach) at shapes no tile divides: M = 1 and odd M, N not a multiple of 80 or 128, odd K
    # (300 x 2560 x 704: 11 k-blocks, so the R-in-ring rows wrap round the ring to find adjacent
    # slots; 200 x 1032 x 64: one k-block, slots never used)
    odd = [(1, 2560, 2560), (333, 1032, 520), (777, 1024, 512), (515, 2560, 2560), (300, 2560, 704),
           (200, 1032, 64)]
    if args.orders:  # multi-wave shapes, clustered (7976: a cluster pair half past M) and not
        odd += [(7976, 2560, 2560), (2047, 2560, 1000), (4100, 1032, 520)]
    wrong0 = len(failures)
    n_checks = 0
    for (m, n_, k_) in odd:
        rows = [for_dtype(v, dt) for name, v in SMALL_M.items() if wanted(name)]
        rows += order_rows(*hopper_knobs(limits, dt, {"m": m, "n": n_, "k": k_})).values()
        for v in rows:
            if applies(v, m, n_):
                verify(m, n_, k_, v, label="small-m odd shape")
                n_checks += 1
    lines.append(f"odd shapes {odd}: {n_checks} checks, {len(failures) - wrong0} wrong")
    print(lines[-1], flush=True)
    for m in ms:
        one_m(m)
    lines.append(f"queue hold: {timer.stats['held_chunks']} chunks held, "
                 f"{timer.stats['expired_chunks']} ran out")
    lines += failures[:20]
    write_table(lines, report, out_dir, "sm90_small_m")
    return 0 if not failures else 1
