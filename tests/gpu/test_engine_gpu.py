"""GPU tests (marker `gpu`): run on the lent H200, skipped where no GPU answers.

Correctness over random shapes including odd M, every dtype and knob combination through the CUDA
backend; a deliberately faulting kernel isolated by the engine process; the peers."""

from __future__ import annotations

import random

import pytest

from engine.backends.base import Emitter, RunContext
from engine.result import RunStatus
from engine.runner import prepare, run_prepared
from engine.task import TaskSpec
from kernels import get_spec
from kernels.spec import DeviceLimits, render_task, violations_of

pytestmark = pytest.mark.gpu


def with_default_knobs(task: TaskSpec, limits: DeviceLimits) -> TaskSpec:
    """The task with BLOCK_SIZE and MEMORY_PIPELINING left unset taken from the kernel's own rules
    (``default_knobs``) for these limits; a task that sets either is returned as it is."""
    if task.block_size is not None or task.memory_pipelining is not None:
        return task
    spec = get_spec(task.kernel)
    bs, st = spec.default_knobs(limits, task.dtype.value, spec.normalize_shape(task.shape))
    return task.model_copy(update={"block_size": bs, "memory_pipelining": st})


def _backend_run(task: TaskSpec):
    """Run in this (test) process through the CUDA backend: fast for many combinations. Knobs left
    unset are the kernel's own rules' (``default_knobs``), which these tests are about, not the
    profile's table of tuned defaults that ``engine.plan`` would consult first."""
    from engine.backends.stages import run_on

    task = TaskSpec.model_validate(task.model_dump() | {"backend": "cuda"})
    if task.block_size is None and task.memory_pipelining is None:
        task = with_default_knobs(task, DeviceLimits.from_profile(prepare(task).profile))
    prep = prepare(task)
    ctx = RunContext(task=prep.task, profile=prep.profile, spec=get_spec(prep.task.kernel), emit=Emitter(send=lambda e: None))
    return run_on("cuda", ctx)


def _wrong(dtype: str, shape: tuple[int, int, int], block_size: str | None = None,
           stages: int | None = None, fusion: bool = True, **expect):
    """One run of these knobs (None: the engine's default) at M, N, K: None where it is correct,
    every element written and the launch info reports each ``expect`` key with its value (a
    callable value: a predicate on it); else what was seen, for the failure list."""
    m, n, k = shape
    res = _backend_run(TaskSpec(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=block_size,
                                memory_pipelining=stages, fusion=fusion, warmup=1, iterations=2,
                                peers=False))
    info = res.launch.info or {}
    ok = (res.status is RunStatus.ok and res.correctness.correct
          and res.correctness.unwritten_count == 0
          and all(want(info.get(key)) if callable(want) else info.get(key) == want
                  for key, want in expect.items()))
    if ok:
        return None
    return (block_size, stages, shape, fusion, res.status.value,
            {key: info.get(key) for key in ("tile", "stages", "schedule", *expect)},
            (res.error or "")[:200])


def _unswapped_knobs(dtype: str, shape: tuple[int, int, int]) -> tuple[str, int]:
    """The Hopper defaults before the swapped-tile rule (``_base_knobs``, then ``_fit_tile``): for
    the tests of unswapped schedules at shapes where ``default_knobs`` now takes a swapped tile."""
    import kernels.sm90.defaults as sm90_defaults
    from engine.profiles import load_profiles

    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    sh = dict(zip("mnk", shape, strict=True))
    bs, st = sm90_defaults._base_knobs(limits, dtype, sh)
    return sm90_defaults._fit_tile(limits, dtype, sh, bs, st) or (bs, st)


KERNELS = ["gemm_residual", "gemm_residual_mma"]
"""The auto path (wgmma on Hopper for bf16/fp16/tf32, and fp32 by 3xTF32) and the portable path
(FFMA for fp32) forced on this GPU."""


COMBO_SHAPES = ((777, 1024, 512), (33, 1024, 520))
"""Where every knob combination runs: a prefill-like M for the wgmma tiles, a decode M for the
decode path's tiles (valid only at M <= 64)."""


def _knob_combos(dtype: str, kernel: str = "gemm_residual"):
    """Every (block size, stages, fusion) with the first of COMBO_SHAPES where the kernel's own
    validation accepts it; a combination no shape accepts comes with shape None (a failure)."""
    from engine.profiles import load_profiles

    spec = get_spec(kernel)
    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    for bs in spec.block_size_options(limits, dtype):
        for st in spec.pipelining_options(limits, dtype, bs):
            for fusion in (True, False):
                shape = next((sh for sh in COMBO_SHAPES if not violations_of(spec,
                    TaskSpec(kernel=kernel, shape=dict(zip("mnk", sh, strict=True)), dtype=dtype,
                             block_size=bs, memory_pipelining=st, fusion=fusion), limits)), None)
                yield bs, st, fusion, shape


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32", "tf32"])
@pytest.mark.parametrize("m", [1, 586, 1571, 7976, 8192])
def test_odd_m_correct(kernel, dtype, m):
    res = _backend_run(TaskSpec(kernel=kernel, shape={"m": m, "n": 2560, "k": 2560}, dtype=dtype, warmup=1,
                                iterations=3, peers=False))
    assert res.status is RunStatus.ok, res.error
    assert res.correctness.correct and res.correctness.unwritten_count == 0


