"""Every valid knob combination of the Hopper gemm_residual path compiles for sm_90a through NVRTC
with no spills, honours setmaxnreg, and its SASS carries HGMMA (warpgroup MMA) and UTMALDG (TMA),
for both consumer schedules (cooperative, and ping-pong where it fits).
No GPU needed: NVRTC compiles to a cubin on a CPU-only machine. Skipped without CuPy's NVRTC;
the SASS part is skipped without cuobjdump (CUDA toolkit, or the nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import kernels.sm90.choices as sm90_choices
import kernels.sm90.codegen as sm90_codegen
import kernels.sm90.constants as sm90_constants
import kernels.sm90.defaults as sm90_defaults
import kernels.sm90.model as sm90_model
import kernels.sm90.planner as sm90_planner
import kernels.sm90.smem as sm90_smem
import kernels.sm90.tiles as sm90_tiles
from kernels.nvrtc_check import compile_cubin, complete_elf
from kernels.sm90 import constants
from kernels.spec import DeviceLimits, TensorMapArg, render_task
from tests.unit.compile_cover import covering, switch_values

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")

H200 = DeviceLimits(compute_capability=(9, 0), sm_count=132,
                    shared_memory_per_block_bytes=232448, shared_memory_per_sm_bytes=233472,
                    profile="h200")


def _combos() -> list[tuple[str, int, str, bool, bool, bool, int]]:
    """(tile, stages, dtype, fuse, streamk, pingpong, cluster)."""
    out: list[tuple[str, int, str, bool, bool, bool, int]] = []
    for dtype in sm90_tiles.DTYPES:
        for bs in sm90_smem.block_size_options(H200, dtype):
            for st in sm90_smem.pipelining_options(H200, dtype, bs):
                if bs in sm90_tiles.DECODE_TILES and st not in (0, 2, 8):  # the deepest below; constants only
                    continue
                out.append((bs, st, dtype, True, True, False, 1))
            deepest = max(sm90_smem.pipelining_options(H200, dtype, bs))
            out.append((bs, deepest, dtype, False, True, False, 1))
            out.append((bs, deepest, dtype, True, False, False, 1))  # purely data-parallel build
            if dtype in sm90_constants.CLUSTER_DTYPES and not sm90_tiles.swapped(bs):  # swapped: clusters no knob
                out.append((bs, deepest, dtype, True, False, False, 2))  # 2x1 cluster, multicast
                out.append((bs, 0, dtype, False, False, False, 2))
            pp = [st for st in sm90_smem.pipelining_options(H200, dtype, bs)
                  if sm90_smem.pingpong_fits(H200, bs, st, dtype)]
            for st in pp:
                out.append((bs, st, dtype, True, True, True, 1))
            if pp:
                out.append((bs, max(pp), dtype, False, True, True, 1))
                out.append((bs, max(pp), dtype, True, False, True, 1))
                if dtype in sm90_constants.CLUSTER_DTYPES:
                    out.append((bs, max(pp), dtype, True, False, True, 2))
    return out


COMBOS = _combos()


def _compile(source: str) -> tuple[str, bytes]:
    prog = nvrtc.createProgram(source, "gemm_residual_sm90.cu", [], [])
    try:
        nvrtc.compileProgram(prog, [*sm90_codegen.options(H200), "-Xptxas=-v"])
    except Exception as exc:  # noqa: BLE001 - NVRTCError carries the log separately
        pytest.fail(f"NVRTC failed: {exc}\n{nvrtc.getProgramLog(prog)}")
    log = nvrtc.getProgramLog(prog)
    cubin = nvrtc.getCUBIN(prog)
    return log, complete_elf(cubin)


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    candidates = [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "cuobjdump"]
    for p in sys.path:
        candidates.append(Path(p) / "nvidia" / "cu13" / "bin" / "cuobjdump")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def _combo_id(c: tuple) -> str:
    b, s, d, f, k, p, cl = c
    return f"{b}-s{s}-{d}-{'fused' if f else 'unfused'}{'' if k else '-dp'}{'-pp' if p else ''}{'-cl2' if cl > 1 else ''}"


def _combo_source(c: tuple) -> str:
    b, s, d, f, k, p, cl = c
    return sm90_codegen.render_source(b, s, d, f, streamk=k, pingpong=p, cluster=cl)


COVER = [b.combo for _, b in covering([(c[2], SimpleNamespace(source=_combo_source(c), combo=c)) for c in COMBOS],
                                      lambda dtype: dtype)]
"""The fast suite's share of COMBOS: per dtype, combinations chosen until every value of every
switch define of the generated source has been compiled (tests/unit/compile_cover.py)."""


def test_the_covering_set_takes_every_switch_value_of_the_sweep() -> None:
    every = switch_values([("", SimpleNamespace(source=_combo_source(c))) for c in COMBOS])
    assert switch_values([("", SimpleNamespace(source=_combo_source(c))) for c in COVER]) == every
    assert {c[2] for c in COVER} == {c[2] for c in COMBOS} and len(COVER) < len(COMBOS) / 4


@pytest.mark.parametrize("block_size,stages,dtype,fuse,streamk,pingpong,cluster", COVER,
                         ids=[_combo_id(c) for c in COVER])
def test_covering_set_compiles_without_spills(block_size: str, stages: int, dtype: str, fuse: bool,
                                              streamk: bool, pingpong: bool, cluster: int) -> None:
    _check_compiles((block_size, stages, dtype, fuse, streamk, pingpong, cluster))


@pytest.mark.slow
@pytest.mark.parametrize("block_size,stages,dtype,fuse,streamk,pingpong,cluster", COMBOS,
                         ids=[_combo_id(c) for c in COMBOS])
def test_compiles_without_spills(block_size: str, stages: int, dtype: str, fuse: bool,
                                 streamk: bool, pingpong: bool, cluster: int) -> None:
    _check_compiles((block_size, stages, dtype, fuse, streamk, pingpong, cluster))


def _check_compiles(combo: tuple) -> None:
    log, cubin = _compile(_combo_source(combo))
    assert cubin[:4] == b"\x7fELF"
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                        log)
    assert frames, log
    for frame, stores, loads in frames:
        assert (int(frame), int(stores), int(loads)) == (0, 0, 0), log
    assert "C7508" not in log, f"setmaxnreg ignored:\n{log}"
    assert "serialized" not in log.lower(), f"wgmma serialised:\n{log}"


SASS_CASES = ([(b, False, "bf16") for b in sm90_tiles.TILES] + [(b, True, "bf16") for b in sm90_tiles.PINGPONG_TILES]
              + [("128x128", False, "tf32"), ("128x128", True, "tf32"), ("128x128", False, "fp32")])


@pytest.mark.parametrize("block_size,pingpong,dtype", SASS_CASES,
                         ids=[f"{b}{'-pp' if p else ''}-{d}" for b, p, d in SASS_CASES])
def test_sass_has_hgmma_and_tma(block_size: str, pingpong: bool, dtype: str, tmp_path: Path) -> None:
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (CUDA toolkit or the nvidia-cuda-cuobjdump wheel)")
    deepest = max(st for st in sm90_smem.pipelining_options(H200, dtype, block_size)
                  if not pingpong or sm90_smem.pingpong_fits(H200, block_size, st, dtype))
    _, cubin = _compile(sm90_codegen.render_source(block_size, deepest, dtype, True, pingpong=pingpong))
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    env = dict(os.environ)
    env["PATH"] = str(Path(tool).parent) + os.pathsep + env.get("PATH", "")  # nvdisasm beside it
    proc = subprocess.run([tool, "--dump-sass", str(path)], capture_output=True, text=True,
                          env=env, timeout=120)
    if proc.returncode != 0 and "nvdisasm" in proc.stderr:
        pytest.skip("cuobjdump needs nvdisasm, not found")
    assert proc.returncode == 0, proc.stderr
    sass = proc.stdout
    bm, bn, consumers = sm90_tiles.parse_block_size(block_size)
    if sm90_tiles.swapped(block_size):  # the kernel's frame: C x R
        bm, bn = bn, bm
    # a consumer's rows and columns: split-N consumers own all rows of half the columns
    wg_m, wg_n = (bm, bn // consumers) if block_size in sm90_tiles.SPLIT_N_TILES else (bm // (1 if pingpong else consumers), bn)
    kind = r"x8\.F32\.TF32" if dtype in ("tf32", "fp32") else r"x16\.F32\.BF16"
    hgmma = re.findall(r"HGMMA\.64x(\d+)" + kind, sass)
    assert hgmma, "no HGMMA: the kernel is not on the warpgroup-MMA path"
    assert {int(n) for n in hgmma} == {wg_n}
    # one HGMMA per k16 step per 64-row slab of a consumer warpgroup (ping-pong: the whole tile)
    assert len(hgmma) == 4 * (wg_m // 64)  # 4 k-steps of 32 B
    assert "UTMALDG.2D" in sass
    assert "UTMASTG.2D" in sass
    # setmaxnreg moves registers from the producer to two consumer warpgroups; with one (64x80)
    # the 256 threads launch with enough
    assert ("USETMAXREG" in sass) == (consumers > 1)
    assert not re.search(r"\b(LDL|STL)\b", sass), "local-memory traffic in the SASS"


def test_options_and_smem_limits() -> None:
    assert sm90_smem.block_size_options(H200, "bf16") == ["128x256", "128x128", "256x128", "128x160",
                                                      "128x80", "64x80", "256x160", "128x320",
                                                      "128x144", "128x192", "128x208", *sm90_tiles.SWAP_TILES]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x208") == [0, 2, 3, 4]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x192") == [0, 2, 3, 4]
    assert sm90_smem.pingpong_fits(H200, "128x144", 4, "bf16") and not sm90_smem.pingpong_fits(H200, "128x192", 2, "bf16")
    assert sm90_smem.block_size_options(H200, "tf32") == ["128x256", "128x128", "256x128", "128x160"]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x320") == [0, 2]  # beside their 80 KB buffer
    assert sm90_smem.pipelining_options(H200, "bf16", "256x160") == [0, 2]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x160") == [0, 2, 3, 4, 5]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x256") == [0, 2, 3]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x128x64") == [0, 2, 3, 4, 5, 6]
    assert sm90_smem.smem_bytes("128x256", 3, "bf16") <= H200.shared_memory_per_block_bytes < sm90_smem.smem_bytes("128x256", 4, "bf16")
    assert sm90_smem.block_size_options(H200, "fp8") == []
    assert sm90_smem.block_size_options(H200, "fp32") == sm90_smem.block_size_options(H200, "tf32")
    assert not sm90_tiles.supported(H200, "fp8", {"m": 8, "n": 8, "k": 8})
    assert sm90_tiles.supported(H200, "fp32", {"m": 8, "n": 8, "k": 8})
    assert not sm90_tiles.supported(H200, "fp32", {"m": 8, "n": 8, "k": 12})
    assert sm90_tiles.supported(H200, "bf16", {"m": 7976, "n": 2560, "k": 2560})
    h100_like = DeviceLimits((8, 0), 108, 166912, 167936)
    assert not sm90_tiles.supported(h100_like, "bf16")


def test_pingpong_fits_and_choice() -> None:
    from types import SimpleNamespace

    # two 32 KB epilogue buffers leave 128x128 5 stages, one shared buffer all 6 (16-bit data);
    # 128x256 cannot (256 accumulators); tf32's two 64 KB fp32 buffers leave 3 and are not shared
    assert [st for st in sm90_smem.pipelining_options(H200, "bf16", "128x128")
            if sm90_smem.pingpong_fits(H200, "128x128", st, "bf16")] == [0, 2, 3, 4, 5, 6]
    assert [st for st in sm90_smem.pipelining_options(H200, "tf32", "128x128")
            if sm90_smem.pingpong_fits(H200, "128x128", st, "tf32")] == [0, 2, 3]
    assert not any(sm90_smem.pingpong_fits(H200, b, 2, "bf16") for b in ("128x256", "256x128"))
    # 128x160: 160 accumulators per thread, two 40 KB buffers leave 4 of its 5 stages, one shared
    # buffer all 5; tf32's 80 KB fp32 buffers leave it none that pipelines
    assert [st for st in sm90_smem.pipelining_options(H200, "bf16", "128x160")
            if sm90_smem.pingpong_fits(H200, "128x160", st, "bf16")] == [0, 2, 3, 4, 5]
    assert not sm90_smem.pingpong_fits(H200, "128x160", 2, "tf32")
    assert (sm90_smem.smem_bytes("128x128", 5, "bf16", True)
            == sm90_smem.smem_bytes("128x128", 5, "bf16") + 128 * 128 * 2 + 2 * sm90_smem.BARRIER_BYTES)
    with pytest.raises(ValueError):
        sm90_constants.defines("128x256", 3, "bf16", True, pingpong=True)
    task = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
    with pytest.raises(ValueError):
        sm90_codegen.build(task, H200, "128x128", 7, pingpong=True)
    with pytest.raises(ValueError):
        sm90_codegen.build(task, H200, "128x128", 6, pingpong=True, epi_shared=False)
    forced = sm90_codegen.build(task, H200, "128x128", 5, pingpong=True)
    assert "#define PINGPONG 1" in forced.source
    assert forced.launches[0].shared_mem_bytes == sm90_smem.smem_bytes("128x128", 5, "bf16", True)
    assert forced.info["consumers"].startswith("ping-pong")
    assert sm90_choices.use_pingpong(H200, "128x128", 4, "bf16")
    assert not sm90_choices.use_pingpong(H200, "128x128", 0, "bf16")  # off: no overlap at all
    assert not sm90_choices.use_pingpong(H200, "128x128", 4, "tf32")  # does not fit
    assert not sm90_choices.use_pingpong(H200, "128x256", 3, "bf16")
    assert sm90_choices.use_pingpong(H200, "128x160", 4, "bf16", task.shape)  # 1024 tiles
    assert sm90_choices.use_pingpong(H200, "128x160", 5, "bf16", task.shape)  # shared buffer
    b = sm90_codegen.build(task, H200, "128x128", 4)  # 1280 tiles: >= 2 per CTA
    assert "#define PINGPONG 1" in b.source
    assert b.launches[0].shared_mem_bytes == sm90_smem.smem_bytes("128x128", 4, "bf16", True)
    coop = sm90_codegen.build(task, H200, "128x128", 4, pingpong=False)  # the experiment's choice
    assert "#define PINGPONG 0" in coop.source
    assert coop.launches[0].shared_mem_bytes == sm90_smem.smem_bytes("128x128", 4, "bf16", False)


def test_shared_epilogue_buffer() -> None:
    """Ping-pong at a stage count two epilogue buffers leave no room for shares one between its
    consumers (16-bit data): the engine's choice exactly there, reported, compiled in as
    EPI_SHARED, stream-K schedules included; the seed's default stays at 5 stages beside two
    buffers (the deeper ring a shared buffer buys measured slower: ADR-0007)."""
    from types import SimpleNamespace

    tile = 128 * 128 * 2
    assert (sm90_smem.smem_bytes("128x128", 6, "bf16", True, epi_shared=True)
            == sm90_smem.smem_bytes("128x128", 6, "bf16", True) - tile
            <= H200.shared_memory_per_block_bytes < sm90_smem.smem_bytes("128x128", 6, "bf16", True))
    assert sm90_smem.epi_shared_needed(H200, "128x128", 6, "fp16")
    assert sm90_smem.epi_shared_needed(H200, "128x160", 5, "bf16")
    assert not sm90_smem.epi_shared_needed(H200, "128x128", 5, "bf16")  # two buffers fit
    assert not sm90_smem.epi_shared_needed(H200, "128x128", 7, "bf16")  # one does not either
    assert not sm90_smem.epi_shared_needed(H200, "128x128", 4, "tf32")  # not run on the GPU
    assert not sm90_smem.epi_shared_needed(H200, "128x256", 3, "bf16")  # no ping-pong tile
    task = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
    b = sm90_codegen.build(task, H200, "128x128", 6)
    assert "#define EPI_SHARED 1" in b.source and "#define PINGPONG 1" in b.source
    assert b.launches[0].shared_mem_bytes == sm90_smem.smem_bytes("128x128", 6, "bf16", True, epi_shared=True)
    assert b.info["epilogue_tile"] == "one buffer shared by both consumers"
    assert b.info["cluster"].startswith("2x1")
    five = sm90_codegen.build(task, H200, "128x128", 5)
    assert "#define EPI_SHARED 1" not in five.source and five.info["epilogue_tile"] == "own buffer"
    sk = sm90_codegen.build(SimpleNamespace(shape={"m": 2194, "n": 2560, "k": 2560}, dtype="fp16"), H200,
                    "128x160", 5)
    assert "#define EPI_SHARED 1" in sk.source and "#define STREAMK 1" in sk.source
    assert sk.info["schedule"].startswith("stream-K")
    with pytest.raises(ValueError):
        sm90_constants.defines("128x128", 6, "bf16", True, pingpong=False, epi_shared=True)
    # measured slower than two buffers at 5 stages (ADR-0007): not the default
    assert sm90_defaults.default_knobs(H200, "bf16", task.shape) == ("128x128", 5)


def test_cluster_build() -> None:
    """2x1 clusters: W's TMA box is half the tile (each CTA multicasts its half), the grid is whole
    clusters of whole tile pairs, data-parallel only; refused with stream-K or other sizes."""
    from types import SimpleNamespace

    from kernels.spec import TensorMapArg

    task = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
    assert sm90_choices.use_cluster(H200, "128x256", 3, "bf16", task.shape) == 1  # cooperative: off by default
    b = sm90_codegen.build(task, H200, "128x256", 3, cluster=2)
    assert "#define CLUSTER 2" in b.source and "#define STREAMK 0" in b.source
    (launch,) = b.launches
    w = [a for a in launch.args if isinstance(a, TensorMapArg)][1]
    assert (w.buffer, w.box_rows) == ("w", 128)
    assert launch.grid == (132, 1, 1) and launch.args[-1] == 640  # 320 pairs on 66 clusters
    assert b.info["cluster"].startswith("2x1")
    small = sm90_codegen.build(SimpleNamespace(shape={"m": 300, "n": 256, "k": 64}, dtype="fp16"),
                       H200, "128x256", 2, cluster=2)
    assert small.launches[0].grid == (4, 1, 1)  # 3 row tiles -> 2 pairs x 1 column: 2 clusters
    forced = sm90_codegen.build(task, H200, "128x256", 3, cluster=2, schedule=(7, 0))
    assert forced.launches[0].grid == (6, 1, 1)  # whole clusters only
    with pytest.raises(ValueError):
        sm90_constants.defines("128x256", 3, "bf16", True, streamk=True, cluster=2)
    with pytest.raises(ValueError):
        sm90_constants.defines("128x256", 3, "bf16", True, streamk=False, cluster=4)


def test_cluster_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster is 1 or 2 CTAs along M (the pair (2, 1) as 2; W's box is each CTA's share of its
    rows, whole 8-row swizzle atoms) or 2 along N ((1, 2): A's box is half the tile's rows, the
    schedule tiles pairs of N blocks); any other shape is refused, and so is A multicast with
    fp32-class data or a decode tile's streamed W."""
    from types import SimpleNamespace

    from kernels.spec import TensorMapArg

    task = SimpleNamespace(shape={"m": 256, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
    b = sm90_codegen.build(task, H200, "64x80", 8, cluster=(2, 1))
    assert "#define CLUSTER 2" in b.source and "#define CLUSTER_N 1" not in b.source
    a, w = [x for x in b.launches[0].args if isinstance(x, TensorMapArg)][:2]
    assert (a.buffer, a.box_rows, w.box_rows) == ("a", 64, 40)
    assert b.info["cluster"] == "2x1, W multicast"
    assert sm90_codegen.build(task, H200, "64x80", 8, cluster=2).source == b.source
    assert sm90_tiles.cluster_shape(2) == (2, 1) and sm90_tiles.cluster_shape((1, 1)) == (1, 1)
    # every tile offered today splits into whole atoms; a 2 x 44-row W share would not
    monkeypatch.setattr(constants, "parse_block_size", lambda bs, dtype=None: (64, 88, 1))
    with pytest.raises(ValueError, match="multiple of 8 rows"):
        sm90_constants.defines("64x88", 8, "bf16", True, streamk=False, cluster=(2, 1))
    monkeypatch.undo()
    for bad in ((2, 2), (1, 4), (3, 1), (0, 1), 4):
        with pytest.raises(ValueError, match="cluster"):
            sm90_constants.defines("128x128", 4, "bf16", True, streamk=False, cluster=bad)
    nb = sm90_codegen.build(task, H200, "64x80", 8, cluster=(1, 2))
    assert "#define CLUSTER 2" in nb.source and "#define CLUSTER_N 1" in nb.source
    a, w = [x for x in nb.launches[0].args if isinstance(x, TensorMapArg)][:2]
    assert (a.box_rows, w.box_rows) == (32, 80)
    assert nb.info["cluster"] == "1x2, A multicast"
    assert nb.launches[0].grid == (128, 1, 1)  # 4 M blocks x 16 pairs of N blocks: 64 clusters
    with pytest.raises(ValueError, match="16-bit"):
        sm90_constants.defines("128x128", 4, "tf32", True, streamk=False, cluster=(1, 2))
    with pytest.raises(ValueError, match="decode tile"):
        sm90_constants.defines("16x64", 8, "bf16", True, streamk=False, cluster=(1, 2))


def test_tf32_build_and_routing() -> None:
    """tf32 on the Hopper path: fp32 data, BK 32 (one 128-byte row), wgmma .tf32, fp32 epilogue
    buffer (so 128x256 fits 2 stages and is not a default), fp32 residual add when unfused; the
    auto spec routes tf32 here on 9.0 and to the portable mma.sync path elsewhere."""
    from types import SimpleNamespace

    from kernels.gemm_residual_auto import SPEC as AUTO
    from kernels.spec import TensorMapArg

    assert sm90_tiles.bk_of("tf32") == 32 and sm90_tiles.bk_of("bf16") == sm90_tiles.BK == 64
    assert sm90_tiles.parse_block_size("128x128x32", "tf32") == (128, 128, 2)
    with pytest.raises(ValueError, match="BK = 32"):
        sm90_tiles.parse_block_size("128x128x64", "tf32")
    bad = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype="tf32",
                          block_size="128x128x64", memory_pipelining=5)
    (v,) = sm90_planner.check(bad, H200)
    assert v.field == "block_size" and "BK = 32" in v.message
    assert sm90_smem.pipelining_options(H200, "tf32", "128x256") == [0, 2]
    assert sm90_smem.pipelining_options(H200, "tf32", "128x128") == [0, 2, 3, 4, 5]
    assert sm90_smem.smem_bytes("128x128", 5, "tf32") == 5 * 256 * 128 + 128 * 128 * 4 + 7 * 16 + 1024
    shape = {"m": 8192, "n": 2560, "k": 2560}
    # ping-pong fits only 3 stages beside two fp32 buffers: cooperative 128x128 with 5 instead
    assert sm90_smem.pingpong_fits(H200, "128x128", 3, "tf32")
    assert not sm90_choices.use_pingpong(H200, "128x128", 3, "tf32", shape)
    assert sm90_defaults.default_knobs(H200, "tf32") == ("128x128", 5)
    assert sm90_defaults.default_knobs(H200, "tf32", shape) == ("128x128", 5)
    assert not sm90_choices.use_pingpong(H200, "128x128", 5, "tf32", shape)  # does not fit
    task = SimpleNamespace(shape=shape, dtype="tf32", fusion=False)
    b = sm90_codegen.build(task, H200, "128x128", 5, pingpong=False)
    assert "#define DT 2" in b.source and "#define BK 32" in b.source
    maps = [a for a in b.launches[0].args if isinstance(a, TensorMapArg)]
    assert {m.box_cols for m in maps} == {32}
    assert [ln.function for ln in b.launches] == ["gemm_residual_sm90", "residual_add_inplace_f32"]
    assert b.info["tile"] == "128x128x32"
    # 80 k-blocks of 32: the schedule sees tf32's K as 2x a 16-bit K
    assert sm90_model.plan_schedule(8192, 2560, 5120, "128x128", 132) == (b.launches[0].grid[0],
                                                                    b.launches[0].args[-1])
    assert [v.field for v in sm90_planner.check(SimpleNamespace(shape=shape, dtype="tf32",
                                                        block_size="128x256",
                                                        memory_pipelining=3), H200)] \
        == ["memory_pipelining"]
    assert render_task(AUTO, _auto_task("tf32"), H200).info["path"].startswith("wgmma")
    a100 = DeviceLimits((8, 0), 108, 166912, 167936, profile="a100")
    assert render_task(AUTO, _auto_task("tf32"), a100).info["path"] == "mma.sync.tf32+cp.async"


def test_fp32_3xtf32_build_and_routing() -> None:
    """fp32 on the Hopper path: tf32_split into scratch buffers, then the GEMM with two more maps
    (a_lo, w_lo) over 3x the k-blocks; with split_hi the high parts are written too and the maps
    read them. Clusters are refused. The auto spec routes fp32 here on 9.0 (info names 3xTF32) and
    to the FFMA kernel elsewhere; gemm_residual_mma keeps FFMA on Hopper."""
    from types import SimpleNamespace

    from kernels.gemm_residual_auto import PORTABLE_SPEC
    from kernels.gemm_residual_auto import SPEC as AUTO
    from kernels.spec import TensorMapArg

    shape = {"m": 8192, "n": 2560, "k": 2560}
    assert sm90_tiles.supported(H200, "fp32", shape) and sm90_tiles.bk_of("fp32") == 32
    assert sm90_defaults.default_knobs(H200, "fp32", shape) == sm90_defaults.default_knobs(H200, "tf32", shape)
    task = SimpleNamespace(shape=shape, dtype="fp32", fusion=True)
    b = sm90_codegen.build(task, H200, "128x128", 5)
    assert "#define DT 3" in b.source and "#define SPLIT_HI 0" in b.source
    assert f"#define PROMOTE {sm90_constants.PROMOTE_K_BLOCKS}" in b.source  # cooperative 128x128: fits
    assert "#define PROMOTE 0" in sm90_codegen.build(task, H200, "128x128", 3, pingpong=True).source
    assert "#define PROMOTE 0" in sm90_codegen.build(task, H200, "128x256", 2).source
    with pytest.raises(ValueError, match="promote"):
        sm90_codegen.build(task, H200, "128x256", 2, promote=1)
    assert "PROMOTE" not in sm90_constants.defines("128x128", 5, "tf32", True)
    assert [ln.function for ln in b.launches] == ["tf32_split", "gemm_residual_sm90"]
    split, gemm = b.launches
    assert split.args == ("a", "a", "a_lo", 8192 * 2560 // 4, "w", "w", "w_lo", 2560 * 2560 // 4)
    maps = [a for a in gemm.args if isinstance(a, TensorMapArg)]
    assert [m.buffer for m in maps] == ["a", "w", "r", "out", "r", "out", "a_lo", "w_lo"]
    assert maps[6].box_rows == 128 and maps[7].box_rows == 128 and maps[6].box_cols == 32
    assert [(x.name, x.shape, x.role) for x in b.scratch] == [
        ("a_lo", (8192, 2560), "scratch"), ("w_lo", (2560, 2560), "scratch")]
    assert "3xTF32" in b.info["math"]
    # the schedule counts three products: 3 x 80 k-blocks of 32
    assert sm90_model.plan_schedule(8192, 2560, 3 * 5120, "128x128", 132) == (gemm.grid[0], gemm.args[-1])
    hi = sm90_codegen.build(task, H200, "128x128", 5, split_hi=True)
    assert "#define SPLIT_HI 1" in hi.source
    assert hi.launches[0].args[1] == "a_hi" and hi.launches[0].args[5] == "w_hi"
    assert [m.buffer for m in hi.launches[1].args if isinstance(m, TensorMapArg)][:2] == ["a_hi", "w_hi"]
    assert {x.name for x in hi.scratch} == {"a_lo", "w_lo", "a_hi", "w_hi"}
    with pytest.raises(ValueError, match="cluster"):
        sm90_codegen.build(task, H200, "128x256", 2, streamk=False, cluster=2)
    assert sm90_choices.use_cluster(H200, "128x128", 5, "fp32", shape) == 1
    # tf32 keeps its single product and no split
    assert [ln.function for ln in sm90_codegen.build(SimpleNamespace(shape=shape, dtype="tf32"), H200,
                                             "128x128", 5).launches] == ["gemm_residual_sm90"]
    log, _ = _compile(hi.source)
    assert "0 bytes spill stores" in log and " 0 bytes spill loads" in log
    assert "bytes spill stores" not in log.replace("0 bytes spill stores", "")
    auto = render_task(AUTO, _auto_task("fp32"), H200)
    assert auto.info["path"].startswith("wgmma") and "3xTF32" in auto.info["math"]
    assert [x.name for x in auto.scratch] == ["a_lo", "w_lo"]
    a100 = DeviceLimits((8, 0), 108, 166912, 167936, profile="a100")
    assert render_task(AUTO, _auto_task("fp32", "128x64"), a100).functions == ("gemm_residual_fp32",)
    assert render_task(PORTABLE_SPEC, _auto_task("fp32", "128x64"), H200).functions == ("gemm_residual_fp32",)


def _auto_task(dtype: str, block_size: str = "128x128"):
    from engine.task import TaskSpec

    return TaskSpec(kernel="gemm_residual", dtype=dtype, shape={"m": 1024, "n": 256, "k": 512},
                    block_size=block_size, memory_pipelining=4)


def test_check_names_the_field() -> None:
    from types import SimpleNamespace

    ok = SimpleNamespace(shape={"m": 1571, "n": 2560, "k": 2560}, dtype="bf16",
                         block_size="128x256", memory_pipelining=3)
    assert sm90_planner.check(ok, H200) == []
    too_deep = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype="bf16",
                               block_size="128x256", memory_pipelining=5)
    assert [v.field for v in sm90_planner.check(too_deep, H200)] == ["memory_pipelining"]
    odd = SimpleNamespace(shape={"m": 5, "n": 2564, "k": 2560}, dtype="bf16",
                          block_size="128x128", memory_pipelining=0)
    assert [v.field for v in sm90_planner.check(odd, H200)] == ["shape.n"]
    wrong_tile = SimpleNamespace(shape={"m": 5, "n": 256, "k": 256}, dtype="bf16",
                                 block_size="64x64", memory_pipelining=2)
    assert [v.field for v in sm90_planner.check(wrong_tile, H200)] == ["block_size"]


def test_default_knobs_and_build_plan() -> None:
    from types import SimpleNamespace

    from kernels.spec import TensorMapArg

    assert sm90_defaults.default_knobs(H200, "bf16") == ("128x256", 3)
    def knobs(m: int) -> tuple[str, int]:
        return sm90_defaults.default_knobs(H200, "bf16", {"m": m, "n": 2560, "k": 2560})

    # one tile per CTA: the epilogue tile staged in the ring buys one stage more (ADR-0007)
    assert knobs(1571) == ("128x256", 4)
    # 128x160 where its tiles fill one or two waves (N = 2560 = 16 x 160: 128 and 256 tiles)
    assert knobs(1024) == ("128x160", 6) and knobs(2048) == ("128x160", 5)
    assert sm90_defaults.default_knobs(H200, "bf16", {"m": 1024, "n": 2560 + 64, "k": 2560})[0] != "128x160"
    assert sm90_defaults.default_knobs(H200, "tf32", {"m": 1024, "n": 2560, "k": 2560})[0] != "128x160"
    # 128x256 leaves too few tiles: the half tile, 4 stages (cooperative); ping-pong 128x128 with
    # 5 stages wherever every CTA gets >= 2 of its tiles (the seed shape included)
    # the narrow tiles where they fit one wave with the whole K per CTA (N = 2560 = 32 x 80):
    # 64x80 up to M = 256 (128 tiles), then 128x80 up to M = 512; 16-bit data only
    assert knobs(1) == ("8x64", 12) and knobs(56) == ("56x64", 12)  # decode tiles (ADR-0011)
    assert knobs(57) == ("64x80", 8)  # stream-K there: the epilogue keeps its own buffer
    assert knobs(256) == ("64x80", 12)
    assert knobs(257) == knobs(384) == knobs(512) == ("128x80", 8)
    assert knobs(513)[0] not in sm90_tiles.NARROW_TILES
    assert sm90_defaults.default_knobs(H200, "fp16", {"m": 256, "n": 2560, "k": 2560}) == ("64x80", 12)
    for dt in ("tf32", "fp32"):
        assert sm90_defaults.default_knobs(H200, dt, {"m": 256, "n": 2560, "k": 2560})[0] not in sm90_tiles.NARROW_TILES
    assert sm90_defaults.default_knobs(H200, "bf16", {"m": 256, "n": 8192, "k": 2560})[0] not in sm90_tiles.NARROW_TILES
    with pytest.raises(ValueError, match="16-bit"):
        sm90_tiles.parse_block_size("64x80", "tf32")
    assert sm90_defaults.default_knobs(H200, "bf16", {"m": 256, "n": 2560 + 64, "k": 2560})[0] == "64x80"  # 132 tiles
    assert sm90_defaults.default_knobs(H200, "bf16", {"m": 640, "n": 2560, "k": 2560})[0] not in sm90_tiles.NARROW_TILES
    # ping-pong 128x128: 5 stages beside two epilogue buffers, 6 with one shared
    assert knobs(4096) == knobs(7976) == knobs(8192) == ("128x128", 5)
    for m, pp in ((256, False), (512, False), (2048, True), (4096, True), (8192, True)):
        task = SimpleNamespace(shape={"m": m, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
        assert sm90_choices.use_pingpong(H200, "128x128", 5, "bf16", task.shape) is pp
        built = sm90_codegen.build(task, H200, "128x128", 5)
        assert (f"#define PINGPONG {int(pp)}" in built.source)
    task = SimpleNamespace(shape={"m": 7976, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
    b = sm90_codegen.build(task, H200, "128x256", 3)
    (launch,) = b.launches
    assert launch.grid == (132, 1, 1) and launch.block == (384, 1, 1)
    assert launch.shared_mem_bytes == sm90_smem.smem_bytes("128x256", 3, "bf16")
    maps = [a for a in launch.args if isinstance(a, TensorMapArg)]
    # a, w, r, out and the epilogue tail chunk's r and out maps (the same maps when BN % 64 == 0)
    assert [m.buffer for m in maps] == ["a", "w", "r", "out", "r", "out"]
    assert maps[4] == maps[2] and maps[5] == maps[3]
    t160 = sm90_codegen.build(task, H200, "128x160", 5).launches[0]
    tail = [a for a in t160.args if isinstance(a, TensorMapArg)][4:]
    assert [(a.buffer, a.box_cols, a.swizzle_bytes) for a in tail] == [("r", 32, 64), ("out", 32, 64)]
    # (1008 tiles: ping-pong, its two consumers sharing one epilogue buffer)
    assert (t160.shared_mem_bytes == sm90_smem.smem_bytes("128x160", 5, "bf16", True, epi_shared=True)
            <= H200.shared_memory_per_block_bytes)
    # the narrow tile's 16-column tail: 32-byte rows, 32B swizzle (the kernel's layout for it)
    t80 = sm90_codegen.build(task, H200, "64x80", 11).launches[0]
    tail = [a for a in t80.args if isinstance(a, TensorMapArg)][4:]
    assert [(a.buffer, a.box_rows, a.box_cols, a.swizzle_bytes) for a in tail] == [("r", 64, 16, 32),
                                                                                   ("out", 64, 16, 32)]
    assert t80.block == (256, 1, 1) and t80.shared_mem_bytes <= H200.shared_memory_per_block_bytes
    # 630 tiles: 4.8 waves, data-parallel (dp_tiles = all tiles)
    assert launch.args[-4:] == (7976, 2560, 2560, 630)
    assert "#define STREAMK 0" in b.source  # nothing split: the data-parallel kernel
    unfused = sm90_codegen.build(task, H200, "128x256", 0, fuse=False)
    assert [x.function for x in unfused.launches] == ["gemm_residual_sm90", "residual_add_inplace"]
    assert "#define STAGES 1" in unfused.source and "#define FUSE 0" in unfused.source


def test_schedule_plans_stream_k_for_bad_waves() -> None:
    """Few tiles or a short last wave: the tail's k-iterations are spread over the grid."""
    from types import SimpleNamespace

    def plan(m: int) -> tuple[int, int]:
        task = SimpleNamespace(shape={"m": m, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
        (launch,) = sm90_codegen.build(task, H200, "128x256", 3).launches
        return launch.grid[0], launch.args[-1]

    assert plan(256) == (120, 0)  # 20 tiles: all stream-K, 6 CTAs per tile
    assert plan(2048) == (132, 132)  # 160 tiles: 1 wave data-parallel, 28 tiles stream-K
    assert plan(1571) == (130, 130)  # 130 tiles: one full wave, data-parallel
    assert plan(8192) == (132, 640)  # 4.85 waves: stream-K would not pay for its fixups
    for m in (1, 256, 586, 2048, 4096, 8192):
        for bs in sm90_tiles.TILES:
            bm, bn, _ = sm90_tiles.parse_block_size(bs)
            for grid, dp in sm90_model.schedule_candidates(m, 2560, 2560, bm, bn, 132):
                assert 1 <= grid <= 132 and 0 <= dp
                assert -(-m // bm) * (2560 // bn) - min(dp, -(-m // bm) * (2560 // bn)) <= sm90_model.WS_TILES
    # a plan that splits nothing compiles the data-parallel kernel (the stream-K code measured 4 %
    # slower even unused at small M); an explicit streamk=True keeps it compiled in
    t1571 = SimpleNamespace(shape={"m": 1571, "n": 2560, "k": 2560}, dtype="bf16")
    assert "#define STREAMK 0" in sm90_codegen.build(t1571, H200, "128x256", 3).source
    assert "#define STREAMK 1" in sm90_codegen.build(t1571, H200, "128x256", 3, streamk=True).source
    assert "#define STREAMK 1" in sm90_codegen.build(SimpleNamespace(shape={"m": 2048, "n": 2560, "k": 2560},
                                                             dtype="bf16"), H200, "128x256", 3).source
    # 16-bit data only: fp32 and tf32 keep the stream-K code (fp32 measured slower without it)
    for dt in ("fp32", "tf32"):
        seed = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype=dt)
        b32 = sm90_codegen.build(seed, H200, "128x128", 5)
        assert b32.info["schedule"] == "data-parallel" and "#define STREAMK 1" in b32.source
    dp_only = sm90_codegen.build(SimpleNamespace(shape={"m": 256, "n": 2560, "k": 2560}, dtype="bf16"),
                         H200, "128x256", 3, streamk=False)
    assert "#define STREAMK 0" in dp_only.source
    assert dp_only.launches[0].grid == (20, 1, 1) and dp_only.launches[0].args[-1] == 20


def test_cluster_default_is_pingpong_128x128_in_16_bit_only() -> None:
    """2x1 clusters by default only where measured faster (rested, H200): ping-pong 128x128 in bf16
    and fp16 with enough tiles; cooperative tiles, 128x160, tf32, fp32 and small M stay unclustered."""
    from types import SimpleNamespace

    seed = {"m": 8192, "n": 2560, "k": 2560}
    for dt in ("bf16", "fp16"):
        bs, st = sm90_defaults.default_knobs(H200, dt, seed)
        assert bs == "128x128" and st == 5
        assert sm90_choices.use_cluster(H200, "128x128", 5, dt, seed) == 2
        assert sm90_choices.use_cluster(H200, "128x128", 6, dt, seed) == 2
        b = sm90_codegen.build(SimpleNamespace(shape=seed, dtype=dt, fusion=True), H200, "128x128", 5)
        assert "#define CLUSTER 2" in b.source and "#define PINGPONG 1" in b.source
        assert b.launches[0].grid[0] % 2 == 0
    assert sm90_choices.use_cluster(H200, "128x128", 5, "bf16", {"m": 7976, "n": 2560, "k": 2560}) == 2
    assert sm90_choices.use_cluster(H200, "128x128", 5, "tf32", seed) == 1
    assert sm90_choices.use_cluster(H200, "128x128", 5, "fp32", seed) == 1
    assert sm90_choices.use_cluster(H200, "128x160", 4, "bf16", seed) == 1
    assert sm90_choices.use_cluster(H200, "128x256", 3, "bf16", seed) == 1
    assert sm90_choices.use_cluster(H200, "128x128", 0, "bf16", seed) == 1  # pipelining off: no ping-pong
    for m in (256, 512, 1024, 2048):  # too few tiles for ping-pong (or defaults elsewhere)
        bs, st = sm90_defaults.default_knobs(H200, "bf16", {"m": m, "n": 2560, "k": 2560})
        assert sm90_choices.use_cluster(H200, bs, st, "bf16", {"m": m, "n": 2560, "k": 2560}) == 1, m


def test_narrow_tile_with_fp32_data_is_refused_with_the_dtypes_tiles() -> None:
    """BLOCK_SIZE=64x80 with tf32/fp32 data: a block_size violation that says 16-bit only and offers
    the tiles that dtype takes (not the narrow ones)."""
    from types import SimpleNamespace

    for dt in ("tf32", "fp32"):
        task = SimpleNamespace(shape={"m": 256, "n": 2560, "k": 2560}, dtype=dt, block_size="64x80",
                               memory_pipelining=4)
        (v,) = [v for v in sm90_planner.check(task, H200) if v.field == "block_size"]
        assert "16-bit" in v.message and "64x80" not in v.limit and "128x128" in v.limit
    ok = SimpleNamespace(shape={"m": 256, "n": 2560, "k": 2560}, dtype="fp16", block_size="64x80",
                         memory_pipelining=11)
    assert sm90_planner.check(ok, H200) == []


def test_stage_count_past_the_deepest_ring_is_refused_naming_the_knob() -> None:
    """MEMORY_PIPELINING past ``MAX_STAGES`` (or 1): a memory_pipelining violation naming the range,
    before any shared-memory arithmetic; 11 stages of the 64x80 tile fit."""
    from types import SimpleNamespace

    for stages in (1, sm90_smem.MAX_STAGES + 1, -2):
        task = SimpleNamespace(shape={"m": 256, "n": 2560, "k": 2560}, dtype="bf16", block_size="64x80",
                               memory_pipelining=stages)
        (v,) = sm90_planner.check(task, H200)
        assert v.field == "memory_pipelining" and f"2..{sm90_smem.MAX_STAGES}" in v.message, v
    assert max(sm90_smem.pipelining_options(H200, "bf16", "64x80")) == 11


def test_tile_order_m_fastest_for_one_wave_narrow_and_128x160_grouped_for_two_waves() -> None:
    """``build`` numbers the tiles M-fastest (RASTER_M) exactly where a 16-bit narrow or 128x160
    tile's tiles all run in one data-parallel wave without a cluster (N = K = 2560: M = 256, 512,
    1024, and odd shapes such as 77x2000x1000); in groups of 4 M blocks (RASTER_GROUP) where
    cooperative 128x160 takes a second data-parallel wave (M = 2048, and 1800 with those knobs: a
    last group of 3);
    N-fastest elsewhere: the seed's clustered ping-pong, 128x256 in one wave (M = 1571), a narrow
    tile in two waves or under stream-K (M = 57), a forced cluster, tf32; and an explicit
    ``raster_m`` or ``raster_group`` wins. The new orders compile without spills."""
    from types import SimpleNamespace

    def info(m, n, k, dtype="bf16", **kw):
        shape = {"m": m, "n": n, "k": k}
        bs, st = kw.pop("knobs", None) or sm90_defaults.default_knobs(H200, dtype, shape)
        b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dtype), H200, bs, st, **kw)
        assert ("#define RASTER_M 1" in b.source) == (b.info["tile_order"] == "M-fastest")
        assert ("#define RASTER_GROUP 4" in b.source) == (b.info["tile_order"] == "groups of 4 M blocks")
        return b

    for m, n, k in ((256, 2560, 2560), (512, 2560, 2560), (333, 2560, 2560), (77, 2000, 1000),
                    (1024, 2560, 2560)):
        for dt in ("bf16", "fp16"):
            b = info(m, n, k, dt)
            assert b.info["tile_order"] == "M-fastest", (m, dt)
            assert b.info["tile"][:-3] in sm90_choices.RASTER_M_TILES, (m, dt)
            if (m, dt) in ((256, "bf16"), (512, "fp16"), (1024, "bf16")):
                log, elf = _compile(b.source)
                assert elf and not re.search(r"[1-9]\d* bytes spill", log), log
    for m, n, k in ((2048, 2560, 2560), (1800, 2560, 2560), (2047, 2560, 1000)):
        for dt in ("bf16", "fp16"):
            b = info(m, n, k, dt, knobs=("128x160", 5) if m == 1800 else None)  # 1800: swapped default
            assert b.info["tile_order"] == "groups of 4 M blocks", (m, dt)
            assert b.info["tile"] == "128x160x64" and b.info["schedule"] == "data-parallel"
            if (m, dt) == (1800, "fp16"):
                log, elf = _compile(b.source)
                assert elf and not re.search(r"[1-9]\d* bytes spill", log), log
    for m in (57, 1571, 4096, 8192):
        assert info(m, 2560, 2560).info["tile_order"] == "N-fastest", m
    assert info(1024, 2560, 2560, "tf32").info["tile_order"] == "N-fastest"
    assert info(4096, 2560, 2560, knobs=("64x80", 8)).info["tile_order"] == "N-fastest"  # 5 waves
    assert info(4096, 2560, 2560, knobs=("128x160", 5)).info["tile_order"] == "N-fastest"  # 3.9 waves
    assert info(256, 2560, 2560, cluster=2).info["tile_order"] == "N-fastest"
    assert info(256, 2560, 2560, raster_m=False).info["tile_order"] == "N-fastest"
    assert info(2048, 2560, 2560, raster_m=True).info["tile_order"] == "M-fastest"
    assert info(2048, 2560, 2560, raster_group=0).info["tile_order"] == "N-fastest"
    assert info(8192, 2560, 2560, raster_group=2).info["tile_order"] == "groups of 2 M blocks"
    assert info(8192, 2560, 2560, raster_m=True).info["tile_order"] == "M-fastest"


def test_epi_ring_measurement_option() -> None:
    """``build(epi_ring=True)`` stages the epilogue tile in the ring's freed slots: no epilogue
    buffer in the shared-memory budget (128x256 gets a 4th stage), cooperative and data-parallel
    (clusters too); where a CTA gets more than one tile the slots are returned after each store
    (EPI_RING_REUSE); the builds compile without spills; the engine's defaults use it at M <= 1571
    (N = K = 2560, one tile a CTA), not at two tiles a CTA."""
    from types import SimpleNamespace

    def task(m, n=2560, k=2560, dtype="bf16"):
        return SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=dtype)

    assert sm90_smem.smem_bytes("128x256", 4, "bf16") > H200.shared_memory_per_block_bytes
    assert sm90_smem.smem_bytes("128x256", 4, "bf16", epi_ring=True) <= H200.shared_memory_per_block_bytes
    b = sm90_codegen.build(task(1571), H200, "128x256", 4, streamk=False, pingpong=False, cluster=1,
                   epi_ring=True)
    assert "#define EPI_RING 1" in b.source and b.info["epilogue_tile"].startswith("in the ring")
    assert b.launches[-1].shared_mem_bytes == sm90_smem.smem_bytes("128x256", 4, "bf16", epi_ring=True)
    log, elf = _compile(b.source)
    assert elf and not re.search(r"[1-9]\d* bytes spill", log), log
    b = sm90_codegen.build(task(300, 2560, 704, "fp16"), H200, "128x160", 6, streamk=False, pingpong=False,
                   cluster=1, epi_ring=True)  # 11 k-blocks: the slots wrap round the ring
    log, elf = _compile(b.source)
    assert elf and not re.search(r"[1-9]\d* bytes spill", log), log
    assert "#define EPI_RING_REUSE 1" not in b.source  # one tile a CTA: the ring ends with it
    # reused where a CTA may get a second tile: 4096 (320 tiles), 1571 in 2x1 clusters (70 tile
    # pairs on 66 clusters), the seed; not at 1024 in clusters (40 pairs)
    for kw, m, reuse in (({"cluster": 2}, 1024, False), ({}, 4096, True), ({"cluster": 2}, 1571, True),
                         ({"cluster": 2}, 8192, True)):
        b = sm90_codegen.build(task(m), H200, "128x256", 4, streamk=False, epi_ring=True,
                       **({"pingpong": False, "cluster": 1} | kw))
        assert ("#define EPI_RING_REUSE 1" in b.source) == reuse, (m, kw)
        assert b.info["epilogue_tile"] == ("in the ring's freed slots"
                                           + (", returned after each store" if reuse else ""))
        log, elf = _compile(b.source)
        assert elf and not re.search(r"[1-9]\d* bytes spill", log), log
    # a planned stream-K tail becomes data-parallel: the ring path has no stream-K
    b = sm90_codegen.build(task(2194), H200, "128x256", 4, epi_ring=True)
    assert "#define STREAMK 0" in b.source and b.info["schedule"] == "data-parallel"
    with pytest.raises(ValueError, match="epi_ring"):
        sm90_codegen.build(task(8192), H200, "128x128", 4, streamk=False, epi_ring=True, pingpong=True,
                   cluster=1)
    with pytest.raises(ValueError, match="epi_ring"):
        sm90_codegen.build(task(1571, dtype="fp32"), H200, "128x128", 2, streamk=False, pingpong=False,
                   cluster=1, epi_ring=True)
    for m in (256, 512, 1024, 1571, 2048, 8192):  # the engine's defaults: where one tile a CTA
        bs, st = sm90_defaults.default_knobs(H200, "bf16", {"m": m, "n": 2560, "k": 2560})
        assert ("#define EPI_RING 1" in sm90_codegen.build(task(m), H200, bs, st).source) == (m <= 1571), m


def test_deeper_one_wave_rings_are_knobs_and_defaults() -> None:
    """For a given shape (16-bit), MEMORY_PIPELINING also offers the stage counts that fit only with
    the epilogue tile in the ring; the defaults take the deepest on the measured tiles where every
    CTA gets one tile, not where a CTA gets two (measured slower than ping-pong there, ADR-0007);
    ``check`` accepts them and rejects deeper ones naming the ring counts; the build stages the
    epilogue tile in the ring exactly for those counts."""
    from types import SimpleNamespace

    one = {"m": 1571, "n": 2560, "k": 2560}
    two = {"m": 8192, "n": 2560, "k": 2560}
    assert sm90_smem.pipelining_options(H200, "bf16", "128x256") == [0, 2, 3]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x256", one) == [0, 2, 3, 4]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x256", two) == [0, 2, 3, 4]
    assert sm90_smem.pipelining_options(H200, "bf16", "128x320", two) == [0, 2, 3, 4]
    assert sm90_defaults.default_knobs(H200, "bf16", two) == ("128x128", 5)
    assert sm90_smem.pipelining_options(H200, "tf32", "128x128", {"m": 256, "n": 2560, "k": 2560}) == \
        sm90_smem.pipelining_options(H200, "tf32", "128x128")
    for shape in (one, two):
        ok = SimpleNamespace(shape=shape, dtype="bf16", block_size="128x256", memory_pipelining=4)
        assert sm90_planner.check(ok, H200) == []
    (v,) = sm90_planner.check(SimpleNamespace(shape=two, dtype="bf16", block_size="128x256",
                                      memory_pipelining=5), H200)
    assert v.field == "memory_pipelining" and "4: the epilogue tile staged in the ring" in v.message, v
    for st, ring in ((3, False), (4, True)):
        b = sm90_codegen.build(SimpleNamespace(shape=one, dtype="bf16"), H200, "128x256", st)
        assert ("#define EPI_RING 1" in b.source) == ring, st
        assert b.info["epilogue_tile"] == ("in the ring's freed slots" if ring else "own buffer")
    # the auto spec (what the engine, the TUI and the runner's fix hint call) passes the shape on
    from kernels import get_spec

    spec = get_spec("gemm_residual")
    assert spec.pipelining_options(H200, "bf16", "128x256", one)[-1] == 4
    assert spec.pipelining_options(H200, "bf16", "128x256")[-1] == 3


def test_tune_form_and_runner_list_the_ring_counts_for_the_shape() -> None:
    """The Tune screen's check and the runner's fix hint pass the task's shape on: at M = 1571
    (one 128x256 tile a CTA) MEMORY_PIPELINING=4 is offered, is the default and passes; at the
    seed shape it is offered too (not the default), 5 is refused with the counts that fit."""
    from engine.errors import InputError
    from engine.profiles import load_profiles
    from engine.runner import prepare
    from engine.task import TaskSpec
    from tui.screens.tune import validate_form

    prof = load_profiles().get("h200")
    one = TaskSpec().model_dump(mode="json") | {"shape": {"m": 1571, "n": 2560, "k": 2560},
                                                "block_size": "128x256", "memory_pipelining": 4}
    task, probs, pred = validate_form(one, prof)
    assert task is not None and probs == [], probs
    assert pred["pipelining_options"][-1] == 4 and pred["defaults"] == ("128x256", 4)
    two = one | {"shape": {"m": 8192, "n": 2560, "k": 2560}}
    task, probs, pred = validate_form(two, prof)
    assert task is not None and probs == [], probs
    assert pred["pipelining_options"][-1] == 4 and pred["defaults"] == ("128x128", 5)
    task, probs, pred = validate_form(two | {"memory_pipelining": 5}, prof)
    assert task is None and any("the epilogue tile staged in the ring" in p for p in probs), probs
    with pytest.raises(InputError) as err:
        prepare(TaskSpec.model_validate(two | {"memory_pipelining": 5, "backend": "sim"}), "h200")
    assert "MEMORY_PIPELINING options for 128x256: off, 2, 3, 4" in err.value.fix, err.value.fix
    assert prepare(TaskSpec.model_validate(one | {"backend": "sim"}), "h200").task.memory_pipelining == 4


def test_wide_tiles_build_split_n_and_ring() -> None:
    """cuBLAS's big tiles (16-bit only): 128x320 splits the columns between its two consumers
    (SPLIT_N) and loads W's 320 rows as two TMA boxes of 160 unclustered, one per CTA in 2x1
    clusters; 256x160 splits the rows (A's box 256 rows); beside their 80 KB buffer they fit 2
    stages, with it in the ring 3 and 4, reused where a CTA gets several tiles (released at once with
    3 stages, at the next tile's first k-block with 4); every such build compiles without spills;
    never a default (ADR-0007)."""
    from types import SimpleNamespace

    seed = {"m": 8192, "n": 2560, "k": 2560}
    task = SimpleNamespace(shape=seed, dtype="bf16")
    for dt in ("tf32", "fp32"):
        with pytest.raises(ValueError, match="16-bit"):
            sm90_tiles.parse_block_size("128x320", dt)
        (v,) = sm90_planner.check(SimpleNamespace(shape=seed, dtype=dt, block_size="256x160",
                                          memory_pipelining=2), H200)
        assert v.field == "block_size" and "16-bit" in v.message and "128x256" in v.limit, v
    for bs, split, a_rows in (("128x320", True, 128), ("256x160", False, 256)):
        assert sm90_smem.pipelining_options(H200, "bf16", bs, seed) == [0, 2, 3, 4]
        assert sm90_planner.check(SimpleNamespace(shape=seed, dtype="bf16", block_size=bs,
                                          memory_pipelining=4), H200) == []
        (v,) = sm90_planner.check(SimpleNamespace(shape=seed, dtype="bf16", block_size=bs,
                                          memory_pipelining=5), H200)
        assert v.field == "memory_pipelining"
        for st, cluster in ((4, 1), (4, 2), (3, 1), (2, 1)):
            b = sm90_codegen.build(task, H200, bs, st, cluster=cluster)
            assert ("#define SPLIT_N 1" in b.source) == split
            assert ("#define EPI_RING_REUSE 1" in b.source) == (st > 2)
            assert b.info["consumers"] == "cooperative" and b.info["schedule"] == "data-parallel"
            assert b.launches[-1].shared_mem_bytes <= H200.shared_memory_per_block_bytes
            a_map, w_map = b.launches[-1].args[:2]
            assert a_map.box_rows == a_rows
            assert w_map.box_rows == (160 if bs == "128x320" else 160 // cluster)
            log, elf = _compile(b.source)
            assert elf and not re.search(r"[1-9]\d* bytes spill", log), log
            assert "C7508" not in log, log
    for m in (256, 1024, 1571, 2048, 4096, 7976, 8192):
        for dt in ("bf16", "fp16"):
            assert sm90_defaults.default_knobs(H200, dt, {"m": m, "n": 2560, "k": 2560})[0] not in sm90_tiles.WIDE_TILES


def test_tail_shift_default_only_for_partial_16_bit_data_parallel_tiles() -> None:
    """A last tile that reaches past M or N is moved back to end there by default only where it can
    (M >= BM or N >= BN), the schedule is data-parallel and the data 16-bit (the GPU showed the
    twice-stored rows bit-identical only there); the build says which, and the measurement option
    forces it either way."""
    from types import SimpleNamespace

    def built(m: int, n: int, k: int, dtype: str, **kw):
        bs, st = sm90_defaults.default_knobs(H200, dtype, {"m": m, "n": n, "k": k})
        return sm90_codegen.build(SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=dtype), H200, bs, st, **kw)

    moved, clipped = "last tiles moved back to end at M, N", "tiles past M, N clipped by TMA"
    for m, n, k in ((7976, 2560, 2560), (1571, 2560, 2560), (333, 1032, 520), (4096, 2504, 2560)):
        for dt in ("bf16", "fp16"):
            b = built(m, n, k, dt)
            assert b.info["tail"] == moved and "#define TAIL_SHIFT 1" in b.source, (m, n, k, dt)
            off = built(m, n, k, dt, tail_shift=False)
            assert off.info["tail"] == clipped and "TAIL_SHIFT 1" not in off.source
    # whole tiles (the seed's cubin unchanged), one partial tile shorter than BM, stream-K, fp32
    assert built(8192, 2560, 2560, "bf16").info["tail"] == clipped
    assert "#define TAIL_SHIFT 1" not in built(8192, 2560, 2560, "bf16").source
    assert not sm90_choices.use_tail_shift(100, 128, "128x128", "bf16", False)
    assert sm90_choices.use_tail_shift(100, 200, "128x128", "bf16", False)  # N can move back
    assert not sm90_choices.use_tail_shift(7976, 2560, "128x128", "bf16", True)
    for dt in ("fp32", "tf32"):
        assert not sm90_choices.use_tail_shift(7976, 2560, "128x128", dt, False)
        assert built(7976, 2560, 2560, dt).info["tail"] == clipped
    assert built(8192, 2560, 2560, "bf16", tail_shift=True).info["tail"] == moved


@pytest.mark.parametrize("m,n,k,dtype", [(7976, 2560, 2560, "bf16"), (1571, 2560, 2560, "fp16"),
                                         (333, 1032, 520, "bf16"), (1000, 2560, 2560, "bf16"),
                                         (4096, 2504, 2560, "fp16")])
def test_tail_shifted_defaults_compile_without_spills(m: int, n: int, k: int, dtype: str) -> None:
    from types import SimpleNamespace

    bs, st = sm90_defaults.default_knobs(H200, dtype, {"m": m, "n": n, "k": k})
    b = sm90_codegen.build(SimpleNamespace(shape={"m": m, "n": n, "k": k}, dtype=dtype), H200, bs, st)
    assert "#define TAIL_SHIFT 1" in b.source
    log, cubin = _compile(b.source)
    assert cubin[:4] == b"\x7fELF"
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert frames and all(tuple(map(int, f)) == (0, 0, 0) for f in frames), log
    assert "C7508" not in log, f"setmaxnreg ignored:\n{log}"


def test_tile_160_where_128x128_leaves_its_last_round_nearly_empty() -> None:
    """Ping-pong 128x128 in 2x1 clusters runs its tiles in rounds of 66 cluster pairs: at M = 3000,
    5000, 6000 (N = K = 2560) its last round is nearly empty (3.6, 6.1, 7.3 rounds of work in 4, 7,
    8), and ping-pong 128x160 does less work in all (3, 5, 6 rounds of a 1.25x tile): it becomes
    the default there, measured 4-8 % faster on the H200. Where both do the same work (M = 4096,
    7976, the seed) 128x128 stays; fp32 data keeps its tiles."""
    from types import SimpleNamespace

    assert sm90_model.tile_rounds(5000, 2560, 128, 128, 132, 2) == 7
    assert sm90_model.tile_rounds(5000, 2560, 128, 160, 132, 1) == 5
    assert sm90_model.tile_rounds(8192, 2560, 128, 128, 132, 2) == 10
    for m in (3000, 5000, 6000):
        for dt in ("bf16", "fp16"):
            shape = {"m": m, "n": 2560, "k": 2560}
            assert sm90_defaults.default_knobs(H200, dt, shape) == ("128x160", 4), (m, dt)
            b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), H200, "128x160", 4)
            assert b.info["consumers"].startswith("ping-pong") and b.info["schedule"] == "data-parallel"
    for m in (4096, 7976, 8192):
        assert sm90_defaults.default_knobs(H200, "bf16", {"m": m, "n": 2560, "k": 2560}) == ("128x128", 5), m
    for dt in ("fp32", "tf32"):
        assert sm90_defaults.default_knobs(H200, dt, {"m": 5000, "n": 2560, "k": 2560})[0] == "128x128"
    # where ping-pong does not apply: cooperative 128x160 against 128x128's rounds (M = 1700: 3
    # rounds of cluster pairs vs 2 of 128x160; M = 800: 140 tiles of 128x128 = 2 rounds, its
    # stream-K tail measured slower, vs 112 tiles of 128x160 in one, the epilogue in the ring)
    # (_base_knobs: at 1700 and 1792 default_knobs then takes a swapped tile, _swap_tile)
    for m, want in ((1700, ("128x160", 5)), (1792, ("128x160", 5)), (800, ("128x160", 6))):
        shape = {"m": m, "n": 2560, "k": 2560}
        assert sm90_defaults._base_knobs(H200, "bf16", shape) == want, m
        b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype="bf16"), H200, *want)
        assert b.info["consumers"] == "cooperative" and b.info["schedule"] == "data-parallel", m
    assert sm90_defaults.default_knobs(H200, "bf16", {"m": 768, "n": 2560, "k": 2560})[0] == "128x128"  # one round


