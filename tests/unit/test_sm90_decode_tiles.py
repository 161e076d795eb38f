"""The Hopper GEMM's swapped decode tiles (R tokens x 64 rows of W, wgmma m64nR, one consumer
warpgroup): the tile for an M, the ring the defaults give it, where the tuner and the table of tuned
defaults offer it, what it builds, and that every one compiles (ADR-0011)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import kernels.sm90.codegen as sm90_codegen
import kernels.sm90.defaults as sm90_defaults
import kernels.sm90.planner as sm90_planner
import kernels.sm90.smem as sm90_smem
import kernels.sm90.tiles as sm90_tiles
from kernels import get_spec
from kernels.spec import DeviceLimits, violations_of

H200 = DeviceLimits(compute_capability=(9, 0), sm_count=132,
                    shared_memory_per_block_bytes=232448, shared_memory_per_sm_bytes=233472, profile="h200")
A100 = DeviceLimits((8, 0), 108, 166912, 167936, profile="a100")
SPEC = get_spec("gemm_residual")


def _shape(m: int, n: int, k: int) -> dict[str, int]:
    return {"m": m, "n": n, "k": k}


def test_decode_tile_holds_m_in_one_row_of_tiles() -> None:
    assert [sm90_tiles.decode_tile(m) for m in (1, 2, 8, 9, 16, 17, 33, 56)] == [
        "8x64", "8x64", "8x64", "16x64", "16x64", "24x64", "40x64", "56x64"]
    with pytest.raises(ValueError, match="at most 56 tokens"):
        sm90_tiles.decode_tile(57)
    assert set(sm90_tiles.DECODE_TILES) == {f"{r}x64" for r in range(8, 57, 8)}
    assert all(sm90_tiles.swapped(t) for t in sm90_tiles.DECODE_TILES)


def test_decode_tile_plans_the_transposed_product_one_w_tile_a_cta() -> None:
    b = sm90_codegen.build(SimpleNamespace(shape=_shape(16, 8192, 8192), dtype="bf16"), H200, "16x64", 8)
    gemm = b.launches[-1]
    assert gemm.grid == (128, 1, 1) and gemm.block == (256, 1, 1)  # 8192 / 64 tiles; producer + one consumer
    a_map, w_map = gemm.args[0], gemm.args[1]
    assert (a_map.buffer, a_map.box_rows) == ("w", 64) and (w_map.buffer, w_map.box_rows) == ("a", 16)
    assert "#define STREAM_HINT 1" in b.source and "#define SWAP_AB 1" in b.source
    assert "#define PDL_WAIT 1" in b.source and gemm.pdl  # programmatic dependent launch (ADR-0010)
    assert re.search(r"#define BM 64\n", b.source) and re.search(r"#define BN 16\n", b.source)
    assert b.info["l2_policy"] == "W loaded evict-first (read once), 128-byte L2 promotion"
    assert (a_map.l2_promotion, w_map.l2_promotion) == (128, 256)  # W's row pieces, one k-block each
    assert b.info["tile"].startswith("16x64x64 swapped")
    # the prefill swapped tiles keep L2's default policy
    wide = sm90_codegen.build(SimpleNamespace(shape=_shape(1337, 2560, 2560), dtype="bf16"), H200, "104x256", 4)
    assert "STREAM_HINT" not in "".join(f"{k}" for k in re.findall(r"#define (\w+) 1\n", wide.source))
    assert "l2_policy" not in wide.info and not wide.launches[-1].pdl
    assert wide.launches[-1].args[0].l2_promotion == 256 and wide.launches[-1].cluster == 1


def test_pairs_launch_clusters_of_two_that_share_nothing() -> None:
    task = SimpleNamespace(shape=_shape(16, 8192, 8192), dtype="bf16")
    b = sm90_codegen.build(task, H200, "16x64", 12, pairs=True)
    gemm = b.launches[-1]
    assert gemm.cluster == 2 and "#define CLUSTER_LAUNCH 2\n" in b.source and "#define CLUSTER 1\n" in b.source
    assert b.info["cluster"] == "pairs (2 CTAs, nothing shared)"
    p = sm90_planner.plan(task, H200, "16x64", 12, pairs=True)
    assert p.pairs and p.schedule()["cluster"] == 2 and p.schedule()["multicast"] == "none"
    # an odd tile count: whole pairs, the last CTA idle (65 tiles of 64 rows)
    odd = sm90_codegen.build(SimpleNamespace(shape=_shape(16, 4160, 4096), dtype="bf16"), H200, "16x64", 12, pairs=True)
    assert odd.launches[-1].grid == (66, 1, 1) and odd.info["tiles"] == 65
    # unpaired by default, decode tiles included; cluster=2 is the tokens' multicast, as before
    solo = sm90_codegen.build(task, H200, "16x64", 12)
    assert solo.launches[-1].cluster == 1 and "#define CLUSTER_LAUNCH" not in solo.source
    assert not sm90_planner.plan(task, H200, "16x64", 12, cluster=2).pairs
    assert not sm90_planner.plan(SimpleNamespace(shape=_shape(1337, 2560, 2560), dtype="bf16"), H200, "128x128", 4).pairs
    wide = sm90_planner.plan(SimpleNamespace(shape=_shape(1337, 2560, 2560), dtype="bf16"), H200, "128x128", 4, pairs=True)
    assert wide.pairs and not wide.streamk and not wide.half_tail and wide.grid % 2 == 0
    with pytest.raises(ValueError, match="share no tile"):
        sm90_planner.plan(task, H200, "128x128", 4, pairs=True, cluster=2)
    with pytest.raises(ValueError, match="data-parallel"):
        sm90_planner.plan(task, H200, "128x128", 4, pairs=True, streamk=True)
    with pytest.raises(ValueError, match="16-bit data"):
        sm90_planner.plan(SimpleNamespace(shape=_shape(1337, 2560, 2560), dtype="fp32"), H200, "128x128", 4, pairs=True)


@pytest.mark.parametrize("schedule, pairs, error", [
    ({"multicast": "none"}, True, None),
    ({"cluster": 2, "multicast": "none"}, True, None),
    ({"cluster": 1}, False, None),
    ({"cluster": 1, "multicast": "none"}, None, "with cluster=2"),
])
def test_multicast_none_asks_for_pairs(schedule: dict, pairs: bool | None, error: str | None) -> None:
    from kernels.gemm_residual_auto import sm90_choices
    from kernels.spec import KnobError

    task = SimpleNamespace(shape=_shape(4096, 4096, 4096), dtype="bf16")
    if error:
        with pytest.raises(KnobError, match=error):
            sm90_choices(schedule, task, H200, "128x256", 4)
        return
    out = sm90_choices(schedule, task, H200, "128x256", 4)
    assert out["pairs"] is pairs and out["cluster"] == 1


def test_decode_tiles_are_16_bit_only_and_refuse_a_ring_past_shared_memory() -> None:
    assert "16x64" not in sm90_tiles.tiles_for("tf32")
    with pytest.raises(ValueError, match="16-bit data"):
        sm90_tiles.parse_block_size("16x64", "fp32")
    assert max(sm90_smem.pipelining_options(H200, "bf16", "16x64", _shape(16, 8192, 8192))) == 22
    assert max(sm90_smem.pipelining_options(H200, "bf16", "56x64", _shape(56, 8192, 8192))) == 15
    task = SimpleNamespace(shape=_shape(16, 8192, 8192), dtype="bf16", block_size="16x64", memory_pipelining=23)
    [v] = sm90_planner.check(task, H200)
    assert v.field == "memory_pipelining" and "2..22" in v.message


@pytest.mark.parametrize("shape, stages", [
    ((16, 8192, 8192), 8),    # 128 CTAs: ~10 MB in flight at 8 slots of 10 KB
    ((16, 5120, 5120), 12),   # 80 CTAs
    ((16, 4096, 14336), 12),  # 64 CTAs: capped at 12
    ((16, 14336, 4096), 8),   # 224 tiles on 132 CTAs
    ((2, 65536, 4096), 9),    # 8x64: slots of 9 KB
    ((48, 4096, 4096), 11),   # 14 slots of 14 KB would fit; 10 MB over 64 CTAs is 11
])
def test_decode_stages_keep_a_grid_wide_amount_in_flight(shape: tuple[int, int, int], stages: int) -> None:
    s = _shape(*shape)
    tile = sm90_tiles.decode_tile(s["m"])
    assert sm90_defaults.default_stages(H200, "bf16", tile, s) == stages
    assert SPEC.stages_for(H200, "bf16", tile, s) == stages


def test_decode_stages_without_a_shape_and_within_what_fits() -> None:
    assert sm90_defaults.default_stages(H200, "bf16", "16x64", None) == 8
    small = DeviceLimits((9, 0), 8, 65536, 65536)  # 8 SMs, 64 KB a block: 6 slots of 10 KB at most
    assert sm90_defaults.default_stages(small, "bf16", "16x64", _shape(16, 8192, 8192)) == 6


def test_on_hopper_the_rx64_names_build_the_decode_tiles_elsewhere_the_mma_sync_path() -> None:
    assert SPEC._path(H200, "bf16", _shape(16, 8192, 8192), "16x64") == "sm90"
    assert SPEC._path(A100, "bf16", _shape(16, 8192, 8192), "16x64") == "skinny"
    # the decode path's other tiles stay its own on Hopper
    assert SPEC._path(H200, "bf16", _shape(16, 8192, 8192), "16x16") == "skinny"
    assert SPEC._path(H200, "bf16", _shape(64, 8192, 8192), "64x64") == "skinny"


def test_the_tuner_is_offered_only_the_decode_tile_for_m() -> None:
    opts = SPEC.block_size_options(H200, "bf16", _shape(16, 8192, 8192))
    assert [t for t in opts if t in sm90_tiles.DECODE_TILES] == ["16x64"]
    assert [t for t in SPEC.block_size_options(H200, "bf16", _shape(3, 4096, 4096)) if t in sm90_tiles.DECODE_TILES] == ["8x64"]
    assert not [t for t in SPEC.block_size_options(H200, "bf16", _shape(60, 4096, 4096)) if t in sm90_tiles.DECODE_TILES]
    assert not [t for t in SPEC.block_size_options(H200, "bf16", _shape(4096, 4096, 4096))
                if t in sm90_tiles.DECODE_TILES]
    assert set(sm90_tiles.DECODE_TILES) <= set(SPEC.block_size_options(H200, "bf16", None))
    # a task may still name any of them
    task = SimpleNamespace(shape=_shape(16, 8192, 8192), dtype="bf16", block_size="24x64", memory_pipelining=8)
    assert sm90_planner.check(task, H200) == []


def test_a_decode_tile_is_lent_only_to_the_m_it_holds_in_one_row() -> None:
    # from a tuned 32 x 5120 (32x64) to M = 25..32 whatever the own default's path; not to M = 16
    # (a wider tile than needed) or M = 48 (two rows of tiles: W streamed twice)
    for m, ok in ((32, True), (25, True), (16, False), (48, False), (4096, False)):
        shape = _shape(m, 5120, 5120)
        own = SPEC.default_knobs(H200, "bf16", shape)[0]
        assert SPEC.same_family(H200, "bf16", shape, own, "32x64") is ok, (m, own)
    assert SPEC.same_family(H200, "bf16", _shape(16, 8192, 8192), "16x16", "16x64")


def test_every_decode_tile_compiles_without_spills() -> None:
    from kernels.nvrtc_check import compile_cubin

    for tile in sm90_tiles.DECODE_TILES:
        m = int(tile.split("x")[0])
        shape = _shape(m, 8192, 8192)
        deepest = max(sm90_smem.pipelining_options(H200, "bf16", tile, shape))
        for fuse in (True, False):
            b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype="bf16"), H200, tile, deepest, fuse=fuse)
            r = compile_cubin(b.source, "sm_90a", b.options)
            assert r.ok and not r.spills, (tile, fuse, r.log[-2000:])
            assert r.functions["gemm_residual_sm90"].registers <= 128, (tile, r.functions)


@pytest.mark.parametrize("shape, us", [
    ((16, 8192, 8192), 36.2), ((16, 5120, 5120), 17.9), ((16, 4096, 14336), 32.6), ((16, 28672, 4096), 63.4),
    ((48, 4096, 4096), 14.2), ((12, 5120, 13824), 39.8),
])
def test_simulated_decode_tiles_read_near_the_h200(shape: tuple[int, int, int], us: float) -> None:
    """The SIMULATED device's time for the default decode tile (the roofline over ``sim_efficiency``
    plus the fixed launch cost) within 15 % of what the engine's timer read on the H200 (ADR-0011)."""
    from engine.backends.sim import SIM_LAUNCH_MS
    from engine.profiles import load_profiles
    from engine.task import TaskSpec

    prof = load_profiles().get("h200")
    s = _shape(*shape)
    tile = sm90_tiles.decode_tile(s["m"])
    task = TaskSpec(shape=s, dtype="bf16", block_size=tile, memory_pipelining=sm90_defaults.default_stages(H200, "bf16", tile, s))
    t_roof_ms = SPEC.bytes_moved(s, "bf16") / prof.bandwidth_bytes_per_s * 1e3
    sim_us = (t_roof_ms / SPEC.sim_efficiency(task, H200) + SIM_LAUNCH_MS) * 1e3
    assert abs(sim_us / us - 1) < 0.15, (shape, sim_us, us)