def _precompile(args):
    """Compile one variant into the kernel cache (runs in a worker process; NVRTC needs no GPU)."""
    kernel, dtype, bs, st, fusion, shape, cache = args
    import os

    os.environ["SOL_COCKPIT_CACHE_DIR"] = cache
    from engine.backends.cuda import compile_cubin, compile_inputs, device_limits

    task = TaskSpec(kernel=kernel, shape=dict(zip("mnk", shape, strict=True)), dtype=dtype, block_size=bs,
                    memory_pipelining=st, fusion=fusion)
    limits, _ = device_limits(0, "h200")
    compile_cubin(*compile_inputs(render_task(get_spec(kernel), task, limits), limits))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32", "tf32"])
def test_every_knob_combination_correct(kernel, dtype):
    import multiprocessing as mp
    import os
    from concurrent.futures import ProcessPoolExecutor

    combos = list(_knob_combos(dtype, kernel))
    cache = os.environ["SOL_COCKPIT_CACHE_DIR"]
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 2), mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_precompile, [(kernel, dtype, bs, st, f, sh, cache) for bs, st, f, sh in combos if sh]))
    failures = [(bs, st, fusion, "no shape accepts it") for bs, st, fusion, sh in combos if sh is None]
    for bs, st, fusion, shape in combos:
        if shape is None:
            continue
        res = _backend_run(TaskSpec(kernel=kernel, shape=dict(zip("mnk", shape, strict=True)), dtype=dtype, block_size=bs,
                                    memory_pipelining=st, fusion=fusion, warmup=1, iterations=2, peers=False))
        if res.status is not RunStatus.ok:
            failures.append((bs, st, fusion, res.status.value, (res.error or "")[:200]))
    assert failures == []


CLUSTER_CASES = [("64x80", 8, (2, 1)), ("64x80", 11, (2, 1)), ("128x80", 7, (2, 1)), ("128x128", 5, (2, 1)),
                 ("128x128", 4, (2, 1)), ("128x160", 5, (2, 1))]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_cluster_shapes_correct(monkeypatch, dtype):
    """2x1 clusters (W multicast) on the tiles they serve, at
    shapes whose last tile blocks reach past M and N (held tiles wholly outside), M = 1 and the
    seed: correct, every element written, the grid whole clusters the device holds at once."""
    from kernels.sm90 import planner

    failures = []
    for bs, st, cl in CLUSTER_CASES:
        monkeypatch.setattr(planner, "use_cluster", lambda *a, cl=cl, **k: cl)
        for m, n, k in ((333, 1032, 520), (1, 2560, 2560), (8192, 2560, 2560)):
            res = _backend_run(TaskSpec(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=bs,
                                        memory_pipelining=st, warmup=1, iterations=2, peers=False))
            ln = res.launch.launches[-1].model_dump() if res.launch.launches else {}
            ok = (res.status is RunStatus.ok and res.correctness.correct
                  and res.correctness.unwritten_count == 0
                  and ln.get("cluster") == cl[0] * cl[1] and ln["grid"][0] % ln["cluster"] == 0)
            if not ok:
                failures.append((bs, st, cl, (m, n, k), res.status.value, (res.error or "")[:200], ln))
    assert failures == []


MULTICAST_CASES = [("64x80", 8, "a"), ("128x128", 5, "a"), ("128x256", 4, "a"), ("128x160", 5, "a"),
                   ("112x256", 4, "w"), ("192x128", 4, "w"), ("104x256", 5, "w"), ("136x128", 5, "w")]
"""Clusters sharing the operand that ``cluster=2`` alone does not: A's tile between N-neighbours on
unswapped tiles, the problem's W between M-neighbours on swapped ones (both the kernel's A)."""


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_multicast_of_the_other_operand_correct(dtype):
    """``schedule.multicast`` set to the operand the kernel's A is, through the task's knobs, at shapes
    whose pairs of tiles reach past the edge (a last pair with its second tile wholly outside), the
    seed and a grouped and an M-fastest order: correct, every element written, launched as clusters of
    2 and reported as the operand asked for."""
    failures = []
    for bs, st, mc in MULTICAST_CASES:
        for shape, raster in (((333, 1032, 520), None), ((8192, 2560, 2560), None),
                              ((1500, 3584, 1024), "group"), ((700, 2600, 640), "m")):
            sched = {"multicast": mc, **({"raster": raster} if raster else {})}
            if (bad := _paired_run_failure(dtype, bs, st, sched, shape, f"{mc.upper()} multicast")) is not None:
                failures.append(bad)
    assert failures == []


