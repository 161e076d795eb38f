"""`tui fleet-report` writes a report that reads back; `tui fleet` turns a folder of them into one
table: slow GPUs, failed benches and failed checks marked, spreads computed, files that are not
reports listed (never a crash), exit 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.fleet import load_fleet
from engine.fleet_report import SCHEMA, BenchEntry, GpuEntry, HostReport, read_report, write_report
from tui.cli.main import main


@pytest.fixture(autouse=True)
def _wide_tables(monkeypatch):
    """The assertions read whole table cells: print tables wide whatever terminal (or xdist
    worker, whose COLUMNS is 80) runs the tests."""
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory) -> dict:
    """One real report of the simulated device (checks limited to the host, which pass here)."""
    d = tmp_path_factory.mktemp("real")
    with pytest.MonkeyPatch.context() as mp:  # module scope: the per-test isolation is not on yet
        for var in ("CONFIG", "DATA", "CACHE"):
            mp.setenv(f"SOL_COCKPIT_{var}_DIR", str(d / var.lower()))
        mp.setenv("SOL_SIM_DELAY", "0")
        code = main(["fleet-report", "--backend", "sim", "--host", "node-a", "--only", "host.user",
                     "--no-peers", "--out", str(d / "node-a.json")])
    assert code in (0, 1)
    return json.loads((d / "node-a.json").read_text())


def host(report: dict, name: str, sol: list[float | None], failed: list[str] = (), time: str | None = None) -> dict:
    """``report`` as host ``name`` with one GPU per entry of ``sol`` (None: a failed bench)."""
    r = json.loads(json.dumps(report))
    r["host"] = name
    if time:
        r["time"] = time
    bench = r["benches"][0]["result"]
    gpu = r["gpus"][0]
    r["gpus"], r["benches"] = [], []
    for i, pct in enumerate(sol):
        r["gpus"].append({**gpu, "index": i, "uuid": f"GPU-{name}-{i}"})
        res = {**bench, "sol_pct": pct, "status": "ok" if pct is not None else "failed"}
        r["benches"].append({"device": i, "result": res, "error": None})
    r["check"]["checks"] = [{"id": c, "title": c, "status": "fail", "detail": "", "fix": "", "rules": []}
                            for c in failed]
    return r


def write(d: Path, name: str, doc) -> None:
    (d / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_fleet_report_reads_back_and_says_simulated(sim_report, tmp_path):
    assert sim_report["schema"] == SCHEMA and sim_report["version"] == 1
    assert sim_report["host"] == "node-a" and sim_report["simulated"] is True
    rep = HostReport.model_validate(sim_report)
    assert rep.gpus[0].name.startswith("SIMULATED")
    bench = rep.benches[0]
    assert bench.ok and 0 < bench.sol_pct <= 100
    assert bench.result["kernel"] == "gemm_residual" and bench.result["knobs_from"]  # tui bench --json's shape
    assert [c["id"] for c in rep.check["checks"]] == ["host.user"]  # tui check --json's shape
    write_report(rep, tmp_path / "again.json")
    assert read_report(tmp_path / "again.json").to_json() == rep.to_json()
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_outliers_spreads_and_exit_status(sim_report, tmp_path, capsys):
    write(tmp_path, "a.json", host(sim_report, "node-a", [70.0, 69.0]))
    write(tmp_path, "b.json", host(sim_report, "node-b", [70.5, 55.0]))  # 21 % below the median
    write(tmp_path, "c.json", host(sim_report, "node-c", [69.5, None], failed=["health.ecc"]))
    view = load_fleet(tmp_path, outlier_pct=10)
    rows = {(r.host, r.index): r for r in view.rows}
    assert view.hosts == ["node-a", "node-b", "node-c"] and len(view.rows) == 6
    assert [k for k, r in rows.items() if r.outlier] == [("node-b", 1), ("node-c", 0), ("node-c", 1)]
    assert "below the median" in rows[("node-b", 1)].reasons[0]
    assert rows[("node-c", 1)].sol_pct is None and "bench failed" in rows[("node-c", 1)].reasons
    assert rows[("node-c", 0)].reasons == ["failed checks: health.ecc"]
    assert rows[("node-a", 0)].group_median_pct == pytest.approx(69.5)
    assert rows[("node-b", 0)].host_spread_pct == pytest.approx((70.5 - 55) / 70.5 * 100)
    (spread,) = view.fleet_spread_pct.values()
    assert spread == pytest.approx((70.5 - 55) / 70.5 * 100)
    assert main(["fleet", str(tmp_path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["outliers"] == 3 and out["ok"] is False and out["simulated"] is True
    assert main(["fleet", str(tmp_path)]) == 1
    text = capsys.readouterr().out
    assert "SIMULATED" in text and "node-b" in text and "health.ecc" in text
    # A looser threshold leaves node-b's slow GPU unmarked.
    assert not any(r.outlier for r in load_fleet(tmp_path, 25).rows if r.host == "node-b")


def test_a_healthy_fleet_exits_0(sim_report, tmp_path, capsys):
    write(tmp_path, "a.json", host(sim_report, "node-a", [70.0, 69.0]))
    write(tmp_path, "b.json", host(sim_report, "node-b", [68.0]))
    assert main(["fleet", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_files_that_are_not_reports_are_listed_not_fatal(sim_report, tmp_path, capsys):
    write(tmp_path, "good.json", host(sim_report, "node-a", [70.0]))
    write(tmp_path, "truncated.json", json.dumps(host(sim_report, "node-b", [70.0]))[:200])
    write(tmp_path, "other.json", {"hello": 1})
    write(tmp_path, "future.json", {**host(sim_report, "node-c", [70.0]), "version": 99})
    write(tmp_path, "wrongtype.json", {**host(sim_report, "node-d", [70.0]), "gpus": "all"})
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / ".node-e.json.x.tmp").write_text("{")  # a report being written: not read
    view = load_fleet(tmp_path)
    assert [r.host for r in view.rows] == ["node-a"]
    problems = {e.file: e.problem for e in view.errors}
    assert set(problems) == {"truncated.json", "other.json", "future.json", "wrongtype.json", "binary.json"}
    assert "not JSON" in problems["truncated.json"] and "update sol-cockpit" in problems["future.json"]
    assert problems["wrongtype.json"].startswith("gpus")
    assert main(["fleet", str(tmp_path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert len(out["errors"]) == 5 and out["outliers"] == 0


def test_the_newest_report_of_a_gpu_wins(sim_report, tmp_path):
    (tmp_path / "old").mkdir()
    write(tmp_path / "old", "a.json", host(sim_report, "node-a", [40.0], time="2020-01-01T00:00:00+00:00"))
    write(tmp_path, "a.json", host(sim_report, "node-a", [70.0], time="2030-01-01T00:00:00+00:00"))
    view = load_fleet(tmp_path)
    assert [r.sol_pct for r in view.rows] == [70.0] and view.superseded == 1


@pytest.mark.parametrize("make, word", [
    (lambda p: p / "missing", "no such folder"),
    (lambda p: (p / "f.json").write_text("{}") and p / "f.json", "not a folder"),
    (lambda p: p, "no *.json reports"),
])
def test_bad_folder_is_exit_2_naming_dir(tmp_path, capsys, make, word):
    target = make(tmp_path)
    assert main(["fleet", str(target), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["field"] == "DIR" and word in out["error"] and out["fix"]


def test_bad_outlier_pct_is_exit_2(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["fleet", str(tmp_path), "--outlier-pct", "150"])
    assert exc.value.code == 2


def test_fleet_report_bad_input(tmp_path, capsys):
    assert main(["fleet-report", "--backend", "sim", "--every", "60", "--json"]) == 2
    assert "--every" in json.loads(capsys.readouterr().out)["error"]
    assert main(["fleet-report", "--backend", "sim", "--shape", "m=x", "--json"]) == 2
    assert "shape" in json.loads(capsys.readouterr().out)["error"]
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert main(["fleet-report", "--backend", "sim", "--no-checks", "--no-peers",
                 "--out", str(blocked / "r.json"), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["field"] == "--output" and "writable" in out["fix"]


def test_report_model_marks_failures():
    rep = HostReport(host="h", time="t", tool_version="0", backend="cuda", simulated=False,
                     gpus=[GpuEntry(index=0)], benches=[BenchEntry(device=0, error="no GPU")])
    assert not rep.ok and rep.benches[0].sol_pct is None


def test_a_host_without_a_gpu_still_reports_and_is_marked(tmp_path, capsys):
    """--backend cuda on a node whose driver does not answer: exit 3, and a report all the same
    (checks, and the reason), which tui fleet shows as a marked row."""
    from engine import nvml

    ok, _, _ = nvml.probe()
    if ok:
        pytest.skip("a GPU answers here")
    assert main(["fleet-report", "--backend", "cuda", "--only", "driver", "--host", "broken-node",
                 "--out-dir", str(tmp_path), "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["gpus"] == [] and report["error"] and "driver.loaded" in [c["id"] for c in report["check"]["checks"]]
    assert main(["fleet", str(tmp_path), "--json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["host"] == "broken-node" and row["outlier"] and row["sol_pct"] is None
    assert row["reasons"][0].startswith("bench did not run:") and "driver.loaded" in row["failed_checks"]


def test_every_rewrites_the_report_until_sigterm(tmp_path):
    """The DaemonSet's loop: a fresh report each round, SIGTERM ends it (128 + 15), nothing left."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "r"
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli.main", "fleet-report", "--backend", "sim",
                             "--no-checks", "--no-peers", "--host", "node-x", "--every", "0.2", "--out-dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline and proc.poll() is None:
            path = out / "node-x.json"
            if path.exists():
                ino = path.stat().st_ino  # each round renames a new file into place
                assert read_report(path).host == "node-x"  # atomic: never half a report
                seen.add(ino)
            time.sleep(0.2)
        assert len(seen) >= 2, f"{len(seen)} report(s) written; exit status {proc.poll()}"
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 128 + signal.SIGTERM
    assert [p.name for p in out.iterdir()] == ["node-x.json"]  # no temporary file left


def test_a_slow_simulated_gpu_is_marked_end_to_end(tmp_path, monkeypatch, capsys):
    """Four simulated GPUs, the third 1.3x slow: fleet-report benches all four (no --device), and
    tui fleet marks that one and only that one."""
    monkeypatch.setenv("SOL_COCKPIT_SIM_DEVICES", "4")
    monkeypatch.setenv("SOL_COCKPIT_SIM_SLOW_DEVICES", "2=1.3")
    code = main(["fleet-report", "--backend", "sim", "--no-checks", "--no-peers", "--iterations", "5",
                 "--host", "node-s", "--out-dir", str(tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and [g["index"] for g in report["gpus"]] == [0, 1, 2, 3]
    assert main(["fleet", str(tmp_path), "--json"]) == 1
    view = json.loads(capsys.readouterr().out)
    assert [r["index"] for r in view["rows"] if r["outlier"]] == [2]
    assert view["rows"][0]["host_spread_pct"] == pytest.approx(100 * (1 - 1 / 1.3), abs=3)
    assert main(["fleet-report", "--backend", "sim", "--no-checks", "--device", "7", "--json"]) == 2
    assert "GPU 7 does not exist" in json.loads(capsys.readouterr().out)["error"]
