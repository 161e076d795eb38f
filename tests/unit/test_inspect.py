"""`tui inspect`: real binaries built with nvcc on a machine without a GPU, checked for the GPU of
a profile (the H200's cc 9.0), their libraries, their runtime, and a smoke run."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from engine.binary_inspect import inspect_binary
from engine.binary_inspect import report as report_mod
from engine.binary_inspect.report import Gpu
from tests.unit.cuda_binaries import build_shared, nvcc_path
from tui.cli.main import main


@pytest.fixture(scope="session")
def binaries(tmp_path_factory) -> dict[str, Path]:
    nvcc = nvcc_path()
    if nvcc is None:
        pytest.skip("nvcc not found (PATH or /usr/local/cuda/bin): the CUDA toolkit builds the test binaries")
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found: it builds the shared library and the program without CUDA")
    # built once per run and shared by the xdist workers (the base temp's parent is the run's)
    return build_shared(tmp_path_factory.getbasetemp().parent, tmp_path_factory.mktemp("cuda_bins"), nvcc)


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch):
    """These tests judge for a profile or the assumed one, whatever GPU the machine has."""
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda index: None)
    monkeypatch.delenv("CUDA_DISABLE_PTX_JIT", raising=False)


def cli(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["inspect", *argv, "--json"] if "--" not in argv else
                ["inspect", *argv[:argv.index("--")], "--json", *argv[argv.index("--"):]])
    out = capsys.readouterr().out
    return code, json.loads(out)


def by_id(doc: dict, fid: str) -> list[dict]:
    return [f for f in doc["findings"] if f["id"] == fid]


# --- real binaries --------------------------------------------------------------------------------

def test_sm80_sass_only_does_not_run_on_h200_and_says_how_to_rebuild(binaries, capsys):
    code, doc = cli(capsys, str(binaries["sm80"]), "--profile", "h200")
    assert code == 1 and doc["status"] == "blocked" and doc["runnable"] is False
    assert doc["sass"] == ["sm_80"] and doc["ptx"] == [] and doc["runs_via"] == "none"
    assert doc["target"]["compute_capability"] == "9.0" and doc["target"]["source"] == "profile"
    (f,) = by_id(doc, "arch.no-code")
    assert f["severity"] == "error" and f["rule"] == "cuda-no-kernel-image"
    assert "sm_80 without PTX" in f["detail"]
    assert "-gencode arch=compute_90,code=sm_90" in f["fix"] and "CMAKE_CUDA_ARCHITECTURES=90" in f["fix"]
    for finding in doc["findings"]:
        assert set(finding) == {"id", "severity", "title", "detail", "fix", "rule"}


def test_sm80_sass_runs_on_an_a100_and_an_l40s(binaries, capsys):
    """Binary compatibility within a major version: sm_80 SASS on cc 8.0 and 8.9."""
    for profile in ("a100-40gb", "l40s"):
        code, doc = cli(capsys, str(binaries["sm80"]), "--profile", profile)
        assert code == 0 and doc["runs_via"] == "sass", (profile, doc["findings"])
        assert not by_id(doc, "arch.no-code")


def test_ptx_runs_on_h200_through_jit_with_a_warm_up_note(binaries, capsys):
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200")
    assert code == 0 and doc["status"] == "runnable"
    assert doc["ptx"] == ["compute_80"] and doc["runs_via"] == "ptx-jit"
    (f,) = by_id(doc, "arch.ptx-jit")
    assert f["severity"] == "warn" and f["rule"] == "ptx-jit-warmup"
    assert "first launch" in f["detail"] and "CUDA_CACHE_MAXSIZE" in f["fix"]
    assert "PTX ISA 9.0" in f["detail"]  # nvcc 13.0 writes ISA 9.0: a driver for CUDA 13.0 is needed


def test_ptx_newer_than_the_driver_blocks(binaries, monkeypatch, capsys):
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda i: Gpu("NVIDIA H200", "9.0", "550.54.15", "12.4"))
    code, doc = cli(capsys, str(binaries["ptx80"]))
    assert code == 1 and doc["target"]["source"] == "nvml" and doc["target"]["profile"] == "h200"
    (f,) = by_id(doc, "arch.ptx-too-new")
    assert f["rule"] == "cuda-unsupported-ptx" and "12.4" in f["detail"]


def test_jit_disabled_by_the_environment_blocks(binaries, monkeypatch, capsys):
    monkeypatch.setenv("CUDA_DISABLE_PTX_JIT", "1")
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200")
    assert code == 1 and by_id(doc, "arch.jit-disabled")[0]["rule"] == "cuda-no-kernel-image"


def test_no_gpu_and_no_profile_says_what_was_assumed(binaries, capsys):
    code, doc = cli(capsys, str(binaries["ptx80"]))
    t = doc["target"]
    assert t["source"] == "assumed" and t["profile"] == report_mod.ASSUMED_PROFILE
    assert "assumed" in t["note"] and "--profile" in t["note"]


def test_profile_that_disagrees_with_the_gpu_is_noted(binaries, monkeypatch, capsys):
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda i: Gpu("NVIDIA A100-SXM4-80GB", "8.0", "580.65.06", "13.0"))
    code, doc = cli(capsys, str(binaries["sm80"]), "--profile", "h200")
    assert code == 1 and "cc 8.0" in doc["target"]["note"]
    assert doc["target"]["driver_cuda"] == "13.0" and not by_id(doc, "runtime.driver-unknown")


def test_static_and_shared_cuda_runtime(binaries, capsys):
    _, doc = cli(capsys, str(binaries["sm80"]), "--profile", "a100-40gb")
    assert doc["runtime"]["linkage"] == "static" and doc["runtime"]["built_with"] == "13.0"
    _, doc = cli(capsys, str(binaries["app_foo"]), "--profile", "a100-40gb")
    rt = doc["runtime"]
    assert rt["linkage"] == "shared" and rt["soname"] == "libcudart.so.13" and rt["version"].startswith("13")
    (f,) = by_id(doc, "runtime.driver-unknown")
    assert f["rule"] == "cuda-insufficient-driver" and "13.0 or newer" in f["fix"]


def test_runtime_newer_than_the_driver_blocks(binaries, monkeypatch, capsys):
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda i: Gpu("NVIDIA A100-SXM4-40GB", "8.0", "550.54.15", "12.4"))
    code, doc = cli(capsys, str(binaries["sm80"]))
    (f,) = by_id(doc, "runtime.newer-than-driver")
    assert code == 1 and f["rule"] == "cuda-insufficient-driver" and "580" in f["fix"]


def test_library_beside_the_binary_is_found(binaries, capsys):
    _, doc = cli(capsys, str(binaries["app_foo"]), "--profile", "a100-40gb")
    foo = [lib for lib in doc["libraries"] if lib["name"] == "libfoo.so"]
    assert foo and foo[0]["found"] and foo[0]["path"].endswith("lib/libfoo.so")
    assert not [f for f in by_id(doc, "libs.missing") if "libfoo" in f["title"]]


def test_hidden_library_is_reported_missing_with_a_fix(binaries, tmp_path, capsys):
    app = tmp_path / "bin" / "app_foo"
    app.parent.mkdir()
    shutil.copy2(binaries["app_foo"], app)
    code, doc = cli(capsys, str(app), "--profile", "a100-40gb")
    assert code == 1 and doc["status"] == "blocked"
    (f,) = [f for f in by_id(doc, "libs.missing") if "libfoo" in f["title"]]
    assert f["title"] == "libfoo.so not found" and f["severity"] == "error" and f["rule"] == "missing-shared-object"
    assert "LD_LIBRARY_PATH" in f["fix"]
    assert [lib for lib in doc["libraries"] if lib["name"] == "libfoo.so"][0]["found"] is False


def test_hidden_library_found_nearby_gives_the_folder(binaries, tmp_path, capsys):
    app = tmp_path / "bin" / "app_foo"
    app.parent.mkdir()
    (tmp_path / "lib64").mkdir()
    shutil.copy2(binaries["app_foo"], app)
    shutil.copy2(binaries["libfoo"], tmp_path / "lib64" / "libfoo.so")
    _, doc = cli(capsys, str(app), "--profile", "a100-40gb")
    (f,) = [f for f in by_id(doc, "libs.missing") if "libfoo" in f["title"]]
    assert f"LD_LIBRARY_PATH={tmp_path / 'lib64'}" in f["fix"]


def test_human_output_names_the_rule_and_the_fix(binaries, capsys):
    code = main(["inspect", str(binaries["sm80"]), "--profile", "h200"])
    out = capsys.readouterr().out
    assert code == 1
    assert "sm_80" in out and "cuda-no-kernel-image" in out and "compute_90" in out and "will not run" in out


# --- smoke runs ---------------------------------------------------------------------------------

def test_run_diagnoses_no_kernel_image_output(binaries, capsys):
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200", "--run", "--", "no-image")
    s = doc["smoke"]
    assert code == 1 and s["exit_code"] == 1 and not s["timed_out"]
    assert s["rules"][0] == "cuda-no-kernel-image" and "no kernel image" in s["output_tail"]
    (f,) = [f for f in by_id(doc, "smoke.output") if f["rule"] == "cuda-no-kernel-image"]
    assert f["severity"] == "error" and "no kernel image" in f["detail"]


def test_run_that_passes_is_runnable(binaries, capsys):
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200", "--run", "--", "ok")
    assert code == 0 and doc["smoke"]["exit_code"] == 0 and doc["smoke"]["output_tail"].strip() == "ok"


def test_run_failure_without_a_known_pattern(binaries, capsys):
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200", "--run", "--", "exit3")
    (f,) = by_id(doc, "smoke.failed")
    assert code == 1 and f["rule"] == "binary-smoke-failed" and "status 3" in f["title"]
    assert "bad arguments" in f["detail"]
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200", "--run", "--", "segv")
    assert code == 1 and doc["smoke"]["signal"] == "SIGSEGV" and "SIGSEGV" in by_id(doc, "smoke.failed")[0]["title"]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_run_past_the_timeout_is_killed_with_its_children(binaries, capsys):
    start = time.monotonic()
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200", "--run", "--timeout", "1", "--", "sleep")
    assert time.monotonic() - start < 15
    s = doc["smoke"]
    assert code == 1 and s["timed_out"] and s["exit_code"] is None and s["signal"] == "SIGKILL"
    (f,) = by_id(doc, "smoke.timeout")
    assert f["rule"] == "task-timeout-hang" and "1 s" in f["title"]
    pids = [int(p) for p in re.findall(r"(?:parent|child) (\d+)", s["output_tail"])]
    assert len(pids) == 2
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in pids), "the smoke run left a process behind"


def test_program_arguments_after_dashdash_keep_their_dashes(binaries, capsys):
    code, doc = cli(capsys, str(binaries["ptx80"]), "--profile", "h200", "--run", "--", "ok", "--json", "-x")
    assert code == 0 and doc["smoke"]["command"][1:] == ["ok", "--json", "-x"]


# --- bad input: exit 2 with a clear message ---------------------------------------------------------

@pytest.mark.parametrize(("make", "words"), [
    (lambda d: d / "missing", "no such file"),
    (lambda d: d, "is a folder"),
    (lambda d: _write(d / "notes.txt", b"hello, this is text\n"), "not an ELF file"),
    (lambda d: _write(d / "empty", b""), "an empty file"),
    (lambda d: _write(d / "run.sh", b"#!/bin/sh\necho hi\n"), "a script"),
    (lambda d: _write(d / "trunc", b"\x7fELF\x02\x01\x01" + b"\0" * 40), "damaged or truncated"),
])
def test_bad_files_exit_2_naming_what_was_wrong(tmp_path, capsys, make, words):
    path = make(tmp_path)
    code = main(["inspect", str(path), "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "invalid" and doc["field"] == "path"
    assert words in doc["error"] and str(path) in doc["error"] and doc["fix"]
    assert words in err


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_elf_without_cuda_exits_2(binaries, capsys):
    code = main(["inspect", str(binaries["host_only"])])
    err = capsys.readouterr().err
    assert code == 2 and "no CUDA code" in err and "libc.so.6" in err


def test_bad_options_exit_2(binaries, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(binaries["ptx80"]), "--timeout", "0"])
    assert exc.value.code == 2
    assert main(["inspect", str(binaries["ptx80"]), "--", "ok"]) == 2  # program args without --run
    assert main(["inspect", str(binaries["ptx80"]), "--profile", "no-such-gpu"]) == 2
    assert main(["inspect", str(binaries["libfoo"])]) == 2  # a shared library without CUDA code
    capsys.readouterr()


def test_cuda_shared_library_is_inspected_but_not_run(binaries, capsys):
    code, doc = cli(capsys, str(binaries["libkern"]), "--profile", "h200")
    assert code == 0 and doc["kind"] == "shared library" and doc["sass"] == ["sm_90"] and doc["runs_via"] == "sass"
    code = main(["inspect", str(binaries["libkern"]), "--profile", "h200", "--run"])
    assert code == 2 and "shared library: it cannot run by itself" in capsys.readouterr().err


def test_inspect_is_a_library_call_too(binaries):
    rep = inspect_binary(binaries["sm80"], profile="a100-40gb", probe=lambda i: None)
    assert rep.runnable and rep.runs_via == "sass" and os.path.samefile(rep.path, binaries["sm80"])
