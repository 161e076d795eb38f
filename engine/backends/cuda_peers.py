"""The peers of a run (cuBLAS, CuPy's own ops): each prepared, rested, warmed up and timed on the
same rotating input sets as ours, then verified."""

from __future__ import annotations

from typing import Any

import cupy as cp

from engine.backends.base import fair_rest_s
from engine.backends.cuda_blas import Blas
from engine.backends.cuda_convert import BITS, native_view
from engine.backends.cuda_stages import verify_outputs
from engine.backends.cuda_support import POISON_BITS
from engine.backends.cuda_timer import QueuedTimer, rest
from engine.result import PeerResult
from engine.timing import timing_stats


def time_peers(task: Any, spec: Any, sets: list[dict[str, Any]], out_sets: list[dict[str, Any]], dtype: str,
               em: Any, timer: QueuedTimer) -> list[PeerResult]:
    """Each peer: ``prepare`` on every set, rest, warm-ups, timed launches rotating over the same
    input sets and their outputs as ours (``rotating_outs``: inputs smaller than the L2, or an
    output a peer updates in place, would otherwise stay cached for the peers only), then verified
    on set 0."""
    blas = Blas(dtype)
    inputs, outs = sets[0], out_sets[0]
    natives = [{k: native_view(v, dtype) for k, v in st.items()} for st in sets]
    native = natives[0]
    nout_sets = [{k: native_view(v, dtype) for k, v in o.items()} for o in out_sets]
    nouts = nout_sets[0]
    results = []
    iters = task.iterations  # the same launch count as ours: a fair comparison or none
    for p in spec.peers(task):
        if dtype not in p.dtypes:
            continue
        pr = PeerResult(name=p.name, label=p.label, baseline=p.baseline)
        try:
            if any(v is None for v in (*native.values(), *nouts.values())):
                # cuBLAS works on raw pointers; only CuPy's own ops need its bfloat16 dtype
                if "cupy" in p.name:
                    raise RuntimeError("CuPy has no bfloat16 dtype here (install ml_dtypes)")
                rot, o_rot = sets, out_sets
            else:
                rot, o_rot = natives, nout_sets
            ins, o = rot[0], o_rot[0]
            if p.prepare is not None:
                for st, so in zip(rot, o_rot, strict=True):
                    p.prepare(cp, blas, st, so)
            rest(fair_rest_s(task), em, p.name)

            def launch(i: int, p: Any = p, rot: Any = rot, o_rot: Any = o_rot) -> None:
                p.run(cp, blas, rot[i % len(rot)], o_rot[i % len(o_rot)])

            probed = timer.warm(launch, max(3, task.warmup), 3)  # ours: task.warmup, at least 3 probes
            # queued back to back between events, as ours are (a sync after every launch would
            # let the GPU idle between them: another regime than ours)
            pr.timing = timing_stats(timer.run(p.name, launch, iters, probed, iters))
            if p.verify and task.verify:
                for name in spec.outputs:
                    outs[name].view(BITS[dtype]).fill(POISON_BITS[dtype])
                if p.prepare is not None:
                    p.prepare(cp, blas, ins, o)
                p.run(cp, blas, ins, o)
                cp.cuda.Device().synchronize()
                pr.correct = verify_outputs(spec, inputs, outs, dtype).correct
        except Exception as exc:  # a failing peer is reported, never fatal to our run
            pr.error = f"{type(exc).__name__}: {exc}"
            em.info(f"peer {p.name} failed: {pr.error}", "warning")
        results.append(pr)
    return results


def heater(spec: Any, task: Any, dtype: str, sets: list[dict[str, Any]], out_sets: list[dict[str, Any]]) -> Any:
    """cuBLAS with beta = 1 (the peer every comparison names) as a launch function, for heating the
    board before a sustained tune (None where the kernel has no such peer)."""
    peer = next((p for p in spec.peers(task) if "beta1" in p.name and dtype in p.dtypes), None)
    if peer is None:
        return None
    blas = Blas(dtype)
    if peer.prepare is not None:
        for st, o in zip(sets, out_sets, strict=True):
            peer.prepare(cp, blas, st, o)
    n = len(sets)
    return lambda i: peer.run(cp, blas, sets[i % n], out_sets[i % n])


def regime_peers(spec: Any, task: Any, dtype: str, sets: list[dict[str, Any]], out_sets: list[dict[str, Any]],
                 refs: Any, time_fn: Any, clock: Any, skip: set[str]) -> list[dict[str, Any]]:
    """A tune's peers: each timed as the candidates are (``time_fn(name, launch)``, in the tune's
    regime), then verified on input set 0 where it computes the whole function against ``refs``; a
    peer that fails is reported with its error, never fatal. Rows: name, label, baseline, the
    median, p10 and p90, the clock after the timing, whether it is correct."""
    from engine.backends.cuda_stages import compare_outputs

    blas = Blas(dtype)
    outs = out_sets[0]
    natives = [{k: native_view(v, dtype) for k, v in s.items()} for s in sets]
    nout_sets = [{k: native_view(v, dtype) for k, v in o.items()} for o in out_sets]
    nouts = nout_sets[0]
    out = []
    for p in spec.peers(task):
        if dtype not in p.dtypes or p.name in skip:
            continue
        row: dict[str, Any] = {"name": p.name, "label": p.label, "baseline": p.baseline, "median_ms": None}
        try:
            use_native = not any(v is None for v in (*natives[0].values(), *nouts.values()))
            if not use_native and "cupy" in p.name:
                raise RuntimeError("CuPy has no bfloat16 dtype here (install ml_dtypes)")
            rot, o_rot = (natives, nout_sets) if use_native else (sets, out_sets)
            o = o_rot[0]
            if p.prepare is not None:
                for st, so in zip(rot, o_rot, strict=True):
                    p.prepare(cp, blas, st, so)
            timing = time_fn(p.name, lambda i, p=p, rot=rot, o_rot=o_rot: p.run(
                cp, blas, rot[i % len(rot)], o_rot[i % len(o_rot)]))
            row.update(median_ms=timing.median_ms, p10_ms=timing.p10_ms, p90_ms=timing.p90_ms, clock=clock())
            if p.verify:
                for name in spec.outputs:
                    outs[name].view(BITS[dtype]).fill(POISON_BITS[dtype])
                if p.prepare is not None:
                    p.prepare(cp, blas, rot[0], o)
                p.run(cp, blas, rot[0], o)
                cp.cuda.Device().synchronize()
                row["correct"] = compare_outputs(spec, outs, dtype, refs).correct
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
        out.append(row)
    return out
