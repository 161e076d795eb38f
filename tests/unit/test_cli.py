"""The headless CLI: stable exit codes and JSON shapes (0 ok, 1 run failed, 2 bad input, 3 no backend)."""

import json

import pytest

from engine import nvml
from tui.cli.main import main

SIM = ["--backend", "sim", "--iterations", "10", "--warmup", "2"]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_sim_json(capsys):
    code, out, err = run_cli(capsys, "bench", *SIM, "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("status", "simulated", "t_sol_ms", "time_ms", "tflops", "gbps", "sol_pct", "bound", "correct",
                "max_abs_err", "peers", "solexec_score", "run_id"):
        assert key in d
    assert d["status"] == "ok" and d["simulated"] is True and d["correct"] is True
    assert set(d["time_ms"]) == {"median", "p10", "p90"}
    assert d["t_sol_ms"] == pytest.approx(0.1085, abs=1e-4)
    assert {p["name"] for p in d["peers"]} >= {"cupy_matmul_add", "cublas_gemm_beta1"}


def test_bench_energy_flag_on_the_simulated_device_says_not_measured(capsys):
    code, out, _ = run_cli(capsys, "bench", *SIM, "--no-peers", "--energy", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["energy"] == {"note": "SIMULATED: no power or energy is measured"}
    code, out, _ = run_cli(capsys, "bench", *SIM, "--no-peers", "--json")
    assert json.loads(out)["energy"] is None  # off unless asked for


def test_bench_energy_too_short_exits_2(capsys):
    code, _out, err = run_cli(capsys, "bench", *SIM, "--energy", "0.1")
    assert code == 2 and "energy_s" in err


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32", "tf32"])
def test_bench_takes_every_dtype(capsys, dtype):
    """Every dtype the engine knows is accepted on the command line (tf32 was once refused)."""
    code, out, _ = run_cli(capsys, "bench", *SIM, "--dtype", dtype, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["dtype"] == dtype and d["correct"] is True


def test_bench_unknown_dtype_exits_2_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", *SIM, "--dtype", "int8"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--dtype" in err and "int8" in err and "tf32" in err  # names the flag and the choices


def test_impossible_knobs_exit_2_naming_the_knob_and_what_fits(capsys):
    """A stage count past the deepest ring, and a narrow tile with fp32 data: exit 2, the knob named,
    and the fix lists what fits (the stage counts for the tile asked for, where it exists)."""
    code, _out, err = run_cli(capsys, "bench", *SIM, "--profile", "h200", "--block-size", "64x80",
                              "--pipelining", "13", "--no-store")
    assert code == 2 and "MEMORY_PIPELINING=13" in err
    assert "MEMORY_PIPELINING options for 64x80: off, 2, 3" in err and "11" in err
    code, _out, err = run_cli(capsys, "bench", *SIM, "--profile", "h200", "--block-size", "64x80",
                              "--dtype", "tf32", "--no-store")
    assert code == 2 and "BLOCK_SIZE=64x80" in err and "16-bit" in err
    assert "MEMORY_PIPELINING options" not in err  # no stage list for a tile this dtype cannot take


def test_bench_human_output_is_labelled_simulated(capsys):
    code, out, _ = run_cli(capsys, "bench", *SIM)
    assert code == 0 and "SIMULATED" in out


def test_bench_names_the_kernel_path_and_fp32_math(capsys):
    """The human output names the path that ran in full, and for fp32 on a Hopper profile the
    3xTF32 arithmetic; its SOL % is against the fp32 ceiling (tf32 / 3), so under 100 %."""
    code, out, _ = run_cli(capsys, "bench", *SIM, "--profile", "h200", "--dtype", "fp32")
    text = " ".join(out.split())
    assert code == 0 and "ours: wgmma+TMA" in text and "3xTF32" in text
    code, out, _ = run_cli(capsys, "bench", *SIM, "--profile", "h200", "--dtype", "fp32", "--json")
    d = json.loads(out)
    assert d["t_sol_ms"] == pytest.approx(2 * 8192 * 2560 * 2560 / (494.7e12 / 3) * 1e3, rel=1e-3)
    assert 0 < d["sol_pct"] < 100
    code, out, _ = run_cli(capsys, "bench", *SIM, "--profile", "a100-sxm-80gb", "--dtype", "fp32")
    assert code == 0 and "3xTF32" not in out


def test_bench_result_is_stored_and_listed(capsys):
    run_cli(capsys, "bench", *SIM, "--json")
    code, out, _ = run_cli(capsys, "history", "--json")
    runs = json.loads(out)["runs"]
    assert code == 0 and len(runs) == 1 and runs[0]["simulated"] is True and runs[0]["status"] == "ok"


def test_impossible_block_size_exits_2_naming_the_knob(capsys):
    code, out, err = run_cli(capsys, "bench", *SIM, "--block-size", "12345")
    assert code == 2 and "BLOCK_SIZE=12345" in err and out == ""


def test_env_block_size_too_large_for_shared_memory(capsys, monkeypatch):
    monkeypatch.setenv("BLOCK_SIZE", "128x256")
    monkeypatch.setenv("MEMORY_PIPELINING", "4")
    code, _, err = run_cli(capsys, "bench", *SIM, "--profile", "rtx-4090")
    assert code == 2 and "MEMORY_PIPELINING=4" in err and "shared memory" in err and "101376" in err


def test_malformed_task_file_exits_2_with_line(capsys, tmp_path):
    f = tmp_path / "task.toml"
    f.write_text('kernel = "gemm_residual"\n[shape\nm = 1\n')
    code, _, err = run_cli(capsys, "bench", *SIM, "--task", str(f))
    assert code == 2 and str(f) in err and "line 2" in err


def test_unknown_profile_exits_2_listing_known(capsys):
    code, _, err = run_cli(capsys, "bench", *SIM, "--profile", "h900")
    assert code == 2 and "h100-sxm" in err
    code, _, err = run_cli(capsys, "profiles", "h900")
    assert code == 2 and "rtx-4090" in err


def test_profiles_json(capsys):
    code, out, _ = run_cli(capsys, "profiles", "--json")
    d = json.loads(out)
    assert code == 0 and len(d["profiles"]) >= 7 and "detected_profile" in d


def test_kernels_json(capsys):
    code, out, _ = run_cli(capsys, "kernels", "--json", "--profile", "h200")
    d = json.loads(out)
    assert code == 0 and d["kernels"][0]["name"] == "gemm_residual"


def _no_driver(monkeypatch):
    monkeypatch.setattr(nvml, "probe", lambda: (False, "no NVIDIA driver found: libnvidia-ml.so.1 missing",
                                                 "install the NVIDIA driver"))


def test_cuda_without_driver_exits_3_with_fix(capsys, monkeypatch):
    _no_driver(monkeypatch)
    code, out, err = run_cli(capsys, "bench", "--backend", "cuda", "--json")
    assert code == 3 and "no NVIDIA driver" in err and "fix:" in err
    d = json.loads(out)  # --json: one object on stdout whatever the outcome
    assert d["status"] == "unavailable" and d["exit_code"] == 3 and d["fix"] == "install the NVIDIA driver"


def test_auto_falls_back_to_sim_and_says_so(capsys, monkeypatch):
    _no_driver(monkeypatch)
    code, out, err = run_cli(capsys, "bench", "--backend", "auto", "--iterations", "5", "--json")
    d = json.loads(out)
    assert code == 0 and d["simulated"] is True
    assert "SIMULATED" in err and any("SIMULATED" in n for n in d["notices"])


def test_failed_run_exits_1(capsys):
    code, out, _ = run_cli(capsys, "bench", *SIM, "--fault", "nan", "--json")
    d = json.loads(out)
    assert code == 1 and d["status"] == "incorrect" and d["correct"] is False


def test_profile_mismatch_is_a_visible_warning(capsys, monkeypatch):
    from engine.backends import select

    monkeypatch.setattr(select, "probe_cuda", lambda device=0: select.BackendChoice("cuda", device_name="NVIDIA H200"))
    from engine.runner import prepare
    from engine.task import TaskSpec

    prep = prepare(TaskSpec(backend="auto"), "a100")
    assert prep.profile.name == "a100-sxm-80gb" and prep.detected_profile == "h200"
    assert any("does not match the detected device" in n for n in prep.notices)
    assert prepare(TaskSpec(backend="auto")).profile.name == "h200"


def test_peer_rows_of_a_real_run_carry_the_timed_after_ours_caveat(capsys):
    """Real runs time the peers right after ours, on a warmer card: the CLI, the JSON and the Run
    screen say so; simulated runs and runs without peers do not."""
    from engine.result import PeerResult, RunResult, RunStatus
    from engine.timing import timing_stats
    from tui.cli.bench import print_result
    from tui.screens.run import summary_text

    peer = PeerResult(name="cublas_gemm", label="cuBLAS GEMM", timing=timing_stats([0.17, 0.18]))
    base = dict(status=RunStatus.ok, task={"kernel": "gemm_residual", "dtype": "bf16"}, profile="h200",
                timing=timing_stats([0.15, 0.16]))
    real = RunResult(simulated=False, peers=[peer], **base)
    assert "right after ours" in real.peers_caveat and "0.1415 ms rested" in real.peers_caveat
    assert real.summary_json()["peers_note"] == real.peers_caveat
    assert "right after ours" in summary_text(real).plain
    print_result(real, [])
    assert "note: peers are timed right after ours" in " ".join(capsys.readouterr().out.split())
    assert RunResult(simulated=True, peers=[peer], **base).peers_caveat is None
    assert RunResult(simulated=False, peers=[], **base).peers_caveat is None
    failed = PeerResult(name="cupy_matmul_add", label="CuPy", error="boom")
    assert RunResult(simulated=False, peers=[failed], **base).peers_caveat is None


def test_timing_note_says_rest_and_hold(capsys):
    """A run says how it was timed where that is not plain back-to-back launches: the rest (not
    applied on the simulated device), which implementations went behind the hold kernel, and a
    warning where a hold ran out; the CLI, the JSON and the Run screen carry it."""
    from engine.result import PeerResult, RunResult, RunStatus
    from engine.timing import timing_stats
    from tui.cli.bench import print_result
    from tui.screens.run import summary_text

    peer = PeerResult(name="cublas_gemm", label="cuBLAS GEMM", timing=timing_stats([0.011]))
    base = dict(status=RunStatus.ok, profile="h200", timing=timing_stats([0.017]), peers=[peer])
    task = {"kernel": "gemm_residual", "dtype": "bf16", "rest_s": 3.0}
    hold = {"held": ["ours", "cublas_gemm"], "not_held": [], "held_chunks": 2, "expired_chunks": 0}
    real = RunResult(simulated=False, task=task, validity={"queue_hold": hold}, **base)
    note = real.timing_note
    assert "after 3 s of rest" in note and "hold kernel" in note and "ours, cublas_gemm" in note
    assert "ran out" not in note and real.summary_json()["timing_note"] == note
    assert "timing: ours and each peer timed after 3 s of rest" in summary_text(real).plain
    print_result(real, [])
    assert "timing: ours and each peer timed after 3 s of rest" in " ".join(capsys.readouterr().out.split())
    late = RunResult(simulated=False, task={**task, "rest_s": 0.0},
                     validity={"queue_hold": {**hold, "expired_chunks": 1, "expired": ["cublas_gemm"]}}, **base)
    assert "rest" not in late.timing_note.split(";")[0]
    assert "1 of 2 held chunks (cublas_gemm) ran out" in late.timing_note
    sim = RunResult(simulated=True, task=task, **base)
    assert sim.timing_note == "rest 3 s not applied: the simulated device has no card to rest"
    plain = RunResult(simulated=False, task={**task, "rest_s": 0.0},
                      validity={"queue_hold": {**hold, "held": []}}, **base)
    assert plain.timing_note is None and plain.summary_json()["timing_note"] is None


@pytest.mark.parametrize("value,needle", [("99", "rest_s"), ("-1", "rest_s"), ("abc", "--rest")])
def test_bench_bad_rest_exits_2_naming_it(capsys, value, needle):
    """--rest past 60 s, negative or not a number: exit 2, the field or flag named."""
    try:
        code, _out, err = run_cli(capsys, "bench", *SIM, "--rest", value)
    except SystemExit as exc:  # argparse refuses a non-number itself
        code, err = exc.code, capsys.readouterr().err
    assert code == 2 and needle in err, err


def test_tables_to_a_pipe_are_log_width_and_a_terminal_or_columns_keeps_its_own(monkeypatch):
    """Written to a file or pipe with COLUMNS unset, the CLI's tables are LOG_WIDTH wide (rich's 80
    wrapped the bench table's implementation names over five lines); a terminal and COLUMNS keep
    rich's own width."""
    import io

    from tui.cli import output

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(output.sys, "stdout", io.StringIO())
    assert output.stdout_console().width == output.LOG_WIDTH == 120
    monkeypatch.setattr(output.sys, "stdout", Tty())
    assert output._width(output.sys.stdout) is None
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(output.sys, "stdout", io.StringIO())
    assert output.stdout_console().width == 100
    monkeypatch.setattr(output.sys, "stderr", io.StringIO())
    assert output.stderr_console().width == 100
    # a malformed COLUMNS is ignored (rich took "0" as zero columns, "abc" as 80)
    for bad in ("0", "abc", "-5", " "):
        monkeypatch.setenv("COLUMNS", bad)
        assert output.stdout_console().width == output.LOG_WIDTH, bad
    monkeypatch.setenv("COLUMNS", "abc")
    monkeypatch.setattr(output.sys, "stdout", Tty())  # a terminal whose size cannot be read
    assert output.stdout_console().width == output.LOG_WIDTH


@pytest.mark.parametrize("argv, code, field", [
    (["bench", "--backend", "sim", "--block-size", "999x999", "--json"], 2, "BLOCK_SIZE"),
    (["bench", "--backend", "sim", "--iterations", "abc", "--json"], 2, "--iterations"),
    (["history", "--limit", "0", "--json"], 2, "--limit"),
    (["tune", "--backend", "sim", "--budget", "0", "--json"], 2, "--budget"),
])
def test_every_json_command_prints_one_object_whatever_the_outcome(argv, code, field, capsys):
    """--json prints one JSON object on stdout on exit 2 and 3 too: status, error, field, fix."""
    import json

    from tui.cli.main import main

    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's own errors
        got = exc.code
    out = json.loads(capsys.readouterr().out)
    assert got == code and out["exit_code"] == code and out["status"] == "invalid"
    assert out["field"] == field and out["error"]


def test_the_unknown_tile_error_lists_the_tiles_once(capsys):
    from tui.cli.main import main

    assert main(["bench", "--backend", "sim", "--block-size", "999x999"]) == 2
    assert capsys.readouterr().err.count("200x128") == 1


def test_human_output_prints_no_python_reprs(capsys, tmp_path):
    """Lists, tables and None read as text, not as Python's repr."""
    from tui.cli.main import main
    from tui.cli.output import human

    assert human(["h200-sxm"]) == "h200-sxm" and human({"fp32": 66.9, "bf16": 989.4}) == "fp32=66.9, bf16=989.4"
    assert human(None) == "-" and human(True) == "yes" and human({"block_size": "smaller"}) == "block_size=smaller"
    assert main(["profiles", "h200"]) == 0
    out = capsys.readouterr().out
    assert "['" not in out and "{'" not in out and "None" not in out
    assert main(["bench", "--backend", "sim", "--store", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "shape=8192x2560x2560" in out and "{'" not in out


def test_human_shows_escape_sequences_in_any_value_as_text():
    """A value of any other type (a path, a host read from a report) holding a terminal title
    sequence prints it escaped, also inside lists and tables."""
    from pathlib import PurePosixPath

    from tui.cli.output import human

    hostile = "\x1b]0;x\x1b\\"
    for value in (hostile, PurePosixPath(f"/tmp/{hostile}"), [hostile], {"host": hostile}):
        shown = human(value)
        assert "\x1b" not in shown and "\\x1b]0;x\\x1b\\" in shown, shown
