"""`tui check`, `tui diagnose`, `tui checklist`, `tui report`: exit codes and JSON shapes, in-process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.unit.test_checks_support import make_ctx, no_driver_nvml
from tui.cli import check_context
from tui.cli.main import main


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")


def run_json(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, dict]:
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


@pytest.fixture
def healthy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_context, "make_context", lambda profile: make_ctx(profile_name=profile))


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_context, "make_context", lambda profile: make_ctx(nvml=no_driver_nvml(), profile_name=profile))


def test_check_json_healthy_exits_0(healthy: None, capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["check", "--json"])
    assert rc == 0 and out["ok"] is True
    assert {"id", "title", "status", "detail", "fix"} <= set(out["checks"][0])
    assert out["checks"][0]["id"] == "driver.loaded"
    assert all(c["status"] in ("pass", "warn", "fail", "skip") for c in out["checks"])


def test_check_json_no_driver_exits_1(no_driver: None, capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["check", "--json"])
    first = out["checks"][0]
    assert rc == 1 and first["status"] == "fail" and "no NVIDIA driver found" in first["detail"]
    assert "nvml-library-not-found" in first["rules"]


def test_check_profile_mismatch_fails(healthy: None, capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["check", "--json", "--profile", "a100-40gb"])
    assert rc == 1
    assert next(c for c in out["checks"] if c["id"] == "gpu.profile")["status"] == "fail"


def test_check_table_and_checklist_record(no_driver: None, capsys: pytest.CaptureFixture) -> None:
    assert main(["check"]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "driver.loaded" in text and "--backend sim" in text
    rc, out = run_json(capsys, ["checklist", "--json"])
    assert rc == 0 and out["steps"][0]["id"] == "checks" and out["steps"][0]["done"] is False


def test_real_check_runs_on_this_machine(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["check", "--json"])
    assert rc in (0, 1)
    assert len(out["checks"]) == 31
    loaded = out["checks"][0]
    if loaded["status"] == "fail":
        assert "too old" not in loaded["detail"]


def test_diagnose_file_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "dmesg.txt"
    log.write_text("[ 4812.133] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n")
    rc, out = run_json(capsys, ["diagnose", str(log), "--json"])
    assert rc == 0
    assert out["matches"][0]["id"] == "xid-fallen-off-bus"
    assert {"id", "title", "cause", "fix", "evidence"} <= set(out["matches"][0])
    assert "Xid" in out["matches"][0]["evidence"]


def test_diagnose_stdin_table_and_nothing_found(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"))
    assert main(["diagnose", "-"]) == 0
    assert "cuda-illegal-address" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("all fine"))
    rc, out = run_json(capsys, ["diagnose", "-", "--json"])
    assert rc == 1 and out["matches"] == [] and out["input"]["complete"] is True


def test_diagnose_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["diagnose", str(tmp_path / "nope.log")]) == 2
    assert "nope.log: no such file" in capsys.readouterr().err


def test_checklist_done_profile_and_resume(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["checklist", "--json", "--done", "profile", "--profile", "h100"])
    steps = {s["id"]: s for s in out["steps"]}
    assert rc == 0 and steps["profile"]["done"] and "h100-sxm" in steps["profile"]["detail"]
    rc, out = run_json(capsys, ["checklist", "--json"])
    assert {s["id"]: s for s in out["steps"]}["profile"]["done"] and out["next"] == "checks"
    assert main(["checklist", "--done", "profile"]) == 2
    assert main(["checklist", "--done", "profile", "--profile", "nope"]) == 2
    capsys.readouterr()
    assert main(["checklist"]) == 0
    assert "next:" in capsys.readouterr().out


def test_report_formats_and_export_step(healthy: None, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["report", "--format", "json"])
    assert rc == 0
    assert {"checks", "profile", "best_runs", "rules_fired", "checklist", "summary"} <= set(out)
    assert main(["report"]) == 0
    assert capsys.readouterr().out.startswith("# SOL Cockpit report")
    dest = tmp_path / "report.md"
    assert main(["report", "--output", str(dest)]) == 0
    assert dest.read_text().startswith("# SOL Cockpit report")
    rc, out = run_json(capsys, ["checklist", "--json"])
    assert {s["id"]: s for s in out["steps"]}["exported"]["done"]
