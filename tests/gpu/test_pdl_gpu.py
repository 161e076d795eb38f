"""GPU tests (marker `gpu`) of programmatic dependent launch (engine/backends/pdl.py, ADR-0010): a
chain of decode GEMMs in which each launch's A is the previous launch's output (N == K), queued back
to back with PDL, must end bit for bit where the same chain ends launched plainly with the device
synchronised after every link. A launch that touched A before the previous one had finished would
read the poison left in its input and end elsewhere."""

from __future__ import annotations

import math

import pytest

from engine.runner import prepare
from engine.task import TaskSpec
from kernels import get_spec
from kernels.spec import render_task

pytestmark = pytest.mark.gpu

LINKS = 8


@pytest.mark.parametrize("shape, block_size, stages, schedule", [
    ((8, 4096, 4096), None, None, {}),  # the default TMA build (M <= 8 on Hopper)
    ((4, 2048, 2048), "16x16", 4, {"w_bulk": 2, "split_k": 4}),  # split-K: partials and counters
    ((8, 2048, 2048), "8x16", 6, {"w_bulk": 1}),  # bulk copies per row
    ((16, 4096, 4096), "16x64", 8, {}),  # the Hopper GEMM's decode tile (the default at M = 16)
])
def test_a_dependent_chain_ends_where_the_synchronised_chain_ends(shape, block_size, stages, schedule):
    import cupy as cp

    from engine.backends.cuda_convert import to_storage
    from engine.backends.cuda_stages import (
        bind_launches,
        compile_cubin,
        compile_inputs,
        device_limits,
        load_build,
    )

    m, n, k = shape
    task = prepare(TaskSpec(backend="cuda", shape={"m": m, "n": n, "k": k}, dtype="bf16", block_size=block_size,
                            memory_pipelining=stages, schedule=schedule), "h200").task
    limits, _ = device_limits(0, "h200")
    build = render_task(get_spec(task.kernel), task, limits)
    assert [ln.pdl for ln in build.launches] == [True]
    cubin, _, _ = compile_cubin(*compile_inputs(build, limits))
    funcs, grids, _ = load_build(build, cubin, limits)

    rng = cp.random.default_rng(7)
    w = to_storage(rng.standard_normal((n, k), dtype=cp.float32) / math.sqrt(k), "bf16")
    r = to_storage(rng.standard_normal((m, n), dtype=cp.float32), "bf16")
    xs = [to_storage(rng.standard_normal((m, k), dtype=cp.float32), "bf16")]
    xs += [cp.empty((m, n), dtype=cp.uint16) for _ in range(LINKS)]
    scratch = {b.name: cp.zeros(b.shape, dtype=cp.float32) for b in build.scratch}
    links = [{"a": xs[i], "w": w, "r": r, "out": xs[i + 1], **scratch} for i in range(LINKS)]

    def chain(dependent: bool) -> bytes:
        for x in xs[1:]:
            x.fill(0x7FC1)  # a NaN: a link that reads it before it is written ends in NaNs
        cp.cuda.Device().synchronize()
        run = bind_launches(build, funcs, grids, links, {}, "bf16", dependent)
        for i in range(LINKS):
            run(i)
            if not dependent:
                cp.cuda.Device().synchronize()
        cp.cuda.Device().synchronize()
        return bytes(xs[-1].get().tobytes())

    plain = chain(False)
    for _ in range(3):
        assert chain(True) == plain