def test_clusters_only_where_pairing_the_m_blocks_adds_no_round() -> None:
    """2x1 clusters pair M blocks; with an odd block count the last pair is half empty, which can
    push a round of tiles: M = 2400 (19 blocks x 20) runs 3 rounds alone but 4 in pairs, M = 7488
    (59 x 20) 9 against 10. There the default runs ping-pong 128x128 unclustered (and at 2400 no
    longer needs 128x160's three rounds of a bigger tile); where pairing costs no round (the seed,
    M = 3000, 7976) clusters stay."""
    from types import SimpleNamespace

    assert sm90_model.tile_rounds(2400, 2560, 128, 128, 132, 2) == 4
    assert sm90_model.tile_rounds(2400, 2560, 128, 128, 132, 1) == 3
    for m in (2400, 2432, 7488, 7552):
        shape = {"m": m, "n": 2560, "k": 2560}
        assert sm90_choices.use_cluster(H200, "128x128", 5, "bf16", shape) == 1, m
        assert sm90_defaults.default_knobs(H200, "bf16", shape) == ("128x128", 5), m
        b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype="bf16"), H200, "128x128", 5)
        assert b.info["cluster"] == "none" and b.info["consumers"].startswith("ping-pong"), m
    for m in (3000, 7976, 8192):
        assert sm90_choices.use_cluster(H200, "128x128", 5, "fp16", {"m": m, "n": 2560, "k": 2560}) == 2, m


