"""`tui report` tells the truth (issue 47, defects 8, 11 and 12): a rehearsed fault on the simulated
device is not a finding, the best runs are benches, the checklist does not tick "Environment checks
pass" above failing checks, and no Python value (True, None) reaches the text."""

from __future__ import annotations

import json

import pytest

from engine import Checklist, InputError, ResultStore
from engine.checks.model import CheckResult
from engine.report import build_report, to_markdown
from tui.cli.main import main

BENCH = ["bench", "--backend", "sim", "--iterations", "5", "--warmup", "1", "--no-peers", "--json"]
FAILING = [CheckResult(id="driver.loaded", title="NVIDIA driver", status="fail", detail="none", fix="install"),
           CheckResult(id="host.user", title="Account", status="pass", detail="uid 1000")]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rehearsed(capsys, monkeypatch):
    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "200")
    ok = json.loads(cli(capsys, *BENCH)[1])["run_id"]
    nan = json.loads(cli(capsys, *BENCH, "--fault", "nan")[1])["run_id"]
    soak = json.loads(cli(capsys, "soak", "--backend", "sim", "--duration", "20s", "--fault", "corrupt",
                          "--json")[1])["run_id"]
    clean_soak = json.loads(cli(capsys, "soak", "--backend", "sim", "--duration", "20s", "--json")[1])["run_id"]
    return ok, nan, soak, clean_soak


def test_rehearsed_faults_are_not_findings(rehearsed):
    ok, nan, soak, _ = rehearsed
    rep = build_report(ResultStore(), checks=[])
    fired = {r["id"] for r in rep["rules_fired"]}
    assert not fired & {"nan-inf-output", "output-mismatch", "silent-data-corruption"}, fired
    assert {(r["run"], r["fault"]) for r in rep["rehearsals"]} == {(nan, "fault=nan"), (soak, "soak fault corrupt")}
    text = to_markdown(rep)
    assert "NaN or Inf" not in text and "injected faults, not findings" in text


def test_best_runs_are_benches_not_soaks(rehearsed):
    ok, _, _, clean_soak = rehearsed
    best = [r["id"] for r in build_report(ResultStore(), checks=[])["best_runs"]]
    assert best == [ok] and clean_soak not in best


def test_the_report_has_no_python_values(capsys):
    cli(capsys, *BENCH)
    text = to_markdown(build_report(ResultStore(), checks=FAILING))
    for word in ("True", "False", "None"):
        assert f" {word} " not in text and f"| {word}" not in text, word
    assert "| fused |" in text


def test_no_tick_above_failing_checks():
    store = ResultStore()
    Checklist(store).mark("checks", True, "ticked by hand")
    text = to_markdown(build_report(store, checks=FAILING))
    line = next(x for x in text.splitlines() if "Environment checks pass" in x)
    assert line.startswith("- [ ]") and "1 check(s) fail" in line


def test_the_checks_step_cannot_be_ticked_while_checks_fail():
    cl = Checklist(ResultStore())
    cl.record_checks({"pass": 3, "warn": 0, "fail": 2, "skip": 0})
    with pytest.raises(InputError, match="2 environment check"):
        cl.mark("checks", True)
    cl.record_checks({"pass": 5, "warn": 0, "fail": 0, "skip": 0})
    cl.mark("checks", True)


def test_checklist_cli_names_steps_as_the_cockpit_does(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = cli(capsys, "checklist")
    assert code == 0 and "│ next " not in out and "│ todo " in out


def test_the_checklist_reads_its_states_in_one_go(monkeypatch):
    """The cockpit lists the steps several times at start: each listing read the store once per
    step and twice more per step for the confirmed profile (17 reads); the states now come in one."""
    store = ResultStore()
    Checklist(store).mark("profile", True, profile="h100-sxm")
    Checklist(store).steps()  # the first listing stores the derived states (and reads them back)
    reads = []
    real = store.read_rows
    monkeypatch.setattr(store, "read_rows", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    steps = {s.id: s for s in Checklist(store).steps()}
    assert steps["profile"].done and "h100-sxm" in steps["profile"].detail
    assert sum("FROM kv" in sql for sql in reads) == 1 and len(reads) <= 7


def test_a_damaged_step_state_is_named_when_read_in_one_go():
    store = ResultStore()
    store.put_state("checklist.tuned", [1, 2])  # not an object
    with pytest.raises(InputError, match="checklist step 'tuned'"):
        Checklist(store).steps()
