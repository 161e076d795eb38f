"""Outputs rotate with the input sets (ADR-0004's addendum): each set's launches write that set's own
outputs, the scratch stays shared, and the cuBLAS beta=1 peer keeps one C = R per set, so no
implementation finds R (or its output) in the L2 from the launch before. Host-side only: numpy
arrays stand in for device buffers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("cupy")

from engine.backends import cuda_stages  # noqa: E402
from kernels.gemm_residual import SPEC  # noqa: E402
from kernels.spec import Build, Launch  # noqa: E402


@pytest.fixture
def host_cp(monkeypatch):
    monkeypatch.setattr(cuda_stages, "cp", SimpleNamespace(empty_like=np.empty_like))


def test_each_set_gets_its_own_outputs_and_shares_the_scratch(host_cp):
    outs = {"out": np.zeros((4, 4)), "a_pad": np.zeros(8)}
    rot = cuda_stages.rotating_outs(outs, 3, ("out",))
    assert len(rot) == 3 and rot[0] is outs
    assert len({id(o["out"]) for o in rot}) == 3
    assert all(o["a_pad"] is outs["a_pad"] for o in rot)
    assert cuda_stages.rotating_outs(outs, 1, ("out",)) == [outs]


def test_a_launch_on_set_i_writes_set_i_outputs(host_cp):
    sets = [{"a": np.full(2, i)} for i in range(3)]
    rot = cuda_stages.rotating_outs({"out": np.zeros(2)}, 3, ("out",))
    seen = []
    build = Build(source="", functions=("k",),
                  launches=(Launch("k", (1, 1, 1), (32, 1, 1), 0, ("a", "out", 7)),))
    run_once = cuda_stages.bind_launches(build, {"k": lambda g, b, args, shared_mem: seen.append(args)},
                                         [(1, 1, 1)], sets, rot, "bf16")
    for i in range(4):
        run_once(i)
    assert [(a[0] is sets[i % 3]["a"], a[1] is rot[i % 3]["out"]) for i, a in enumerate(seen)] == [(True, True)] * 4
    one = []
    cuda_stages.bind_launches(build, {"k": lambda g, b, args, shared_mem: one.append(args)},
                              [(1, 1, 1)], sets, rot[0], "bf16")(2)
    assert one[0][1] is rot[0]["out"]  # a single dict: every set writes it, as before


def test_the_beta1_peer_keeps_one_c_per_set_bounded():
    peer = next(p for p in SPEC.peers(SimpleNamespace()) if p.name == "cublas_gemm_beta1")
    calls = []

    class Blas:
        def gemm_nt(self, a, w, c, alpha, beta):
            calls.append(alpha)
            c += alpha * (a @ w.T)

    rng = np.random.default_rng(0)
    sets = [{"a": rng.standard_normal((2, 3)), "w": rng.standard_normal((4, 3)), "r": rng.standard_normal((2, 4))}
            for _ in range(2)]
    rot = [{"out": np.zeros((2, 4))} for _ in sets]
    for s, o in zip(sets, rot, strict=True):
        peer.prepare(np, Blas(), s, o)
    assert all(np.array_equal(o["out"], s["r"]) for s, o in zip(sets, rot, strict=True))
    for i in range(4):  # two visits a set: +1 then -1, back to R
        peer.run(np, Blas(), sets[i % 2], rot[i % 2])
    assert calls == [1.0, 1.0, -1.0, -1.0]
    assert all(np.allclose(o["out"], s["r"]) for s, o in zip(sets, rot, strict=True))