def test_half_tail_where_the_last_round_is_at_most_half_full() -> None:
    """A last round of tiles at most half full runs as 64-row halves on twice the CTAs (HALF_TAIL):
    the engine's default there for unclustered ping-pong with 16-bit data, the kernel told how many
    tiles run whole; fuller last rounds, one-round grids, clusters, cooperative tiles and fp32 data
    keep whole tiles; ``tile_rounds`` counts a round of halves as ``HALF_ROUND``."""
    from types import SimpleNamespace

    assert sm90_model.half_tail_whole(320, 132) == 264  # 56 left: their 112 halves fit one round
    assert sm90_model.half_tail_whole(340, 132) is None  # 76 left: 152 halves would take two
    assert sm90_model.half_tail_whole(264, 132) is None and sm90_model.half_tail_whole(100, 132) is None
    assert sm90_model.tile_rounds(2500, 2560, 128, 160, 132, 1, half_tail=True) == 2 + sm90_model.HALF_ROUND
    assert sm90_model.tile_rounds(2500, 2560, 128, 160, 132, 1) == 3
    assert sm90_model.tile_rounds(8192, 2560, 128, 128, 132, 2) == 10  # 2x1 clusters: pairs along M
    for dt in ("bf16", "fp16"):
        for m, want, whole in ((2500, ("128x160", 4), 264), (2650, ("128x128", 5), 396),
                               (3400, ("128x128", 5), 528), (7600, ("128x128", 5), 1188)):
            shape = {"m": m, "n": 2560, "k": 2560}
            # the knobs before the FIT_TILES rule (which takes 128x208 at 2500, 128x144 at 2650, 3400)
            assert sm90_defaults._base_knobs(H200, dt, shape) == want, (m, dt)
            b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), H200, *want)
            launch = b.launches[-1]
            assert "#define HALF_TAIL 1" in b.source and b.info["cluster"] == "none", m
            assert b.info["schedule"] == f"data-parallel, the last {b.info['tiles'] - whole} tiles in 64-row halves"
            assert launch.args[-1] == whole and launch.grid[0] == 132
            assert len([a for a in launch.args if isinstance(a, TensorMapArg)]) == 9  # + 3 half maps
            assert set(sm90_codegen.HALF_TAIL_OPTIONS) <= set(b.options)
    for m, dt in ((3000, "bf16"), (8192, "bf16"), (2500, "tf32"), (1024, "bf16"), (1700, "fp16")):
        shape = {"m": m, "n": 2560, "k": 2560}
        b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), H200, *sm90_defaults.default_knobs(H200, dt, shape))
        assert "#define HALF_TAIL 1" not in b.source and not set(sm90_codegen.HALF_TAIL_OPTIONS) & set(b.options), (m, dt)
    task = SimpleNamespace(shape={"m": 2500, "n": 2560, "k": 2560}, dtype="bf16")
    for bad in ({"cluster": 2}, {"pingpong": False}, {"streamk": True, "schedule": (132, 200)}):
        with pytest.raises(ValueError, match="half_tail"):
            sm90_codegen.build(task, H200, "128x128", 5, half_tail=True, **bad)


