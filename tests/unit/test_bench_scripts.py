"""The GPU-machine bench scripts refuse malformed arguments before touching a GPU; sass_hot reads ncu's CSV."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernels.spec import render_task

ROOT = Path(__file__).resolve().parents[2]


def refused(script: str, *argv: str) -> str:
    """Run ``python -m bench.SCRIPT`` with ARGV, in this process (a fresh interpreter per case cost
    half a second each); it must exit 2 (argparse's usage error) before touching a GPU, with no
    traceback. Returns its stderr."""
    import contextlib
    import io
    import runpy

    pytest.importorskip("cupy")
    err = io.StringIO()
    saved_argv = sys.argv
    sys.argv = [f"bench/{script}.py", *argv]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
                pytest.raises(SystemExit) as stop:
            runpy.run_module(f"bench.{script}", run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved_argv
    assert stop.value.code == 2, err.getvalue()
    return err.getvalue()


@pytest.mark.parametrize("argv,needle", [(["--rows", "130"], "--rows"), (["--rows", "fit,208"], "--rows"),
                                         (["--rows", "200:3x1"], "--rows"), (["--rows", "fitx"], "--rows"),
                                         (["--rows", "104x200"], "--rows"), (["--rows", "128x256"], "--rows"),
                                         (["--rows", "104x"], "--rows"), (["--rows", "104x256@x"], "--rows"),
                                         (["--k", "0"], "--k"),
                                         (["--m-list", "0"], "--m-list"), (["--n", "0"], "--n"), (["--orders", "x"], "--orders"),
                                         (["--dtypes", "tf32"], "--dtypes"),
                                         (["--rounds", "0"], "--rounds")])
def test_swap_probe_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("swap_probe", *argv)


@pytest.mark.parametrize("argv,needle", [([], "--shape"), (["--shape", "65x4096x4096"], "--shape"),
                                         (["--shape", "16x8192"], "--shape"), (["--shape", "0x8x8"], "--shape"),
                                         (["--shape", "16x8192x8192", "--plans", "16x16"], "--plans"),
                                         (["--shape", "16x8192x8192", "--dtype", "fp32"], "--dtype")])
def test_launch_gap_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("launch_gap", *argv)


@pytest.mark.parametrize("argv,needle", [(["--shape", "65x8192x8192"], "--shape"),
                                         (["--shape", "16x8192x8192", "--plans", "16x16/6"], "--plans"),
                                         (["--shape", "16x8192x8192", "--launches", "0"], "--launches")])
def test_kernel_span_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("kernel_span", *argv)


def test_kernel_span_stamps_compile_into_the_decode_kernel():
    from bench import kernel_span
    from kernels import gemm_residual_skinny as sk
    from kernels.nvrtc_check import compile_cubin
    from kernels.spec import DeviceLimits

    h200 = DeviceLimits(compute_capability=(9, 0), sm_count=132, shared_memory_per_block_bytes=232448,
                        shared_memory_per_sm_bytes=233472, profile="h200")
    source = kernel_span.instrument(sk.source(sk.plan(16, 8192, 8192, "bf16", h200), "bf16"))
    assert source.count("SpanEnd span_end;") == 1 and source.count("span_now();") == 1
    report = compile_cubin(source, "sm_90a", ("--std=c++17",))
    assert report.ok, report.log


@pytest.mark.parametrize("argv,needle", [(["--m-list", "0"], "--m-list"), (["--m-list", "soon"], "--m-list"),
                                         (["--data", "uniform"], "--data"),
                                         (["--dtypes", "tf32"], "--dtypes"), (["--rounds", "0"], "--rounds"),
                                         (["--energy-s", "0"], "--energy-s"),
                                         (["--energy-s", "100"], "--energy-s")])
def test_seed_probe_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("seed_probe", *argv)


def test_ncu_probe_unknown_case_exits_2_naming_the_flag():
    err = refused("ncu_probe", "--cases", "seed-bf16,bogus")
    assert "--cases" in err and "bogus" in err and "seed-fp16" in err


@pytest.mark.parametrize("argv,needle", [(["--shape", "8192,2560"], "--shape"),
                                         (["--shape", "8192,2560,2561"], "--shape"),
                                         (["--seconds", "0"], "--seconds")])
def test_energy_probe_bad_arguments_exit_2_naming_the_flag(argv, needle):
    pytest.importorskip("pynvml")
    assert needle in refused("energy_probe", *argv)


@pytest.mark.parametrize("argv,needle", [(["--rests", "2,soon"], "--rests"), (["--rests", "-1"], "--rests"),
                                         (["--shape", "8192,2560"], "--shape"),
                                         (["--launches", "150"], "--launches"), (["--rounds", "0"], "--rounds"),
                                         (["--dtypes", "bf16,tf32"], "--dtypes")])
def test_ramp_probe_bad_arguments_exit_2_naming_the_flag(argv, needle):
    pytest.importorskip("pynvml")
    assert needle in refused("ramp_probe", *argv)


@pytest.mark.parametrize("value", ["7976,x", "0,8192"])
def test_sm90_gemm_bad_m_list_exits_2_naming_the_flag(value):
    err = refused("sm90_gemm", "--msweep-alt", "--m-list", value)
    assert "--m-list" in err and value in err


@pytest.mark.parametrize("argv,needle", [(["--variants", "default,3/0"], "--variants"),
                                         (["--variants", "0-1"], "--variants"),
                                         (["--iters", "0"], "--iters"),
                                         (["--round-warmup", "-1"], "--round-warmup"),
                                         (["--rounds", "x"], "--rounds")])
def test_membound_hints_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("membound_hints", *argv)


@pytest.mark.parametrize("argv,needle", [(["--rounds", "0"], "--rounds"), (["--iters", "0"], "--iters"),
                                         (["--dtypes", "bf16,fp8"], "--dtypes")])
def test_membound_bulk_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("membound_bulk", *argv)


@pytest.mark.parametrize("argv,needle", [(["--cold-duel", "--idle", "-1"], "--idle"),
                                         (["--cold-duel", "--idle", "soon"], "--idle"),
                                         (["--duel", "--rounds", "0"], "--rounds"),
                                         (["--tail-bits", "--iters", "0"], "--iters")])
def test_sm90_gemm_bad_numbers_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("sm90_gemm", *argv)


def test_sm90_gemm_bad_sweep_dtype_and_bench_rest_exit_2_naming_the_flag():
    assert "--sweep-dtype" in refused("sm90_gemm", "--cold-duel", "--m-list", "256", "--sweep-dtype", "fp8")
    assert "--rest" in refused("bench", "--rest", "61")
    assert "msweep-fp8" in refused("bench", "--sections", "seed,msweep-fp8")


@pytest.mark.parametrize("argv,needle", [(["--small-m", "--idle", "-1"], "--idle"),
                                         (["--small-m", "--m-list", "256,0"], "--m-list"),
                                         (["--small-m", "--sweep-dtype", "tf32"], "--sweep-dtype"),
                                         (["--small-m", "--only", "(ring"], "--only"),
                                         (["--cold-duel", "--only", "shared|(R"], "--only"),
                                         (["--small-m", "--orders", "2,x"], "--orders"),
                                         (["--small-m", "--orders", "0,4"], "--orders")])
def test_sm90_gemm_small_m_bad_arguments_exit_2_naming_the_flag(argv, needle):
    assert needle in refused("sm90_gemm", *argv)


@pytest.fixture(scope="module")
def sm90_script():
    """The names of ``python -m bench.sm90_gemm``'s modules that the tests below use (they import
    CuPy, but builds need no GPU) and H200 limits."""
    pytest.importorskip("cupy")
    from types import SimpleNamespace

    from bench.sm90 import args, cold_duel, gemm, report, small_m, variants
    from kernels.spec import DeviceLimits

    mod = SimpleNamespace(SEED=gemm.SEED, SMALL_M=small_m.SMALL_M, COLD_DUEL=cold_duel.COLD_DUEL,
                          variant=variants.variant, for_dtype=variants.for_dtype,
                          build_variant=variants.build_variant, engine_default=variants.engine_default,
                          cluster_tag=variants.cluster_tag, write_table=report.write_table,
                          knob_list=args.knob_list, also_label=args.also_label)
    h200 = DeviceLimits(compute_capability=(9, 0), sm_count=132, shared_memory_per_block_bytes=232448,
                        shared_memory_per_sm_bytes=233472, profile="h200")
    return mod, h200


def test_sm90_gemm_small_m_candidates_build_as_labelled(sm90_script):
    """Each --small-m candidate is the build its label names (tile, stages, consumers, cluster,
    schedule) at M = 256, 512, 1024 in both 16-bit dtypes, so the table it prints on the GPU means
    what it says; the clustered 128x128 s4 (in no other table) compiles without spills."""
    from types import SimpleNamespace

    import kernels.sm90.codegen as sm90_codegen
    from kernels.nvrtc_check import compile_cubin

    mod, h200 = sm90_script
    for dt in ("bf16", "fp16"):
        for m in (256, 512, 1024):
            for name, v in mod.SMALL_M.items():
                x = mod.variant(mod.for_dtype(v, dt))
                bs, st = x.tile, x.stages
                try:
                    b = mod.build_variant(h200, m, 2560, 2560, x)
                except ValueError as exc:  # R in ring: only where every CTA has one tile
                    assert x.epi_ring and "one data-parallel tile per CTA" in str(exc), (name, exc)
                    assert -(-m // int(bs.split("x")[0])) * -(-2560 // int(bs.split("x")[1])) > 132
                    continue
                info = b.info
                assert ("#define EPI_RING 1" in b.source) == ("R in ring" in name), name
                assert (info["epilogue_tile"] == "own buffer") == ("R in ring" not in name), name
                assert ("#define RASTER_M 1" in b.source) == ("M-fastest" in name), name
                assert info["tile"].startswith(bs) and info["stages"] == st, name
                assert info["consumers"] == "cooperative", name
                label = next((w[2:] for w in name.split() if w.startswith("cl")), "")
                shape = {"2": "2x1"}.get(label, "none")
                assert info["cluster"].startswith(shape), name
                if "data-parallel" in name or label:
                    assert info["schedule"] == "data-parallel", name
                assert b.launches[-1].grid[0] <= 132
    # (the "default" row is the engine's own build: test_sm90_gemm_default_rows_are_the_engines_builds)
    b = sm90_codegen.build(SimpleNamespace(shape={"m": 512, "n": 2560, "k": 2560}, dtype="bf16"), h200,
                   "128x128", 4, streamk=False, pingpong=False, cluster=2)
    rep = compile_cubin(b.source, "sm_90a", ("--std=c++17",))
    assert rep.ok and rep.functions and not rep.spills, rep.log[-2000:]
    assert "C7508" not in rep.log, rep.log  # setmaxnreg honoured


def test_sass_hot_summarises_each_kernel(tmp_path: Path):
    """bench.sass_hot reads ncu's per-SASS-line CSV (kernels one after another, each with its
    header, gzipped or not) and attributes a retry branch after a try-wait to the barrier wait."""
    import gzip

    header = ('"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb",'
              '"stall_wait","stall_long_sb (Not Issued)"')

    def kernel(name: str, lines: list[tuple[str, int, int]]) -> str:
        rows = [f'"Kernel Name","{name}",', header]
        rows += [f'"0x{i:05x}","{src}","{n}","{sb}","{n - sb}","0"' for i, (src, n, sb) in enumerate(lines)]
        return "\n".join(rows)

    text = "\n".join([
        kernel("ours", [("SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR16], R7", 5, 0),
                        ("@!P0  BRA 0x100", 60, 60),
                        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], R24", 30, 0),
                        ("IADD3 R1, R1, 0x1, RZ", 5, 0)]),
        kernel("nvjet_peer", [("HGMMA.64x64x16.F32 R88, gdesc[UR16], R88", 9, 0),
                              ("EXIT", 1, 0)]),
    ]) + "\n"
    path = tmp_path / "src-sass.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(text)
    out = subprocess.run([sys.executable, "-m", "bench.sass_hot", str(path), "--top", "2"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    ours, peer = out.split("== ")[1:]
    assert ours.startswith("ours: 100 samples, 4 SASS lines")
    assert "barrier wait 65.0 %" in ours and "wgmma 30.0 %" in ours and "other 5.0 %" in ours
    assert "60.0 %" in ours and "long_sb 100%" in ours  # the top line, its main stall reason
    assert peer.startswith("nvjet_peer: 10 samples") and "wgmma 90.0 %" in peer


def test_sm90_gemm_default_rows_are_the_engines_builds(sm90_script):
    """The tables' "default" rows build exactly what the engine builds for its default knobs (the
    same source: its tile order, no stream-K code forced in where the plan splits nothing, the
    epilogue tile in the ring where the stage count needs it), at one-wave, two-wave and ping-pong
    shapes in both 16-bit dtypes."""
    from types import SimpleNamespace

    import kernels.sm90.codegen as sm90_codegen
    import kernels.sm90.defaults as sm90_defaults

    mod, h200 = sm90_script
    for dt in ("bf16", "fp16"):
        for m in (256, 512, 1024, 2048, 7976):
            shape = {"m": m, "n": 2560, "k": 2560}
            bs, st = sm90_defaults.default_knobs(h200, dt, shape)
            built = mod.build_variant(h200, m, 2560, 2560, mod.engine_default(bs, st, dt))
            engine = sm90_codegen.build(SimpleNamespace(shape=shape, dtype=dt), h200, bs, st)
            assert built.source == engine.source, (dt, m)
    assert "#define STREAMK 0" in sm90_codegen.build(SimpleNamespace(shape={"m": 2048, "n": 2560, "k": 2560},
                                                             dtype="bf16"), h200, "128x160", 5).source


@pytest.mark.parametrize("make,argv,needle", [
    (None, ["--top", "2"], "cannot read it"),                                 # no such file
    ("not,a,profile\n1,2,3\n", ["--top", "2"], "no \"Kernel Name\" rows"),    # some other CSV
    (b"\x1f\x8b\x08garbage", ["--top", "2"], "cannot read it"),               # a broken .gz
    ('"Kernel Name","k",\n"Address","Text"\n"0x1","NOP"\n', [], "no Source, Warp Stall"),  # columns
    ("x", ["--top", "0"], "--top"),
    ("x", ["--top", "many"], "--top"),
])
def test_sass_hot_bad_input_exits_2_naming_it(tmp_path: Path, make, argv, needle):
    """A missing, foreign or corrupt CSV, or a --top below 1, is refused with a message naming it."""
    path = tmp_path / ("src.csv.gz" if isinstance(make, bytes) else "src.csv")
    if isinstance(make, bytes):
        path.write_bytes(make)
    elif make is not None:
        path.write_text(make)
    proc = subprocess.run([sys.executable, "-m", "bench.sass_hot", str(path), *argv],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_write_table_creates_its_output_folder(sm90_script, tmp_path, capsys):
    """A table is saved even where $OUT's sub-folder does not exist yet (a finished sweep must not
    be lost to that), and printed first."""
    mod, _ = sm90_script
    out = tmp_path / "bf16" / "deeper"
    mod.write_table(["M=256: default 0.0108"], {"sweep": []}, str(out), "sm90_cold_sweep")
    assert "M=256: default 0.0108" in capsys.readouterr().out
    assert (out / "sm90_cold_sweep.txt").read_text() == "M=256: default 0.0108\n"
    assert (out / "sm90_cold_sweep.json").is_file()


def test_big_tile_rows_build_as_the_engine_would(sm90_script):
    """The cold duel's big-tile rows build: the wide tiles and 128x256 with the epilogue tile in
    the ring, reused at the seed (several tiles a CTA), clustered or not, and the rows named "ring"
    are exactly those with epi_ring set (the odd-shape checks key on it)."""
    mod, h200 = sm90_script
    rows = {nm: v for nm, v in mod.COLD_DUEL.items() if " ring" in nm}
    assert len(rows) == 8
    for nm, v in rows.items():
        v = mod.for_dtype(v, "fp16")
        assert mod.variant(v).epi_ring is True, nm
        b = mod.build_variant(h200, *mod.SEED, v)
        assert b.info["epilogue_tile"] == "in the ring's freed slots, returned after each store", nm
        assert b.info["cluster"].startswith("2x1") == nm.endswith("cl2"), nm


def test_bench_rows_score_each_kernel_against_its_own_baseline():
    """The SOL-ExecBench score of a memory-bound row is against torch's add + rms_norm (or
    bias + gelu), falling back to the CuPy peer; a GEMM row's against torch matmul + add."""
    import importlib
    from types import SimpleNamespace

    from engine.recorded_task import RecordedTask
    from engine.run_records import LaunchRecord, SolRecord
    from engine.sol import solexec_score
    from tests.unit.test_run_records import sol_of

    bench = importlib.import_module("bench.bench")

    def res(kernel, peers):
        return SimpleNamespace(
            task=RecordedTask(kernel=kernel, block_size="256", memory_pipelining=3, fusion=True),
            sol=SolRecord.model_validate(sol_of(t_sol_ms=0.2237, gbps=3851.0, sol_pct=80.2, tflops=None)),
            status=SimpleNamespace(value="ok"),
            peers=[SimpleNamespace(name=n, timing=SimpleNamespace(median_ms=t)) for n, t in peers.items()],
            timing=SimpleNamespace(median_ms=0.2788), correctness=SimpleNamespace(correct=True, max_rel_err=0.0),
            launch=LaunchRecord(info={"path": "TMA bulk ring"}), error=None)

    r = bench.row("rms", res("add_rmsnorm", {"cupy_add_rmsnorm": 5.47}), {"torch_add_rms_norm": 0.3403})
    assert r["score_vs_torch"] == pytest.approx(solexec_score(0.2788, 0.3403, 0.2237)) and 0.67 < r["score_vs_torch"] < 0.69
    r = bench.row("rms", res("add_rmsnorm", {"cupy_add_rmsnorm": 5.47}), {})          # no torch: CuPy
    assert r["score_vs_torch"] == pytest.approx(solexec_score(0.2788, 5.47, 0.2237))
    r = bench.row("gelu", res("bias_gelu", {}), {"torch_bias_gelu": 0.2952, "torch_add_rms_norm": 9.0})
    assert r["score_vs_torch"] == pytest.approx(solexec_score(0.2788, 0.2952, 0.2237))
    r = bench.row("gemm", res("gemm_residual", {"cupy_matmul_add": 0.25}), {"torch_matmul_add": 0.17})
    assert r["score_vs_torch"] == pytest.approx(solexec_score(0.2788, 0.17, 0.2237))


