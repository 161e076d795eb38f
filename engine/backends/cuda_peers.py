"""The peers (cuBLAS, CuPy's own ops) on the same rotating input sets and outputs as ours: a run's
(each rested, warmed up and timed as ours is, then verified) and a tune's (each timed in the tune's
regime, as its candidates are). Both launch a peer the same way (``_peer_launch``) and check its
output the same way (``_peer_output``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cupy as cp

from engine.backends.base import fair_rest_s
from engine.backends.cuda_blas import Blas
from engine.backends.cuda_convert import BITS, native_view
from engine.backends.cuda_stages import compare_outputs, verify_outputs
from engine.backends.cuda_support import POISON_BITS
from engine.backends.cuda_timer import QueuedTimer, rest
from engine.result import PeerResult
from engine.timing import timing_stats

Sets = list[dict[str, Any]]


def _natives(sets: Sets, dtype: str) -> Sets:
    return [{k: native_view(v, dtype) for k, v in st.items()} for st in sets]


def _peer_launch(p: Any, blas: Any, sets: Sets, out_sets: Sets, natives: Sets,
                 nout_sets: Sets) -> tuple[Callable[[int], None], dict[str, Any], dict[str, Any]]:
    """``launch(i)`` of peer ``p`` on input set ``i`` and its outputs, with ``prepare`` done on every
    set; its set-0 inputs and outputs. On CuPy's native dtype views where every buffer has one:
    cuBLAS works on raw pointers; only CuPy's own ops need its bfloat16 dtype."""
    if any(v is None for v in (*natives[0].values(), *nout_sets[0].values())):
        if "cupy" in p.name:
            raise RuntimeError("CuPy has no bfloat16 dtype here (install ml_dtypes)")
        rot, o_rot = sets, out_sets
    else:
        rot, o_rot = natives, nout_sets
    if p.prepare is not None:
        for st, so in zip(rot, o_rot, strict=True):
            p.prepare(cp, blas, st, so)

    def launch(i: int) -> None:
        p.run(cp, blas, rot[i % len(rot)], o_rot[i % len(o_rot)])

    return launch, rot[0], o_rot[0]


def _peer_output(p: Any, blas: Any, spec: Any, dtype: str, ins: dict[str, Any], o: dict[str, Any],
                 outs: dict[str, Any]) -> None:
    """The peer's output on set 0 into ``outs`` (poisoned first), the device synchronised."""
    for name in spec.outputs:
        outs[name].view(BITS[dtype]).fill(POISON_BITS[dtype])
    if p.prepare is not None:
        p.prepare(cp, blas, ins, o)
    p.run(cp, blas, ins, o)
    cp.cuda.Device().synchronize()


def time_peers(task: Any, spec: Any, sets: Sets, out_sets: Sets, dtype: str, em: Any,
               timer: QueuedTimer) -> list[PeerResult]:
    """Each peer: ``prepare`` on every set, rest, warm-ups, timed launches rotating over the same
    input sets and their outputs as ours (``rotating_outs``: inputs smaller than the L2, or an
    output a peer updates in place, would otherwise stay cached for the peers only), then verified
    on set 0."""
    blas = Blas(dtype)
    inputs, outs = sets[0], out_sets[0]
    natives, nout_sets = _natives(sets, dtype), _natives(out_sets, dtype)
    results = []
    iters = task.iterations  # the same launch count as ours: a fair comparison or none
    for p in spec.peers(task):
        if dtype not in p.dtypes:
            continue
        pr = PeerResult(name=p.name, label=p.label, baseline=p.baseline)
        try:
            launch, ins, o = _peer_launch(p, blas, sets, out_sets, natives, nout_sets)
            rest(fair_rest_s(task), em, p.name)
            probed = timer.warm(launch, max(3, task.warmup), 3)  # ours: task.warmup, at least 3 probes
            # queued back to back between events, as ours are (a sync after every launch would
            # let the GPU idle between them: another regime than ours)
            pr.timing = timing_stats(timer.run(p.name, launch, iters, probed, iters))
            if p.verify and task.verify:
                _peer_output(p, blas, spec, dtype, ins, o, outs)
                pr.correct = verify_outputs(spec, inputs, outs, dtype).correct
        except Exception as exc:  # a failing peer is reported, never fatal to our run
            pr.error = f"{type(exc).__name__}: {exc}"
            em.info(f"peer {p.name} failed: {pr.error}", "warning")
        results.append(pr)
    return results


def heater(spec: Any, task: Any, dtype: str, sets: Sets, out_sets: Sets) -> Any:
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


def regime_peers(spec: Any, task: Any, dtype: str, sets: Sets, out_sets: Sets, refs: Any, time_fn: Any,
                 clock: Any, skip: set[str]) -> list[dict[str, Any]]:
    """A tune's peers: each timed as the candidates are (``time_fn(name, launch)``, in the tune's
    regime), then verified on input set 0 where it computes the whole function against ``refs``; a
    peer that fails is reported with its error, never fatal. Rows: name, label, baseline, the
    median, p10 and p90, the clock after the timing, whether it is correct."""
    blas = Blas(dtype)
    outs = out_sets[0]
    natives, nout_sets = _natives(sets, dtype), _natives(out_sets, dtype)
    out = []
    for p in spec.peers(task):
        if dtype not in p.dtypes or p.name in skip:
            continue
        row: dict[str, Any] = {"name": p.name, "label": p.label, "baseline": p.baseline, "median_ms": None}
        try:
            launch, ins, o = _peer_launch(p, blas, sets, out_sets, natives, nout_sets)
            timing = time_fn(p.name, launch)
            row.update(median_ms=timing.median_ms, p10_ms=timing.p10_ms, p90_ms=timing.p90_ms, clock=clock())
            if p.verify:
                _peer_output(p, blas, spec, dtype, ins, o, outs)
                row["correct"] = compare_outputs(spec, outs, dtype, refs).correct
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
        out.append(row)
    return out