@pytest.mark.parametrize("m,block_size,stages,dtype", [(2500, "128x160", 4, "bf16"), (3400, "128x128", 5, "fp16"),
                                                       (2500, "128x128", 4, "bf16")])
def test_half_tail_builds_compile_without_spills_and_keep_the_k_loop_whole(m, block_size, stages, dtype) -> None:
    """HALF_TAIL builds compile without spills; the k-block loop is instantiated once per slice
    count (a branch between one k-block's wgmmas made ptxas serialise the k-blocks: 15 % slower)."""
    from types import SimpleNamespace

    b = sm90_codegen.build(SimpleNamespace(shape={"m": m, "n": 2560, "k": 2560}, dtype=dtype), H200, block_size,
                   stages, half_tail=True, cluster=1)
    report = compile_cubin(b.source, "sm_90a", tuple(o for o in b.options if not o.startswith("--gpu")))
    assert report.ok, report.log[-2000:]
    assert not report.spills, report.log
    assert "serialized" not in report.log.lower()


def test_build_refuses_a_cooperative_ring_deeper_than_shared_memory() -> None:
    """``build`` itself refuses a configuration whose shared memory exceeds the block limit
    (a cooperative fp32 128x160 s5 would need 267 KB and fail at launch); the deepest that fits
    still builds."""
    from types import SimpleNamespace

    task = SimpleNamespace(shape={"m": 2048, "n": 2560, "k": 2560}, dtype="fp32")
    with pytest.raises(ValueError, match="bytes of shared memory"):
        sm90_codegen.build(task, H200, "128x160", 5, pingpong=False)
    deepest = max(sm90_smem.pipelining_options(H200, "fp32", "128x160"))
    assert sm90_codegen.build(task, H200, "128x160", deepest, pingpong=False).launches[-1].shared_mem_bytes \
        <= H200.shared_memory_per_block_bytes