def test_membound_bulk_variant_builds_what_the_engine_builds():
    """bench.membound_bulk's variant (256 threads x 4 blocks, 3 slots) at [32768, 4096] bf16 is
    the engine's own Hopper build: the same source, grid, block and ring."""
    from types import SimpleNamespace

    pytest.importorskip("cupy")
    from bench import membound_bulk as mb
    from kernels.add_rmsnorm import SPEC
    from kernels.spec import DeviceLimits

    h200 = DeviceLimits((9, 0), 132, 232448, 233472, profile="h200")
    shape = {"m": 32768, "n": 4096}
    engine = render_task(SPEC, SimpleNamespace(shape=shape, dtype="bf16", block_size=None, memory_pipelining=None,
                                        fusion=True), h200)
    ours = mb.bulk_build("bf16", shape, (256, 4, 3), 132)
    assert ours.source == engine.source and ours.launches == engine.launches
    off = mb.bulk_build("bf16", shape, (256, 4, 1), 132)
    assert off.launches[0].shared_mem_bytes == 16384 and "#define AR_STAGES 1" in off.source
    assert mb.fits((256, 4, 3), shape, "bf16", h200) and not mb.fits((256, 5, 3), shape, "bf16", h200)


@pytest.mark.parametrize("value", ["128x999:4", "128x160", "128x160:x", "128x160:4:bogus",
                                   "128x160:4:dp:sk264", "128x160:4,256x1:2", "128x128:5:cl1:cl2",
                                   "128x128:5:cl3", "128x128:5:whole:halves", "128x128:5:half"])