def _paired_run_failure(dtype, bs, st, sched, shape, label_end):
    """Run a clustered build through the engine: None where it is correct, every element written,
    launched as clusters of 2 on an even grid and its cluster reported ending ``label_end``; else what
    went wrong."""
    m, n, k = shape
    res = _backend_run(TaskSpec(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=bs,
                                memory_pipelining=st, schedule=sched, warmup=1, iterations=2, peers=False))
    ln = res.launch.launches[-1].model_dump() if res.launch.launches else {}
    label = (res.launch.info or {}).get("cluster", "")
    ok = (res.status is RunStatus.ok and res.correctness.correct
          and res.correctness.unwritten_count == 0 and ln.get("cluster") == 2
          and ln["grid"][0] % 2 == 0 and label.endswith(label_end))
    return None if ok else (bs, st, sched, shape, res.status.value, (res.error or "")[:200], label)


PAIRS_CASES = (
    # decode tiles: an even and an odd tile count (the last CTA idle), past the edge, K padded
    ("16x64", 12, {"multicast": "none"}, (16, 8192, 8192)), ("16x64", 12, {"multicast": "none"}, (9, 4160, 4096)),
    ("40x64", 8, {"multicast": "none"}, (37, 904, 777)),
    # prefill tiles asked for pairs: one round, a persistent grid capped at the pairs that fit
    ("128x256", 4, {"multicast": "none"}, (1337, 2560, 2560)),
    ("128x128", 5, {"multicast": "none", "raster": "group"}, (3333, 2560, 2560)),
    ("104x256", 4, {"multicast": "none"}, (1337, 2560, 2560)),
)
"""Pairs: clusters of two CTAs that share no tile (``schedule.multicast = none``)."""


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_pairs_correct(dtype):
    """Builds launched in pairs that share nothing: correct, every element written, launched as
    clusters of 2 on an even grid and reported as pairs; a decode tile's PDL launch holds with them."""
    failures = [bad for bs, st, sched, shape in PAIRS_CASES
                if (bad := _paired_run_failure(dtype, bs, st, sched, shape, "nothing shared)")) is not None]
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_m_fastest_and_grouped_tile_orders_correct(dtype):
    """The one-wave narrow and 128x160 defaults number their tiles M-fastest, the two-wave 128x160
    default in groups of 4 M blocks: through the engine with the default knobs at M = 256, 333,
    512, 1024 and 2048 (N = K = 2560) and at shapes no tile divides (the last tiles past M and N;
    M = 1800: a last group of 3 M blocks, with the knobs before the swapped tiles took it): correct,
    every element written, the order reported."""
    failures = []
    grouped = "groups of 4 M blocks"
    for m, n, k, order in ((256, 2560, 2560, "M-fastest"), (333, 2560, 2560, "M-fastest"),
                           (512, 2560, 2560, "M-fastest"), (200, 1032, 520, "M-fastest"),
                           (77, 2000, 1000, "M-fastest"), (1024, 2560, 2560, "M-fastest"),
                           (2048, 2560, 2560, grouped), (1800, 2560, 2560, grouped),
                           (2047, 2560, 1000, grouped), (2000, 2400, 1000, grouped)):
        knobs = _unswapped_knobs(dtype, (m, n, k)) if m == 1800 else (None, None)
        if (wrong := _wrong(dtype, (m, n, k), *knobs, tile_order=order)) is not None:
            failures.append(wrong)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_tile_orders_at_every_stage_count(dtype):
    """The tile orders at every MEMORY_PIPELINING value a user can pick for the shape, not only the
    defaults' (the knob sweep's 777x1024x512 runs the narrow tiles in two waves): 64x80, 128x80 and
    128x160 in one wave (M-fastest, 200x1032x520: the last tiles past M and N; the deepest counts
    stage the epilogue tile in the ring) and 128x160 in two waves (groups of 4 M blocks,
    1800x2560x1000: a last group of 3); correct, every element written, the order reported."""
    import kernels.sm90.smem as sm90_smem
    from engine.profiles import load_profiles

    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    failures = []
    cases = [("64x80", (200, 1032, 520), "M-fastest"), ("128x80", (200, 1032, 520), "M-fastest"),
             ("128x160", (200, 1032, 520), "M-fastest"),
             ("128x160", (1800, 2560, 1000), "groups of 4 M blocks")]
    for bs, (m, n, k), order in cases:
        for st in sm90_smem.pipelining_options(limits, dtype, bs, {"m": m, "n": n, "k": k}):
            if st == 0:
                continue  # pipelining off runs the same tile order code; the knob sweep has it
            if (wrong := _wrong(dtype, (m, n, k), bs, st, tile_order=order)) is not None:
                failures.append(wrong)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_epilogue_tile_in_the_ring_correct(dtype):
    """Where every CTA has one tile the epilogue tile is staged in the ring's freed slots: the
    defaults at M = 1571 (128x256, 4 stages), slots that wrap round the ring (128x256/4 at
    1200x2560x704, whose default is now a swapped tile: 11 k-blocks on 4 stages; the default at
    1000x2560x320: 5 on 6), one k-block (200x1032x64: slots never used), fusion off (the GEMM's
    result through the ring, then the add); correct, every element written, reported."""
    failures = []
    for shape, fusion, bs, st in (((1571, 2560, 2560), True, None, None),
                                  ((1200, 2560, 704), True, "128x256", 4),
                                  ((1000, 2560, 320), True, None, None), ((200, 1032, 64), True, None, None),
                                  ((300, 2560, 704), True, None, None), ((1571, 2560, 2560), False, None, None)):
        wrong = _wrong(dtype, shape, bs, st, fusion=fusion, epilogue_tile="in the ring's freed slots")
        if wrong is not None:
            failures.append(wrong)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_shared_epilogue_buffer_correct(dtype):
    """Ping-pong with the two consumers sharing one epilogue buffer (the stage counts two buffers
    leave no room for): 128x128 s6 at the seed shape (2x1 clusters), 128x128 s6 at
    M = 7976 with fusion off, with tiles past N (4096x1032) and short K (6000x1000x304: 5 k-blocks
    on 6 stages), 128x160 s5 unclustered at the seed, with a tail chunk (4500x2600x520) and under a
    stream-K schedule (2194x2560x2560: 24 split tiles); correct, every element written, reported."""
    failures = []
    shared = "one buffer shared by both consumers"
    for bs, st, shape, fusion in (("128x128", 6, (8192, 2560, 2560), True),
                                      ("128x128", 6, (7976, 2560, 2560), False),
                                      ("128x128", 6, (4096, 1032, 2560), True),
                                      ("128x128", 6, (6000, 1000, 304), True),
                                      ("128x160", 5, (8192, 2560, 2560), True),
                                      ("128x160", 5, (4500, 2600, 520), True),
                                      ("128x160", 5, (2194, 2560, 2560), True)):
        wrong = _wrong(dtype, shape, bs, st, fusion, epilogue_tile=shared,
                       consumers=lambda c: str(c or "").startswith("ping-pong"))
        if wrong is not None:
            failures.append(wrong)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_reused_ring_and_wide_tiles_correct(dtype):
    """The stage counts that fit only with the epilogue tile in the ring, on shapes where a CTA gets
    several tiles (the slots returned after each store; every 16-bit tile, with slots that wrap,
    a tail chunk, tiles past N, short K), and cuBLAS's wide tiles 256x160 and 128x320 (consumers
    splitting N; two W boxes) at every pipelining count: the ring (3 stages: its slots released at
    once; 4: at the next tile's first k-block), their own buffer under a stream-K tail, and off;
    fusion off too; correct, every element written, reported."""
    reused = "in the ring's freed slots, returned after each store"
    failures = []
    for bs, st, shape, fusion, where in (
            ("128x256", 4, (8192, 2560, 2560), True, reused),
            ("256x128", 4, (4096, 2560, 704), True, reused),
            ("128x128", 7, (4096, 1032, 2560), True, reused),
            ("128x160", 6, (4500, 2600, 520), True, reused),
            ("128x80", 8, (4096, 2560, 320), True, reused),
            ("64x80", 12, (2048, 2560, 704), True, reused),
            ("256x160", 4, (7976, 2560, 2560), True, reused),
            ("256x160", 3, (2000, 2600, 704), True, reused),
            ("256x160", 2, (2194, 2560, 2560), True, "own buffer"),
            ("256x160", 0, (333, 1032, 520), True, "own buffer"),
            ("128x320", 4, (8192, 2560, 2560), True, reused),
            ("128x320", 4, (7976, 2560, 2560), False, reused),
            ("128x320", 3, (4096, 2560, 704), True, reused),
            ("128x320", 2, (2194, 2560, 2560), True, "own buffer"),
            ("128x320", 0, (1000, 1000, 200), True, "own buffer")):
        if (wrong := _wrong(dtype, shape, bs, st, fusion, epilogue_tile=where)) is not None:
            failures.append(wrong)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_fit_tiles_correct(monkeypatch, dtype):
    """The FIT_TILES widths 128x144 (ping-pong, and cooperative where a CTA gets one tile), 128x192
    and 128x208 (cooperative): the engine's default where it takes them (M = 2500 at N = 2600, where
    N = 2560 takes the swapped 200x128; M = 2750, 3400 at N = 2560), at
    every pipelining count, with tiles past M and N (their 16-column tail chunk clipped), short K,
    fusion off, one tile a CTA, forced 2x1 clusters: correct, every element written, reported."""
    import kernels.sm90.planner as sm90_planner

    real = sm90_planner.plan
    failures = []
    for bs, st, shape, fusion, expect in (
            (None, None, (2500, 2600, 2560), True, {"tile": "128x208x64"}),
            (None, None, (2750, 2560, 2560), True, {"tile": "128x144x64"}),
            (None, None, (3400, 2560, 2560), True, {"tile": "128x144x64"}),
            ("128x208", 4, (2500, 2504, 2560), True, {}),
            ("128x208", 3, (3001, 2600, 520), False, {}),
            ("128x208", 2, (1000, 1000, 200), True, {}),
            ("128x208", 0, (333, 1032, 72), True, {}),
            ("128x192", 4, (2083, 2560, 2560), True, {}),
            ("128x192", 4, (4096, 2504, 704), False, {}),
            ("128x192", 0, (130, 264, 136), True, {}),
            ("128x144", 4, (2650, 2600, 2560), True, {"consumers": lambda c: c.startswith("ping-pong")}),
            ("128x144", 5, (1700, 2560, 2560), True, {"consumers": "cooperative"}),
            ("128x144", 4, (7976, 2504, 704), False, {}),
            ("128x144", 2, (586, 1000, 520), True, {})):
        if (wrong := _wrong(dtype, shape, bs, st, fusion, **expect)) is not None:
            failures.append(wrong)

    def clustered(*a, **kw):
        kw.update(cluster=2, streamk=False)
        return real(*a, **kw)

    monkeypatch.setattr(sm90_planner, "plan", clustered)
    for bs, st, shape in (("128x208", 4, (2500, 2560, 2560)), ("128x144", 4, (3400, 2600, 704)),
                          ("128x192", 4, (2083, 2504, 520))):
        if (wrong := _wrong(dtype, shape, bs, st, cluster=lambda c: (c or "").startswith("2x1"))) is not None:
            failures.append(("cluster 2x1", wrong))
    monkeypatch.setattr(sm90_planner, "plan", real)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_swapped_tiles_correct(dtype):
    """The swapped tiles (R x 128, out^T = W A^T): the engine's default where it takes them (M =
    1700, 2083, 2200 at N = K = 2560; 4400 at N = 1024, numbered N-fastest), every width at its deepest count and with the pipeline off,
    with tiles past M and N (N = 2504: the kernel's last 128-row block clipped), short K, fusion
    off, one tile a CTA, a single row: correct, every element written, reported as swapped."""
    swapped = {"tile": lambda t: "swapped" in (t or ""), "consumers": "cooperative"}
    failures = []
    for bs, st, shape, fusion, expect in (
            (None, None, (1700, 2560, 2560), True, {"tile": lambda t: (t or "").startswith("136x128x64 swapped")}),
            (None, None, (2083, 2560, 2560), True, {"tile": lambda t: (t or "").startswith("168x128x64 swapped")}),
            (None, None, (2200, 2560, 2560), True, {"tile": lambda t: (t or "").startswith("176x128x64 swapped")}),
            (None, None, (4400, 1024, 520), True, {"tile": lambda t: (t or "").startswith("136x128x64 swapped"),
                                                   "tile_order": "N-fastest"}),
            ("200x128", 4, (6500, 1032, 704), False, {**swapped, "tile_order": "N-fastest"}),
            ("136x128", 5, (1763, 2504, 2560), True, swapped),
            ("144x128", 4, (1873, 2560, 704), False, swapped),
            ("152x128", 3, (2000, 1032, 520), True, swapped),
            ("160x128", 5, (2075, 2600, 2560), True, swapped),
            ("168x128", 0, (333, 1032, 72), True, swapped),
            ("176x128", 4, (2289, 2504, 2560), True, swapped),
            ("184x128", 2, (586, 1000, 520), True, swapped),
            ("192x128", 4, (7976, 2504, 704), False, swapped),
            ("200x128", 4, (2500, 2560, 2560), True, swapped),
            ("200x128", 4, (1, 264, 136), True, swapped),
            # the deeper rings with the epilogue tile in the ring's freed slots (ADR-0007):
            # returned after each store where a CTA gets two tiles, and with one tile a CTA
            ("168x128", 6, (2083, 2560, 2560), True, {**swapped, "epilogue_tile": lambda e: "returned" in (e or "")}),
            ("200x128", 5, (2500, 2504, 704), False, {**swapped, "epilogue_tile": lambda e: "returned" in (e or "")}),
            ("136x128", 6, (1763, 2504, 2560), True, {**swapped, "epilogue_tile": lambda e: "ring" in (e or "")}),
            ("184x128", 5, (333, 1032, 72), True, {**swapped, "epilogue_tile": lambda e: "ring" in (e or "")}),
            ("152x128", 6, (6500, 1032, 520), True, {**swapped, "tile_order": "N-fastest"})):
        if (wrong := _wrong(dtype, shape, bs, st, fusion, **expect)) is not None:
            failures.append(wrong)
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_wide_swapped_tiles_correct(dtype):
    """The swapped R x 256 tiles (the kernel's 256 x R, two 64-row slices a consumer): the engine's
    default where it takes them (M = 1337 at N = K = 2560: 104 x 256), every width,
    with the epilogue tile in its own buffer and in the ring, the pipeline off, tiles past M and N (N =
    2504: the kernel's last 256-row block clipped), short K, K not a multiple of 8, fusion off, a
    single row: correct, every element written, reported as swapped."""
    failures = []
    for bs, st, shape, fusion in (
            (None, None, (1337, 2560, 2560), True),  # the default there (_wide_swap_tile)
            ("104x256", 4, (1337, 2560, 2560), True),
            ("112x256", 4, (3072, 3584, 704), True),
            ("80x256", 3, (1000, 2504, 520), True),
            ("88x256", 5, (1763, 1032, 2560), False),
            ("96x256", 0, (333, 1032, 72), True),
            ("104x256", 3, (2000, 2504, 777), True),
            ("112x256", 2, (586, 1000, 520), False),
            ("120x256", 4, (6500, 1032, 704), True),
            ("120x256", 3, (1, 264, 136), True)):
        tile = (bs or "104x256").split("x")[0] + "x256x64 swapped"
        if (wrong := _wrong(dtype, shape, bs, st, fusion, consumers="cooperative",
                            tile=lambda t, tile=tile: (t or "").startswith(tile))) is not None:
            failures.append(wrong)
    assert failures == []