def test_fit_tiles_where_they_take_fewer_rounds() -> None:
    """The FIT_TILES widths (128x144, 128x192, 128x208; 16-bit data) replace the pick where their
    rounds are fewer and do at most FIT_GAIN of its work: N = K = 2560, M = 2433-2560 128x208
    (13 x 20 tiles, two rounds; ``default_knobs`` then swaps up to 2600), 2561-2816 and 3329-3712 128x144 ping-pong; not at 1700 (as many
    rounds, only narrower: measured level), 2083, the seed, 7600, nor for tf32."""
    from types import SimpleNamespace

    for dt in ("bf16", "fp16"):
        for m, want in ((2433, ("128x208", 4)), (2500, ("128x208", 4)), (2560, ("128x208", 4)),
                        (2587, ("128x144", 4)), (2650, ("128x144", 4)), (2816, ("128x144", 4)),
                        (3400, ("128x144", 4)), (3712, ("128x144", 4))):
            shape = {"m": m, "n": 2560, "k": 2560}
            assert sm90_defaults._fit_tile(H200, dt, shape, *sm90_defaults._base_knobs(H200, dt, shape)) == want, (m, dt)
            # a swapped tile may then do less work still (_swap_tile: up to M = 2600 R x 128, at 2650
            # 104 x 256), else the fit width stays
            swap = sm90_defaults._swap_tile(H200, dt, shape, *want)
            assert sm90_defaults.default_knobs(H200, dt, shape) == (swap or want), (m, dt)
            assert (swap is not None) == (m <= 2650), (m, dt, swap)
        for m in (1700, 2083, 2817, 3328, 3713, 7600, 8192):
            shape = {"m": m, "n": 2560, "k": 2560}
            assert sm90_defaults._fit_tile(H200, dt, shape, *sm90_defaults._base_knobs(H200, dt, shape)) is None, (m, dt)
            assert sm90_defaults.default_knobs(H200, dt, shape)[0] not in sm90_tiles.FIT_TILES, (m, dt)
    for m in (2500, 2650, 3400):
        assert sm90_defaults.default_knobs(H200, "tf32", {"m": m, "n": 2560, "k": 2560})[0] not in sm90_tiles.FIT_TILES
    b = sm90_codegen.build(SimpleNamespace(shape={"m": 2500, "n": 2560, "k": 2560}, dtype="bf16"), H200, "128x208", 4)
    assert b.info["consumers"] == "cooperative" and b.info["schedule"] == "data-parallel"
    assert b.info["tiles"] == 260 and b.launches[-1].grid[0] == 132
    b = sm90_codegen.build(SimpleNamespace(shape={"m": 2650, "n": 2560, "k": 2560}, dtype="fp16"), H200, "128x144", 4)
    assert b.info["consumers"].startswith("ping-pong") and b.info["schedule"] == "data-parallel"
    for dt in ("tf32", "fp32"):
        with pytest.raises(ValueError, match="16-bit"):
            sm90_tiles.parse_block_size("128x208", dt)
    # no ring-staged counts for the fit widths (not run on a GPU): a shape gets the own-buffer ones
    seed = {"m": 8192, "n": 2560, "k": 2560}
    assert sm90_smem.pipelining_options(H200, "bf16", "128x208", seed) == [0, 2, 3, 4]
    assert sm90_smem.pipelining_options(H200, "fp16", "128x144", seed) == [0, 2, 3, 4, 5]
    assert sm90_smem.ring_stage_options(H200, "bf16", "128x192", {"m": 1000, "n": 2560, "k": 2560}) == []
    v = sm90_planner.check(SimpleNamespace(shape=seed, dtype="bf16", block_size="128x208", memory_pipelining=5), H200)
    assert [x.field for x in v] == ["memory_pipelining"] and "MEMORY_PIPELINING=5" in str(v[0])