def test_sm90_gemm_bad_also_exits_2_naming_the_flag(value):
    err = refused("sm90_gemm", "--cold-duel", "--m-list", "2500", "--also", value)
    assert "--also" in err and "TILE:STAGES" in err


def test_sm90_gemm_also_rows_build_as_labelled(sm90_script):
    """Each --also entry is the build its label names: the engine's own choices unless coop (the
    cooperative consumers), skN (stream-K past the first N tiles) or dp (no stream-K code) says."""
    mod, h200 = sm90_script
    rows = mod.knob_list("128x160:4,128x160:5:coop:sk264,128x160:4:dp,128x128:4:coop")
    labels = [mod.also_label(t, st, over) for t, st, over in rows]
    assert labels == ["engine 128x160 s4", "engine 128x160 s5 coop sk264", "engine 128x160 s4 dp",
                      "engine 128x128 s4 coop"]
    built = [mod.build_variant(h200, 2500, 2560, 2560, mod.engine_default(t, st, "bf16")._replace(**over)).info
             for t, st, over in rows]
    assert built[0]["consumers"].startswith("ping-pong")
    assert built[0]["schedule"] == "data-parallel, the last 56 tiles in 64-row halves"
    assert built[1]["consumers"] == "cooperative"
    assert built[1]["schedule"] == "stream-K over 56 tiles after 264 data-parallel"
    assert built[2]["schedule"] == "data-parallel, the last 56 tiles in 64-row halves"
    assert built[3]["consumers"] == "cooperative"
    # at M = 2400 the engine plans a stream-K tail for cooperative 128x160 s5; dp takes it out
    coop = mod.knob_list("128x160:5:coop,128x160:5:coop:dp")
    at2400 = [mod.build_variant(h200, 2400, 2560, 2560, mod.engine_default(t, st, "bf16")._replace(**over))
              for t, st, over in coop]
    assert at2400[0].info["schedule"].startswith("stream-K") and "#define STREAMK 1" in at2400[0].source
    assert at2400[1].info["schedule"] == "data-parallel" and "#define STREAMK 0" in at2400[1].source