def _engine_out(monkeypatch, task: TaskSpec, tail_shift: bool):
    """The engine's run of ``task`` with the Hopper path's tail shift on (the planner's own choice)
    or off (forced): the result and a copy of the output its verify step checked (the seed's first
    input set)."""
    return _engine_out_with(monkeypatch, task, **({} if tail_shift else {"tail_shift": False}))


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_tail_shift_correct_and_bit_for_bit(monkeypatch, dtype):
    """The engine's default builds at shapes whose last tiles reach past M, N or both (ping-pong in
    clusters, cooperative 128x160, the one-wave 128x256 ring, the narrow 64x80 ring): with the partial
    tiles moved back to end at M, N the output is correct, every element written, the launch says
    so, and it is bit for bit the output with the tiles clipped by TMA (the shared rows are stored
    twice; any difference would make the result depend on which store lands last). At 2047x2600x704,
    where the default is now a swapped tile (whose tiles past M are clipped), the knobs before it."""
    import cupy as cp

    failures = []
    for m, n, k in ((7976, 2560, 2560), (1000, 2560, 2560), (1571, 2560, 2560), (2047, 2600, 704),
                    (333, 1032, 520), (4096, 2504, 2560)):
        bs, st = _unswapped_knobs(dtype, (m, n, k))
        task = TaskSpec(shape={"m": m, "n": n, "k": k}, dtype=dtype, block_size=bs, memory_pipelining=st,
                        warmup=1, iterations=2, peers=False)
        res0, out0 = _engine_out(monkeypatch, task, False)
        res1, out1 = _engine_out(monkeypatch, task, True)
        tails = [(r.launch.info or {}).get("tail") for r in (res0, res1)]
        ok = (all(r.status is RunStatus.ok and r.correctness.correct and r.correctness.unwritten_count == 0
                  for r in (res0, res1))
              and tails == ["tiles past M, N clipped by TMA", "last tiles moved back to end at M, N"])
        differ = int(cp.count_nonzero(out0.view(cp.uint16) != out1.view(cp.uint16)))
        if not ok or differ:
            failures.append(((m, n, k), [r.status.value for r in (res0, res1)], tails, differ,
                             (res1.error or "")[:200]))
    assert failures == []