@pytest.mark.parametrize("block_size,stages,pingpong,m", [("128x144", 4, True, 2650), ("128x144", 5, False, 1700),
                                                          ("128x192", 4, False, 2083), ("128x208", 4, False, 2500)])
def test_fit_tiles_compile_without_spills(block_size, stages, pingpong, m) -> None:
    """Each FIT_TILES width compiles for sm_90a without spills, in both 16-bit dtypes."""
    from types import SimpleNamespace

    for dt in ("bf16", "fp16"):
        b = sm90_codegen.build(SimpleNamespace(shape={"m": m, "n": 2560, "k": 2560}, dtype=dt), H200, block_size,
                       stages, pingpong=pingpong)
        report = compile_cubin(b.source, "sm_90a", tuple(o for o in b.options if not o.startswith("--gpu")))
        assert report.ok, report.log[-2000:]
        assert not report.spills, report.log


SWAP_CASES = [(r, dt, st) for r in (136, 144, 152, 160, 168, 176, 184, 192, 200)
              for dt in ("bf16", "fp16") for st in (4, 5) if st == 4 or r <= 160]
SWAP_ROWS_COMPILED = (136, 160, 200)
"""Swapped tiles the fast suite compiles: the narrowest, the one with its own tile order, the widest."""


def _compiles_for_sm90a(b) -> None:
    report = compile_cubin(b.source, "sm_90a", tuple(o for o in b.options if not o.startswith("--gpu")))
    assert report.ok, report.log[-2000:]
    assert not report.spills, report.log


