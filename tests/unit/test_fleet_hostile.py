"""Fleet reports come from other machines: `tui fleet` refuses a report holding a 5000-digit integer,
a huge or non-finite number or an oversized string, naming the file and the field, and shows every
string of a report as text (no terminal escape, no Rich markup reaches stdout)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.unit.test_fleet import host, write
from tests.unit.test_fuzz_inputs import run_main, strict_json
from tui.cli.main import main

pytestmark = pytest.mark.timeout(60)

ESCAPES = "\x1b]0;owned\x1b\\\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x9b31m[bold red]boss[/]\r\n#"


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory) -> dict:
    """One real report of the simulated device, as test_fleet's."""
    d = tmp_path_factory.mktemp("real")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("CONFIG", "DATA", "CACHE"):
            mp.setenv(f"SOL_COCKPIT_{var}_DIR", str(d / var.lower()))
        mp.setenv("SOL_SIM_DELAY", "0")
        assert main(["fleet-report", "--backend", "sim", "--host", "node-a", "--only", "host.user", "--no-peers",
                     "--out", str(d / "node-a.json")]) in (0, 1)
    return json.loads((d / "node-a.json").read_text())


def _problems(tmp_path: Path) -> dict[str, str]:
    code, out, err = run_main(["fleet", str(tmp_path), "--json"])
    assert code in (0, 1), err
    return {e["file"]: e["problem"] for e in strict_json(out)["errors"]}


def test_huge_numbers_are_refused_naming_the_file_and_field(sim_report, tmp_path):
    good = host(sim_report, "node-a", [50.0])
    text = json.dumps(good)
    write(tmp_path, "ok.json", good)
    write(tmp_path, "digits.json", text.replace('"index": 0', '"index": ' + "9" * 5000, 1))
    write(tmp_path, "version.json", text.replace('"version": 1', '"version": ' + "1" * 5000, 1))
    write(tmp_path, "inf.json", text.replace('"sol_pct": 50.0', '"sol_pct": 1e999', 1))
    write(tmp_path, "nan.json", text.replace('"sol_pct": 50.0', '"sol_pct": NaN', 1))
    write(tmp_path, "huge.json", text.replace('"sol_pct": 50.0', '"sol_pct": 1e300', 1))
    write(tmp_path, "index.json", text.replace('"index": 0', '"index": 1000000000', 1))
    write(tmp_path, "long.json", json.dumps({**good, "host": "h" * 100_000}))
    problems = _problems(tmp_path)
    assert "ok.json" not in problems
    assert problems["digits.json"].startswith("gpus[0].index: an integer of 5000 digits")
    assert "5000 digits" in problems["version.json"]
    assert problems["inf.json"].startswith("benches[0].result.sol_pct: 1e999")
    assert problems["nan.json"].startswith("benches[0].result.sol_pct: NaN")
    assert problems["huge.json"].startswith("benches[0].result.sol_pct: 1e+300 is outside")
    assert problems["index.json"].startswith("gpus.0.index")
    assert problems["long.json"].startswith("host")
    code, out, err = run_main(["fleet", str(tmp_path)])
    assert code == 1 and "Traceback" not in err and "digits.json: gpus[0].index" in out


def _hostile_report(sim_report) -> dict:
    """Every string a report holds, and the keys that name checks, set to terminal escapes."""
    r = host(sim_report, "node" + ESCAPES, [None, 40.0, 60.0], failed=["chk" + ESCAPES])
    for k in ("time", "tool_version", "backend"):
        r[k] = k + ESCAPES
    for g in r["gpus"]:
        for k in ("uuid", "name", "driver_version", "pci_bus_id", "visible_as"):
            g[k] = k + ESCAPES + str(g["index"])
    r["benches"][0]["error"] = "error" + ESCAPES
    for b in r["benches"]:
        for k in ("status", "kernel", "dtype", "profile"):
            b["result"][k] = b["result"][k] + ESCAPES if b["result"].get(k) else k + ESCAPES
        b["result"]["shape"] = {"m" + ESCAPES: "1" + ESCAPES}
    r["job"] = {"POD_NAME": ESCAPES}
    r["error"] = "no GPU" + ESCAPES
    return r


def test_no_escape_of_a_hostile_report_reaches_stdout(sim_report, tmp_path):
    write(tmp_path, "a.json", _hostile_report(sim_report))
    write(tmp_path, "b.json", {**_hostile_report(sim_report), "gpus": [], "benches": []})
    write(tmp_path, "bad" + ESCAPES.replace("/", "_").replace("\x00", "") + ".json", "{" + ESCAPES)
    for argv in (["fleet", str(tmp_path)], ["fleet", str(tmp_path), "--json"]):
        code, out, err = run_main(argv)
        assert code == 1, err
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\r" not in out
    code, out, _ = run_main(["fleet", str(tmp_path)])
    assert "node\\x1b]0;owned" in out and "[bold red]boss[/]" in out


def test_a_fifo_a_sparse_file_and_a_link_loop_cost_no_time(sim_report, tmp_path):
    write(tmp_path, "ok.json", host(sim_report, "node-a", [50.0]))
    os.mkfifo(tmp_path / "fifo.json")
    with open(tmp_path / "sparse.json", "wb") as f:
        f.truncate(2 * 2**30)
    (tmp_path / "loop").symlink_to(tmp_path)
    t0 = time.monotonic()
    problems = _problems(tmp_path)
    assert time.monotonic() - t0 < 5
    assert "more than" in problems["sparse.json"] and "fifo.json" not in problems


def test_fleet_report_never_writes_through_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.json").symlink_to(victim)
    code, _, err = run_main(["fleet-report", "--backend", "sim", "--host", "n", "--only", "host.user", "--no-peers",
                             "--out", str(tmp_path / "out.json")])
    assert code == 2 and "symbolic link" in err and victim.read_text() == "precious"