def _engine_out_with(monkeypatch, task: TaskSpec, **choices):
    """The engine's run of ``task`` with the Hopper planner's choices forced (``plan``'s keyword
    arguments, e.g. ``half_tail=False``; none: the planner's own): the result and a copy of the
    output its verify step checked."""
    import kernels.sm90.planner as sm90_planner
    from engine.backends import cuda as cuda_backend

    real = sm90_planner.plan

    def forced(task, limits, block_size, stages, *a, **kw):
        return real(task, limits, block_size, stages, *a, **{**kw, **choices})

    with monkeypatch.context() as mp:
        if choices:
            mp.setattr(sm90_planner, "plan", forced)
        seen = {}
        compare = cuda_backend.compare_outputs

        def spy(spec, outs, dtype, refs):
            seen["out"] = outs[spec.output].copy()
            return compare(spec, outs, dtype, refs)

        mp.setattr(cuda_backend, "compare_outputs", spy)
        return _backend_run(task), seen["out"]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_tail_correct_and_bit_for_bit(monkeypatch, dtype):
    """Where the engine runs the last round of tiles as 64-row halves (ping-pong 128x160 at M =
    2500 and 6700, 128x128 at 2650, 3400 and 7600, 128x144 at 2100, the last tile moved back to end
    at M; N and K that no tile divides), the output is correct, every element written, the launch says so, and
    it is bit for bit the output of the same knobs with that round whole (data-parallel, no
    stream-K)."""
    import cupy as cp

    import kernels.sm90.defaults as sm90_defaults
    from engine.profiles import load_profiles

    limits = DeviceLimits.from_profile(load_profiles().get("h200"))
    failures = []
    for m, n, k in ((2500, 2560, 2560), (2650, 2560, 2560), (3400, 2560, 520), (7600, 2560, 2560),
                    (6700, 2560, 2560), (2500, 2504, 2560), (3400, 2600, 704), (2100, 2560, 2560)):
        shape = {"m": m, "n": n, "k": k}
        # the knobs before the FIT_TILES rule (ping-pong 128x144 forced at 2100: 306 tiles, 42 halved)
        bs, st = ("128x144", 4) if m == 2100 else sm90_defaults._base_knobs(limits, dtype, shape)
        task = TaskSpec(shape=shape, dtype=dtype, block_size=bs, memory_pipelining=st, warmup=1,
                        iterations=2, peers=False)
        res0, out0 = _engine_out_with(monkeypatch, task, half_tail=False, streamk=False)
        res1, out1 = _engine_out_with(monkeypatch, task)
        scheds = [(r.launch.info or {}).get("schedule") for r in (res0, res1)]
        ok = (all(r.status is RunStatus.ok and r.correctness.correct and r.correctness.unwritten_count == 0
                  for r in (res0, res1))
              and scheds[0] == "data-parallel" and "64-row halves" in (scheds[1] or ""))
        differ = int(cp.count_nonzero(out0.view(cp.uint16) != out1.view(cp.uint16)))
        if not ok or differ:
            failures.append(((m, n, k), bs, st, [r.status.value for r in (res0, res1)], scheds, differ,
                             (res1.error or "")[:200]))
    assert failures == []


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_tail_with_few_ctas_and_many_halves(monkeypatch, dtype):
    """Forced schedules that put many half units on each CTA, whole tiles and halves interleaved
    on the two ping-pong consumers (grid 7 with 3 whole tiles; grid 5 with none whole; an odd
    count of units per CTA), on both ping-pong tiles: correct, every element written."""
    import kernels.sm90.planner as sm90_planner

    real = sm90_planner.plan
    failures = []
    for bs, st, shape, sched in (("128x128", 5, (1000, 1032, 520), (7, 3)),
                                 ("128x160", 4, (1000, 1000, 200), (5, 0)),
                                 ("128x128", 4, (333, 2560, 704), (6, 11)),
                                 ("128x160", 4, (2500, 2560, 2560), (132, 200))):
        def forced(task, limits, block_size, stages, *a, sched=sched, **kw):
            kw.update(schedule=sched, half_tail=True, pingpong=True, cluster=1, streamk=False)
            return real(task, limits, block_size, stages, *a, **kw)

        monkeypatch.setattr(sm90_planner, "plan", forced)
        if (wrong := _wrong(dtype, shape, bs, st, schedule=lambda s: "64-row halves" in (s or ""))) is not None:
            failures.append((sched, wrong))
    monkeypatch.setattr(sm90_planner, "plan", real)
    assert failures == []