@pytest.mark.slow
@pytest.mark.parametrize("rows,dtype,stages", SWAP_CASES)
def test_every_swapped_tile_compiles(rows, dtype, stages) -> None:
    from types import SimpleNamespace

    task = SimpleNamespace(shape={"m": 13 * rows - 5, "n": 2560, "k": 2560}, dtype=dtype)
    _compiles_for_sm90a(sm90_codegen.build(task, H200, f"{rows}x128", stages))


@pytest.mark.parametrize("rows,dtype,stages", SWAP_CASES)
def test_swapped_tiles_plan_the_transposed_product_and_compile(rows, dtype, stages) -> None:
    """A swapped tile R x 128 maps W as the wgmma's A operand (128-row boxes) and A as its B
    operand (R-row boxes), R and out in their own [M, N] layout in R x 64 boxes, passes the kernel
    M = N and N = M, plans 20 x ceil(M / R) tiles (13 row blocks: two rounds at M = 13 R - 5),
    compiles for sm_90a without spills; fusion off appends the separate add over the same M x N."""
    from types import SimpleNamespace

    m = 13 * rows - 5
    task = SimpleNamespace(shape={"m": m, "n": 2560, "k": 2560}, dtype=dtype)
    assert f"{rows}x128" in sm90_smem.block_size_options(H200, dtype)
    assert stages in sm90_smem.pipelining_options(H200, dtype, f"{rows}x128", task.shape)
    b = sm90_codegen.build(task, H200, f"{rows}x128", stages)
    (gemm,) = b.launches
    maps = [a for a in gemm.args if isinstance(a, TensorMapArg)]
    assert [(a.buffer, a.rows, a.cols, a.box_rows) for a in maps[:4]] == [
        ("w", 2560, 2560, 128), ("a", m, 2560, rows), ("r", m, 2560, rows), ("out", m, 2560, rows)]
    assert list(gemm.args[len(maps):len(maps) + 3]) == [2560, m, 2560]
    assert b.info["consumers"] == "cooperative" and b.info["cluster"] == "none"
    assert b.info["tile"].startswith(f"{rows}x128x64 swapped")
    # the order in the problem's frame: the kernel's N-fastest runs along M; 160 rows (the kernel's
    # 128x160, whose grouping rule applies) in groups of N blocks
    assert b.info["tile_order"] == ("groups of 4 N blocks" if rows == 160 else "M-fastest"), b.info["tile_order"]
    assert b.info["tiles"] == 20 * 13 and gemm.grid[0] == 132
    assert b.source.startswith("#define SWAP_AB 1\n")
    if rows in SWAP_ROWS_COMPILED:  # the rest differ in constants only: compiled by the slow test below
        _compiles_for_sm90a(b)
    off = sm90_codegen.build(task, H200, f"{rows}x128", stages, fuse=False)
    assert [launch.function for launch in off.launches] == [sm90_codegen.KERNEL, sm90_codegen.ADD_KERNEL]
    assert off.launches[1].args == ("out", "r", 2560, m)


WIDE_SWAP_CASES = [(r, st) for r in sm90_tiles.SWAP_WIDE_ROWS for st in (3, 4)]
WIDE_ROWS_COMPILED = (80, 120)
"""Wide swapped tiles the fast suite compiles: the narrowest and the widest (the most accumulators)."""