def test_sm90_gemm_also_cluster_options_build_that_cluster(sm90_script):
    """cl1 / cl2 in an --also entry override ``use_cluster``: at M = 2400 the engine now runs
    ping-pong 128x128 unclustered (2x1 pairs would add a round); cl2 times the paired build."""
    mod, h200 = sm90_script
    rows = mod.knob_list("128x128:5:cl2,128x128:5:cl1,128x128:5")
    assert [mod.also_label(t, st, over) for t, st, over in rows] == [
        "engine 128x128 s5 cl2", "engine 128x128 s5 cl1", "engine 128x128 s5"]
    built = [mod.build_variant(h200, 2400, 2560, 2560, mod.engine_default(t, st, "bf16")._replace(**over)).info
             for t, st, over in rows]
    assert built[0]["cluster"].startswith("2x1") and built[1]["cluster"] == "none"
    assert built[2]["cluster"] == "none"
    assert mod.cluster_tag(built[0]) == "2x1" and mod.cluster_tag(built[1]) == ""


@pytest.mark.parametrize("value", ["fp32", "", "bf16,tf32"])
def test_sm90_gemm_bad_scan_dtypes_exit_2_naming_the_flag(value):
    err = refused("sm90_gemm", "--torch-scan", "--scan-dtypes", value)
    assert "--scan-dtypes" in err and "bf16 and/or fp16" in err