def test_fp32_3xtf32_as_accurate_as_ffma():
    """fp32 on Hopper runs 3xTF32 on the tensor cores: its error against the fp64 reference must be
    fp32-class, i.e. in the order of the FFMA kernel's (the portable path, forced), and ten times
    under the fp32 tolerance; one tf32 product alone is far coarser."""
    shape = {"m": 2048, "n": 2560, "k": 2560}
    runs = {kernel: _backend_run(TaskSpec(kernel=kernel, shape=shape, dtype="fp32", warmup=1,
                                          iterations=2, peers=False))
            for kernel in ("gemm_residual", "gemm_residual_mma")}
    tf32 = _backend_run(TaskSpec(shape=shape, dtype="tf32", warmup=1, iterations=2, peers=False))
    x3, ffma = runs["gemm_residual"], runs["gemm_residual_mma"]
    assert "3xTF32" in (x3.launch.info or {})["math"]
    assert x3.correctness.correct and ffma.correctness.correct
    assert x3.correctness.max_rel_err < get_spec("gemm_residual").rtol("fp32") / 10
    assert x3.correctness.normwise_rel_err < 10 * ffma.correctness.normwise_rel_err
    assert tf32.correctness.normwise_rel_err > 10 * x3.correctness.normwise_rel_err


def test_random_shapes():
    rng = random.Random(1234)
    for _ in range(8):
        m, n, k = rng.randint(1, 3000), 8 * rng.randint(1, 400), 8 * rng.randint(1, 400)
        dtype = rng.choice(["bf16", "fp16", "fp32", "tf32"])
        res = _backend_run(TaskSpec(shape={"m": m, "n": n, "k": k}, dtype=dtype, warmup=1, iterations=2, peers=False))
        assert res.status is RunStatus.ok, (m, n, k, dtype, res.error)