@pytest.mark.parametrize("rows,stages", WIDE_SWAP_CASES)
def test_wide_swapped_tiles_plan_the_transposed_product_and_compile(rows, stages) -> None:
    """A swapped tile R x 256 is the kernel's 256 x R: W as the wgmma's A operand in 256-row boxes
    (two 64-row slices a consumer), A as its B operand in R-row boxes, R and out in R x 64 boxes;
    10 x 13 tiles in one round at M = 13 R - 5; from 104 rows 4 stages only with the epilogue tile in
    the ring; compiles for sm_90a without spills."""
    m = 13 * rows - 5
    task = SimpleNamespace(shape={"m": m, "n": 2560, "k": 2560}, dtype="bf16")
    assert stages in sm90_smem.pipelining_options(H200, "bf16", f"{rows}x256", task.shape)
    b = sm90_codegen.build(task, H200, f"{rows}x256", stages)
    (gemm,) = b.launches
    maps = [a for a in gemm.args if isinstance(a, TensorMapArg)]
    assert [(a.buffer, a.rows, a.cols, a.box_rows) for a in maps[:4]] == [
        ("w", 2560, 2560, 256), ("a", m, 2560, rows), ("r", m, 2560, rows), ("out", m, 2560, rows)]
    assert list(gemm.args[len(maps):len(maps) + 3]) == [2560, m, 2560]
    assert b.info["tile"].startswith(f"{rows}x256x64 swapped") and b.info["tiles"] == 130
    ring = stages in sm90_smem.ring_stage_options(H200, "bf16", f"{rows}x256", task.shape)
    assert ring == (stages == 4 and rows >= 104)  # 80-96 rows: 4 stages fit beside the buffer
    assert b.info["epilogue_tile"] == ("in the ring's freed slots" if ring else "own buffer")
    assert "#define BM 256" in b.source and f"#define BN {rows}" in b.source
    if rows in WIDE_ROWS_COMPILED:  # the rest differ in constants only: compiled by the slow test below
        _compiles_for_sm90a(b)


@pytest.mark.slow
@pytest.mark.parametrize("rows,stages", WIDE_SWAP_CASES)
def test_every_wide_swapped_tile_compiles(rows, stages) -> None:
    task = SimpleNamespace(shape={"m": 13 * rows - 5, "n": 2560, "k": 2560}, dtype="fp16")
    _compiles_for_sm90a(sm90_codegen.build(task, H200, f"{rows}x256", stages))


def test_wide_swapped_tiles_refuse_the_kernel_frame_and_fp32() -> None:
    """The kernel's frame of a wide swapped tile (256 x R) is refused naming the knob to write;
    fp32 data has no swapped tiles; the kernel refuses more than 120 rows (accumulators)."""
    shape = {"m": 1337, "n": 2560, "k": 2560}
    with pytest.raises(ValueError, match="write 104x256"):
        sm90_codegen.build(SimpleNamespace(shape=shape, dtype="bf16"), H200, "256x104", 4)
    assert "104x256" not in sm90_smem.block_size_options(H200, "tf32")
    src = sm90_codegen.build(SimpleNamespace(shape=shape, dtype="bf16"), H200, "120x256", 3).source
    report = compile_cubin(src.replace("#define BN 120", "#define BN 128"), "sm_90a", ("-std=c++17",))
    assert not report.ok and "BN <= 120" in report.log


def test_swapped_tiles_are_16_bit_knobs_with_ring_staged_counts_and_a_clear_name() -> None:
    """The swapped tiles are knobs for 16-bit data only; for a shape they offer the deeper rings that
    fit only with the epilogue tile staged in the ring (168x128: 5 and 6; 200x128: 5), built with
    the ring returned after each store where a CTA gets two tiles; the kernel-frame name (128 x R)
    is refused naming the knob to write, and a deeper ring than fits is refused by ``check``."""
    from types import SimpleNamespace

    assert "168x128" in sm90_smem.block_size_options(H200, "fp16")
    assert not any(sm90_tiles.swapped(t) for t in sm90_smem.block_size_options(H200, "tf32"))
    shape = {"m": 2083, "n": 2560, "k": 2560}
    assert sm90_smem.pipelining_options(H200, "bf16", "168x128") == [0, 2, 3, 4]
    assert sm90_smem.pipelining_options(H200, "bf16", "168x128", shape) == [0, 2, 3, 4, 5, 6]
    assert sm90_smem.ring_stage_options(H200, "bf16", "200x128", shape) == [5]
    assert sm90_smem.ring_stage_options(H200, "bf16", "136x128", shape) == [6]
    task = SimpleNamespace(shape=shape, dtype="bf16")
    b = sm90_codegen.build(task, H200, "168x128", 5)
    assert b.info["epilogue_tile"] == "in the ring's freed slots, returned after each store"
    assert "#define EPI_RING 1" in b.source and "#define EPI_RING_REUSE 1" in b.source
    assert "#define EPI_RING 1" not in sm90_codegen.build(task, H200, "168x128", 4).source
    with pytest.raises(ValueError, match="BLOCK_SIZE=168x128"):
        sm90_codegen.build(task, H200, "128x168", 4)
    with pytest.raises(ValueError, match="write 168x128"):
        sm90_smem.pipelining_options(H200, "bf16", "128x168", shape)
    bad = sm90_planner.check(SimpleNamespace(shape=shape, dtype="bf16", block_size="128x168", memory_pipelining=4), H200)
    assert [v.field for v in bad] == ["block_size"] and "write 168x128" in bad[0].message
    assert sm90_planner.check(SimpleNamespace(shape=shape, dtype="bf16", block_size="168x128", memory_pipelining=6), H200) == []
    bad = sm90_planner.check(SimpleNamespace(shape=shape, dtype="bf16", block_size="200x128", memory_pipelining=6), H200)
    assert [v.field for v in bad] == ["memory_pipelining"]
    bad = sm90_planner.check(SimpleNamespace(shape=shape, dtype="tf32", block_size="168x128", memory_pipelining=4), H200)
    assert [v.field for v in bad] == ["block_size"]


def test_swapped_default_zones_at_the_issue_shape() -> None:
    """``_swap_tile`` fires where two rounds of 13 row blocks do at most SWAP_GAIN of the pick's work
    (16-bit data): at N = K = 2560 M = 1665-1976, 2049-2392 and 2401-2600 where the pick is 128x208 or
    128x144 (measured gains or level, ADR-0007), and not where the work is level (1977-2048
    against 128x160, 2393-2432 against 128x128: mixed at 2400), past 13 rows blocks of 200, for tf32
    or without a shape."""
    def pick(m, dtype="bf16"):
        return sm90_defaults.default_knobs(H200, dtype, {"m": m, "n": 2560, "k": 2560})

    assert pick(1700) == ("136x128", 4) and pick(1800, "fp16") == ("144x128", 4) and pick(1950) == ("152x128", 4)
    assert pick(2083) == ("168x128", 4) and pick(2200) == ("176x128", 4) and pick(2060) == ("160x128", 4)
    assert pick(2300) == ("184x128", 4) and pick(2450, "fp16") == ("192x128", 4)
    assert pick(2500) == pick(2560) == pick(2600) == ("200x128", 4)
    for m in (1600, 1664, 2000, 2048, 2400, 2601, 3000, 8192):
        assert pick(m)[0] not in sm90_tiles.SWAP_TILES[:len(sm90_tiles.SWAP_ROWS)], m  # no R x 128 tile
    assert not sm90_tiles.swapped(pick(2083, "tf32")[0])
    assert not sm90_tiles.swapped(sm90_defaults.default_knobs(H200, "bf16")[0])


def test_wide_swapped_default_zones() -> None:
    """``_wide_swap_tile`` takes an R x 256 tile where its data-parallel rounds, no more of them, do at
    most WIDE_SWAP_GAIN of the pick's work (16-bit data): at N = K = 2560 M = 1025-1456, where 128-row
    tiles leave a round part-empty (1337: 13 x 10 tiles of 104 x 256 in one round, as cuBLAS), at the
    4 stages with the epilogue tile in the ring; not where the pick fills its
    round (1024: 128x160), for tf32 or without a shape."""
    def pick(m, n=2560, dtype="bf16"):
        return sm90_defaults.default_knobs(H200, dtype, {"m": m, "n": n, "k": n})

    assert sm90_tiles.WIDE_SWAP_TILES == ("80x256", "88x256", "96x256", "104x256", "112x256", "120x256")
    assert pick(1025) == ("80x256", 4) and pick(1100) == ("88x256", 4) and pick(1200) == ("96x256", 4)
    assert pick(1337) == ("104x256", 4) and pick(1400) == pick(1456) == ("112x256", 4)
    assert pick(1024) == ("128x160", 6) and pick(1457)[0] not in sm90_tiles.SWAP_TILES
    assert pick(3720) == ("96x256", 4) and pick(850, 8192) == ("112x256", 4)
    shape = {"m": 1337, "n": 2560, "k": 2560}
    assert sm90_defaults._wide_swap_tile(H200, "bf16", shape, *sm90_defaults._base_knobs(H200, "bf16", shape)) == ("104x256", 4)
    assert pick(1337, dtype="tf32")[0] not in sm90_tiles.SWAP_TILES
    assert sm90_defaults.default_knobs(H200, "bf16") == ("128x256", 3)
    b = sm90_codegen.build(SimpleNamespace(shape=shape, dtype="bf16"), H200, *pick(1337))
    assert b.info["tiles"] == 130 and b.info["epilogue_tile"] == "in the ring's freed slots"
    assert b.info["tile"].startswith("104x256x64 swapped") and b.info["schedule"] == "data-parallel"


def test_swapped_tile_order_follows_the_rounds_footprint() -> None:
    """A swapped build numbers the problem's N blocks fastest where a round's tiles then touch at most
    SWAP_ORDER_GAIN of the rows of A and W (N = 1024: 33 row blocks of A), else M-fastest (the inner
    build's order; 160 rows its groups), as measured (ADR-0007); an explicit order wins."""
    assert sm90_choices.round_rows(6500, 1024, 200, 128, 132, True) == 17 * 200 + 8 * 128
    assert sm90_choices.round_rows(6500, 1024, 200, 128, 132, False) == 33 * 200 + 4 * 128
    assert sm90_choices.round_rows(10, 100, 136, 128, 132, True) == 136 + 128  # one tile
    task = lambda m, n: SimpleNamespace(shape={"m": m, "n": n, "k": 2560}, dtype="bf16")  # noqa: E731
    for (m, n), rows, want in (((4400, 1024), 136, "N-fastest"), ((6500, 1024), 200, "N-fastest"),
                               ((2083, 2560), 168, "M-fastest"), ((2500, 2560), 200, "M-fastest"),
                               ((2049, 2560), 160, "groups of 4 N blocks"), ((1300, 4096), 168, "M-fastest"),
                               ((780, 8192), 200, "M-fastest")):
        b = sm90_codegen.build(task(m, n), H200, f"{rows}x128", 4)
        assert b.info["tile_order"] == want, (m, n, b.info["tile_order"])
        assert ("#define RASTER_M 1" in b.source) == (want == "N-fastest")
    b = sm90_codegen.build(task(6500, 1024), H200, "200x128", 4, raster_m=False, raster_group=0)
    assert b.info["tile_order"] == "M-fastest"