def test_simulated_decode_tiles_rank_as_on_the_gpu() -> None:
    """Deeper rings up to the grid's need, more CTAs, and the decode tile over the decode path's 16x16 at
    16 x 8192 x 8192 (the H200's order)."""
    from engine.task import TaskSpec

    def eff(shape, bs, st):
        return SPEC.sim_efficiency(TaskSpec(shape=_shape(*shape), dtype="bf16", block_size=bs, memory_pipelining=st), H200)

    big = (16, 8192, 8192)
    assert eff(big, "16x64", 3) < eff(big, "16x64", 4) < eff(big, "16x64", 8)
    assert eff(big, "16x64", 8) > eff(big, "16x16", 6)
    assert eff((16, 1024, 8192), "16x64", 12) < eff((16, 8192, 8192), "16x64", 12)  # 16 CTAs pull less
    assert eff((16, 8192, 8192), "8x64", 8) < eff(big, "16x64", 8) / 1.5  # two rows of tiles: W twice


def test_the_tuners_prior_puts_a_starved_ring_last() -> None:
    """The prior (``predict_ms``) rates a decode tile's ring by the bytes it keeps in flight: the
    default depth ahead of 4, 3, 2 slots and pipelining off, in that order."""
    from engine.profiles import load_profiles
    from engine.task import TaskSpec

    prof = load_profiles().get("h200")

    def ms(st: int) -> float:
        task = TaskSpec(shape=_shape(16, 8192, 8192), dtype="bf16", block_size="16x64", memory_pipelining=st)
        return SPEC.predict_ms(task, H200, prof.sol_peak_flops("bf16"), prof.bandwidth_bytes_per_s)

    assert ms(8) == ms(22) < ms(4) < ms(3) < ms(2) < ms(0)
    assert 0.028 < ms(8) < 0.040  # W's 134 MB at the DRAM roofline, plus a launch