def test_peers_timed_and_correct():
    res = _backend_run(TaskSpec(warmup=3, iterations=10))
    names = {p.name: p for p in res.peers}
    assert {"cupy_matmul_add", "cublas_gemm_beta1"} <= set(names)
    for p in names.values():
        assert p.error is None and p.timing.median_ms > 0
    assert names["cublas_gemm_beta1"].correct and names["cupy_matmul_add"].correct
    assert res.solexec_score is not None
    v = res.validity.model_dump()  # what the run saw: clocks, throttling, the power limit in force
    assert v["samples"] > 0 and v["sm_clock_mhz_max"] > 0
    assert 100 < v["power_limit_w"] < 2000 and 100 < v["power_limit_default_w"] < 2000


def test_rested_run_times_peers_after_the_same_rest():
    """rest_s: ours and each peer start after the same idle; the peers are still correct and timed,
    the run records the rest, and the timed-after-ours caveat is gone."""
    res = _backend_run(TaskSpec(warmup=3, iterations=10, rest_s=0.5))
    assert res.status is RunStatus.ok and res.correctness.correct
    assert res.summary_json()["rest_s"] == 0.5 and res.peers_caveat is None
    names = {p.name: p for p in res.peers}
    assert names["cublas_gemm_beta1"].correct and names["cublas_gemm_beta1"].timing.median_ms > 0
    assert all(p.error is None and p.timing.median_ms > 0 for p in names.values())


