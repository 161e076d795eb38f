"""One CLI grammar (issue 47, defect 9): ``--json``, ``--backend``, ``-o/--output`` on every command
that has them; old spellings still work but are not shown; argument errors show the command's own
usage; unknown names exit 2 with the list of known ones; errors name their field without Python
reprs (defect 12)."""

from __future__ import annotations

import json

import pytest

from tui.cli.main import COMMANDS, build_parser, main

DEPRECATED = ("--format", "--sim ", "--sim]", "--out ", "--out]", "--out-dir", "--sim-fault")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("name", [n for n in COMMANDS if n not in ("export", "baseline")])
def test_help_shows_only_the_one_grammar(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    text = _help(capsys, name)
    assert not [d for d in DEPRECATED if d in text + " "], text


def test_an_unknown_option_gets_the_commands_usage_not_the_top_levels(capsys):
    code = None
    with pytest.raises(SystemExit) as exc:
        main(["soak", "--duration", "1", "--no-such-flag"])
    code = exc.value.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("usage: tui soak") and "tui soak: error: unrecognized arguments" in err
    with pytest.raises(SystemExit):
        main(["baseline", "set", "--no-such-flag"])
    assert "tui baseline set: error: unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_an_unknown_option_with_json_is_one_json_error(capsys):
    with pytest.raises(SystemExit):
        main(["history", "--json", "--no-such-flag"])
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "invalid" and "usage: tui history" in err


def test_report_takes_json_and_the_old_format_flag(capsys):
    code, new, _ = run_cli(capsys, "report", "--json")
    code_old, old, _ = run_cli(capsys, "report", "--format", "json")
    assert code == code_old == 0
    a, b = json.loads(new), json.loads(old)
    assert set(a) == set(b) and a["best_runs"] == b["best_runs"]
    code, md, _ = run_cli(capsys, "report")
    assert md.startswith("# SOL Cockpit report")


def test_exporter_takes_backend_sim_and_the_old_sim_flag(capsys):
    code, out, _ = run_cli(capsys, "exporter", "--backend", "sim", "--once")
    assert code == 0 and 'simulated="true"' in out
    code, out, _ = run_cli(capsys, "exporter", "--sim", "--once")
    assert code == 0 and 'simulated="true"' in out
    code, _, err = run_cli(capsys, "exporter", "--profile", "h100", "--once")
    assert code == 2 and "--backend sim" in err


def test_soak_help_lists_only_what_applies(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    text = _help(capsys, "soak")
    for flag in ("--iterations", "--energy", "--rest", "--no-verify", "--no-peers", "compile_error"):
        assert flag not in text, flag
    assert "--fault {none,corrupt,throttle,ecc}" in text and "--fault-after" in text


def test_soak_fault_and_its_old_spelling(capsys, monkeypatch):
    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "200")
    base = ["soak", "--backend", "sim", "--duration", "20s", "--no-store", "--json"]
    for flag in ("--fault", "--sim-fault"):
        code, out, _ = run_cli(capsys, *base, flag, "corrupt")
        assert code == 1 and json.loads(out)["error_kind"] == "sdc", flag
    code, out, err = run_cli(capsys, *base, "--iterations", "50")
    assert code == 0 and "--iterations does not apply to a soak" in err


def test_fleet_report_writes_with_output_and_output_dir(capsys, tmp_path):
    base = ["fleet-report", "--backend", "sim", "--no-checks", "--no-peers", "--iterations", "5", "--host", "n1"]
    assert run_cli(capsys, *base, "-o", str(tmp_path / "a.json"))[0] == 0
    assert run_cli(capsys, *base, "--output-dir", str(tmp_path / "d"))[0] == 0
    assert (tmp_path / "a.json").is_file() and (tmp_path / "d" / "n1.json").is_file()


@pytest.mark.parametrize("argv, listed", [
    (["history", "--kernel", "nosuch"], "gemm_residual"),
    (["history", "--profile", "nosuch"], "h100-sxm"),
    (["check", "--profile", "nosuch", "--only", "host"], "h100-sxm"),
    (["report", "--profile", "nosuch"], "h100-sxm"),
    (["baseline", "list", "--kernel", "nosuch"], "gemm_residual"),
    (["fleet-report", "--backend", "sim", "--no-checks", "--kernel", "nosuch"], "gemm_residual"),
    (["fleet-report", "--backend", "sim", "--no-checks", "--profile", "nosuch"], "h100-sxm"),
    (["inspect", "/bin/sh", "--profile", "nosuch"], "h100-sxm"),
])
def test_an_unknown_name_exits_2_with_the_known_ones(argv, listed, capsys):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "unknown" in err and listed in err and out == ""
    code, out, _ = run_cli(capsys, *argv, "--json") if argv[0] != "report" else (2, "", "")
    if out:
        assert json.loads(out)["field"] in ("kernel", "profile")


def test_history_takes_a_profile_alias_and_a_stored_user_kernel(capsys):
    code, _, _ = run_cli(capsys, "bench", "--backend", "sim", "--iterations", "5", "--no-peers")
    assert code == 0
    code, out, _ = run_cli(capsys, "history", "--profile", "h100", "--json")
    assert code == 0 and len(json.loads(out)["runs"]) == 1


@pytest.mark.parametrize("argv", [["--shape", "m=10"], ["--shape", "m=10,n=x"]])
def test_a_shape_error_names_its_field_without_a_python_repr(argv, capsys):
    code, out, _ = run_cli(capsys, "bench", "--backend", "sim", *argv, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["field"] == "shape" and "{'" not in doc["error"]


def test_a_task_file_shape_error_reads_as_the_flag_is_written(capsys, tmp_path):
    task = tmp_path / "t.toml"
    task.write_text('kernel = "gemm_residual"\nshape = {m = 10}\n')
    code, out, _ = run_cli(capsys, "bench", "--backend", "sim", "--task", str(task), "--json")
    doc = json.loads(out)
    assert code == 2 and doc["field"] == "shape" and "shape=m=10" in doc["error"] and "{'" not in doc["error"]


def test_every_command_parses_with_the_whole_parser():
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)  # type: ignore[union-attr]


def test_no_driver_advice_names_the_front_ends_own_control(capsys, monkeypatch):
    """The engine's fix for a missing driver names no flag (the cockpit says 'press S'); the CLI adds
    its own, --backend sim, where the command takes it (issue 47, defect 21)."""
    import engine.runner
    from engine import BackendUnavailable, nvml

    assert "--backend" not in (nvml._explain(Exception("NVML Shared Library Not Found")).fix or "")

    def no_gpu(*args, **kwargs):
        raise BackendUnavailable("no NVIDIA driver found", fix="install the NVIDIA driver")

    monkeypatch.setattr(engine.runner, "choose_backend", no_gpu)
    code, out, err = run_cli(capsys, "bench", "--backend", "cuda", "--json")
    assert code == 3 and json.loads(out)["fix"] == "install the NVIDIA driver"  # the JSON's fix: unchanged
    assert "or rehearse without a GPU: --backend sim" in err


def test_a_shapes_file_error_shows_toml_not_a_python_dict(capsys, tmp_path):
    shapes = tmp_path / "s.toml"
    shapes.write_text('[[shape]]\nname = "a"\nm = true\nn = "x"\n')
    code, _, err = run_cli(capsys, "tune", "--backend", "sim", "--shapes", str(shapes))
    assert code == 2 and 'got m=true, n="x"' in err and "{'" not in err