def test_swap_probe_fit_rows_are_swapped_tiles_that_fill_the_rounds():
    """``fit`` picks the fewest rows of a swapped tile (136-200) whose row blocks fill two rounds with
    N / 128 column blocks, at any M and N: never an unswapped tile (such as 128x128 at the small
    check shapes, timed under the swapped label)."""
    pytest.importorskip("cupy")
    import kernels.sm90.tiles as sm90_tiles
    from bench import swap_probe as probe
    assert [probe.fit_rows(m, 2560, "fit", 132) for m in (1700, 2083, 2200, 2500)] == [136, 168, 176, 200]
    assert probe.fit_rows(3000, 2560, "fit3", 132) == 160 and probe.fit_rows(2083, 2560, 192, 132) == 192
    for m in (1, 333, 1000, 9000):
        for n in (264, 1032, 2600):
            assert f"{probe.fit_rows(m, n, 'fit', 132)}x128" in sm90_tiles.SWAP_TILES, (m, n)


def test_alternation_reads_a_clock_for_windows_shorter_than_the_sampling_interval(monkeypatch):
    """Each candidate's window of 20 launches ends with one sample under its tag, so a table of small
    shapes (windows far under the sampler's 10 ms) still reads each candidate's SM clock."""
    pytest.importorskip("cupy")
    from bench.sm90 import report

    class Sampler:  # the NVML sampler's interface, its interval never coming round
        def __init__(self):
            self.tag, self.samples = None, []

        def snap(self):
            self.samples.append({"sm_clock_mhz": 1980 if self.tag == "alt a" else 1755, "power_w": 300.0,
                                 "tag": self.tag})

    monkeypatch.setattr(report, "time_fn", lambda fn, warmup, iters: {"median_ms": 0.04})
    sampler = Sampler()
    per = report.alternate({"a": lambda: None, "b": lambda: None}, 3, sampler, tag="alt ", warm=0)
    rows = {r[0]: r for r in report.alternation_rows(per, sampler, tag="alt ")}
    assert rows["a"][4] == 1980 and rows["b"][4] == 1755 and sampler.tag is None