def test_small_kernels_are_timed_queued_behind_a_hold():
    """A 15-20 us GEMM is launched faster by the GPU than the host queues it: the timed launches go
    behind the hold kernel and run back to back (event pairs time the GPU, not the launch rate); the
    seed GEMM (~0.15 ms) keeps the queue ahead by itself and is not held. No chunk ran out of hold."""
    small = _backend_run(TaskSpec(shape={"m": 256, "n": 2560, "k": 2560}, warmup=10, iterations=100))
    q = small.validity.queue_hold.model_dump() if small.validity.queue_hold else {}
    assert small.status is RunStatus.ok and small.correctness.correct
    assert "ours" in q["held"] and q["held_chunks"] >= 1 and q["expired_chunks"] == 0, q
    assert small.timing.median_ms < 0.03, small.timing  # GPU time (~0.015 ms), not a launch rate
    # the peers rotate over the same input sets as ours (these inputs are smaller than the L2), and
    # the in-place beta=1 peer stays correct through that
    assert (small.launch.input_sets or 0) > 1
    peers = {p.name: p for p in small.peers}
    assert peers["cublas_gemm_beta1"].correct and peers["cupy_matmul_add"].correct
    assert {"cublas_gemm_beta1", "cublas_gemm"} <= set(q["held"]), q
    seed = _backend_run(TaskSpec(warmup=10, iterations=20, peers=False))
    assert seed.validity.queue_hold and seed.validity.queue_hold.not_held == ["ours"], seed.validity.queue_hold


def test_energy_per_launch_from_the_board_counter():
    """--energy: power edge to edge on NVML's energy counter; energy per launch = W x ms."""
    res = _backend_run(TaskSpec(warmup=10, iterations=50, peers=False, energy_s=1.0))
    e = None if res.energy is None else res.energy.model_dump()
    assert res.status is RunStatus.ok and e is not None and "note" not in e, e
    assert 50 < e["watts"] < 1500 and e["window_s"] >= 1.0 and e["launches"] > 0
    assert e["mj_per_launch"] == pytest.approx(e["watts"] * e["ms_per_launch"])
    assert 0.5 < e["ms_per_launch"] / res.timing.median_ms < 2.0
    assert e["gflop_per_j"] == pytest.approx(res.sol.flops / (e["mj_per_launch"] / 1e3) / 1e9)


@pytest.mark.parametrize("fault,status,needle", [
    ("illegal_address", RunStatus.launch_error, "illegal memory access"),
    ("launch_failure", RunStatus.launch_error, "launch failure"),
    ("compile_error", RunStatus.compile_error, "injected compile error"),
    ("nan", RunStatus.incorrect, "NaN"),
])
def test_faults_isolated_by_engine_process(fault, status, needle):
    prep = prepare(TaskSpec(backend="cuda", fault=fault, warmup=2, iterations=5, peers=False))
    res = run_prepared(prep)
    assert res.status is status
    assert needle.lower() in (res.error or "").lower()
    ok = run_prepared(prepare(TaskSpec(backend="cuda", warmup=2, iterations=5, peers=False)))
    assert ok.status is RunStatus.ok


def test_hang_is_killed_and_gpu_reusable():
    res = run_prepared(prepare(TaskSpec(backend="cuda", fault="hang", timeout_s=20, peers=False)))
    assert res.status is RunStatus.timeout
    ok = run_prepared(prepare(TaskSpec(backend="cuda", warmup=2, iterations=5, peers=False)))
    assert ok.status is RunStatus.ok


def test_parent_never_creates_a_cuda_context():
    import subprocess
    import sys

    code = ("import sys\nfrom engine.runner import prepare, run_prepared\nfrom engine.task import TaskSpec\n"
            "r = run_prepared(prepare(TaskSpec(backend='cuda', warmup=1, iterations=3, peers=False)))\n"
            "print(r.status.value, 'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["ok", "False"]