def test_a_swapped_tile_offers_only_the_schedule_choices_it_has() -> None:
    """Swapped tiles (the decode tiles among them) run cooperative, whole tiles: the tuner and the
    cockpit are offered cluster, multicast and raster only (a decode tile, whose W streams
    evict-first, no multicast of W: multicast=none only); the unswapped tiles keep every choice."""
    names = lambda bs, m: [k.name for k in SPEC.schedule_knobs(H200, "bf16", _shape(m, 8192, 8192), bs)]  # noqa: E731
    assert names("16x64", 16) == names(None, 16) == ["cluster", "multicast", "raster"]
    assert names("112x256", 6144) == ["cluster", "multicast", "raster"]
    assert names("128x128", 6144) == ["consumers", "cluster", "multicast", "raster", "split"]
    assert "warps" in names("16x16", 16)  # the decode path's own


@pytest.mark.parametrize("schedule, dtype, words", [
    ({"multicast": "none", "split": "streamk"}, "bf16", "data-parallel"),
    ({"multicast": "none", "split": "halves"}, "bf16", "data-parallel"),
    ({"multicast": "none"}, "fp32", "16-bit data"),
])
def test_pairs_a_build_cannot_take_are_a_violation_naming_the_schedule(schedule, dtype, words) -> None:
    from engine.task import TaskSpec

    task = TaskSpec(shape=_shape(1337, 2560, 2560), dtype=dtype, block_size="128x128", memory_pipelining=3,
                    schedule=schedule)
    (v,) = violations_of(SPEC, task, H200)
    assert v.field == "schedule" and "pairs (multicast=none)" in v.message and words in v.message, v


@pytest.mark.parametrize("size", [32, 512, -1])
def test_a_tensor_map_refuses_an_l2_promotion_the_driver_has_not(size: int) -> None:
    from engine.backends.tensormap import TensorMapError, encode_2d

    with pytest.raises(TensorMapError, match=f"l2_promotion={size}: must be 0, 64, 128 or 256"):
        encode_2d(0, "bf16", 64, 64, 64, 64, l2_promotion=size)
