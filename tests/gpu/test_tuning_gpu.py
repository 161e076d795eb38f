"""GPU tests (marker `gpu`) of what the tuning work added: the decode path over odd shapes and every
schedule choice (W through registers or bulk copies), K padding on the TMA path, explicit Hopper schedule choices, and a real tune."""

from __future__ import annotations

import pytest

from engine.backends.base import Emitter, RunContext
from engine.result import RunStatus
from engine.runner import prepare
from engine.task import TaskSpec
from kernels import get_spec

pytestmark = pytest.mark.gpu


def _run(**kw):
    """One run in this process through the CUDA backend; (result, launch info)."""
    from engine.backends.stages import run_on

    task = TaskSpec(backend="cuda", warmup=1, iterations=3, peers=False, **kw)
    prep = prepare(task, None)  # the profile detected from the GPU (h200, h100-sxm, ...)
    ctx = RunContext(task=prep.task, profile=prep.profile, spec=get_spec(prep.task.kernel),
                     emit=Emitter(send=lambda e: None))
    res = run_on("cuda", ctx)
    return res, res.launch.info or {}


def _bad(res) -> str | None:
    if res.status is RunStatus.ok and res.correctness.correct and res.correctness.unwritten_count == 0:
        return None
    c = res.correctness
    return f"{res.status.value} {res.error} {c and (c.max_rel_err, c.nan_count, c.unwritten_count)}"


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_decode_path_odd_shapes_and_schedules(dtype):
    cases = [
        ((1, 4096, 4096), None, None, {}),
        ((3, 1000, 4096), None, None, {}),
        ((8, 2560, 777), None, None, {}),  # 2-byte loads
        ((16, 4096, 778), "16x32", 4, {"split_k": 4}),  # 4-byte loads, split-K reduction
        ((33, 5120, 5120), "32x32", 4, {}),
        ((64, 4096, 4096), "64x32", 2, {"warps": 8, "split_k": 2}),
        ((7, 12288, 4096), "8x16", 6, {"split_k": 1}),
        ((32, 4096, 4104), "32x128", 4, {"a_smem": 1, "split_k": 4}),  # A staged in shared memory
        # W by bulk copies: K % 16 == 8 (a straddling step), rows and tokens past the tile, split-K
        ((33, 4100, 4104), "64x16", 2, {"w_bulk": 1, "bulk_k": 256, "split_k": 2}),
        ((5, 1000, 2056), "8x128", 4, {"w_bulk": 1, "bulk_k": 64, "warps": 8}),
        ((16, 8192, 8200), "16x32", 2, {"bulk_k": 512}),
        # W by TMA boxes (the default here): zeros past the matrix, split-K, 8 warps, wide tiles
        ((33, 4100, 4104), "32x128", 2, {"w_bulk": 2, "split_k": 4, "warps": 8}),
        ((5, 1000, 2056), "8x16", 8, {"w_bulk": 2, "bulk_k": 256}),
        ((8, 8192, 8192), None, None, {}),  # the default on Hopper up to M = 8
        ((64, 2560, 2568), "64x32", 4, {"w_bulk": 2, "bulk_k": 64, "split_k": 3}),
        # TMA boxes of A with fewer tokens than BM: the slot's rows past M stay stale
        ((3, 1000, 2056), "16x16", 4, {"w_bulk": 2}),
        ((12, 4096, 4096), "16x32", 4, {"w_bulk": 2, "split_k": 2}),
        ((9, 2560, 2568), "64x16", 2, {"w_bulk": 2, "warps": 8}),
    ]
    bad = []
    for (m, n, k), bs, st, sched in cases:
        for fusion in (True, False):
            res, info = _run(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=bs, memory_pipelining=st,
                             schedule=sched, fusion=fusion)
            why = _bad(res)
            if why or not str(info.get("path", "")).startswith("mma.sync"):
                bad.append(((m, n, k), bs, st, sched, fusion, info.get("path"), why))
    assert not bad, bad


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_hopper_decode_tiles(dtype):
    """The Hopper GEMM's swapped decode tiles (R tokens x 64 rows of W, wgmma m64nR): rows and tokens
    past the tile, K padded, one k-block, pipelining off, the deepest ring, fusion on and off."""
    cases = [
        ((16, 8192, 8192), "16x64", None),
        ((5, 1000, 520), "8x64", 4),
        ((13, 2560, 777), "16x64", 22),
        ((40, 704, 64), "40x64", 2),
        ((56, 4096, 4104), "56x64", None),
        ((1, 8192, 1024), "8x64", 0),
        ((24, 12288, 2048), "24x64", 9),
    ]
    bad = []
    for (m, n, k), bs, st in cases:
        for fusion in (True, False):
            res, info = _run(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=bs, memory_pipelining=st,
                             fusion=fusion)
            why = _bad(res)
            if why or "swapped" not in str(info.get("tile", "")) or "evict-first" not in str(info.get("l2_policy")):
                bad.append(((m, n, k), bs, st, fusion, info.get("tile"), why))
    assert not bad, bad


@pytest.mark.parametrize("shape, block", [((8192, 2560, 777), None), ((2083, 2560, 777), "168x128"),
                                          ((300, 1024, 4099), "128x128")])
def test_tma_path_with_padded_k(shape, block):
    m, n, k = shape
    for fusion in (True, False):
        res, info = _run(shape={"m": m, "n": n, "k": k}, block_size=block, fusion=fusion)
        assert _bad(res) is None, (shape, block, fusion, _bad(res))
        assert "padded to" in info.get("k_padding", "")


@pytest.mark.parametrize("shape, sched", [
    ((8192, 2560, 2560), {"consumers": "cooperative"}),
    ((8192, 2560, 2560), {"cluster": 1, "raster": "m"}),
    ((586, 2560, 2560), {"split": "streamk"}),
    ((4096, 4096, 4096), {"raster": "group"}),
])
def test_explicit_hopper_schedule_choices(shape, sched):
    m, n, k = shape
    res, info = _run(shape={"m": m, "n": n, "k": k}, block_size="128x128", memory_pipelining=4, schedule=sched)
    assert _bad(res) is None, (shape, sched, _bad(res), info)


def test_a_real_tune_finds_a_correct_best_and_caches_it(tmp_path):
    from engine.store import ResultStore
    from engine.tuner import tune

    store = ResultStore(tmp_path / "s.db")
    task = TaskSpec(backend="cuda", shape={"m": 8, "n": 4096, "k": 4096})
    res = tune(task, None, budget_s=15, store=store)
    assert res.best is not None and res.best.correct and not res.simulated, res.notes
    assert res.saved and store.list_tuned()[0]["gpu"].startswith("NVIDIA")
    assert res.peer_ms("cublas_gemm_beta1")
    assert not [t for t in res.trials if t.status in ("incorrect", "crashed", "timeout")]
    prep = prepare(TaskSpec(backend="cuda", shape={"m": 8, "n": 4096, "k": 4096}), None, store=store)
    assert prep.plan.source_label.startswith("tuned on this GPU")
