"""Diagnose's list of rules (issue 47): a rehearsed fault on the simulated device is said to be one,
not filed as "NaN or Inf in the output" (defect 11); an ok run's finding (a knob choice twice as slow
as another, defect 20) is listed."""

from __future__ import annotations

from types import SimpleNamespace

from engine import ResultStore, TaskSpec, prepare, run_prepared
from tui.screens.troubleshoot import collect_rules


def _app(result):
    return SimpleNamespace(last_result=result, check_results=[], telemetry=SimpleNamespace(recent=lambda: []))


def test_a_rehearsed_nan_is_a_rehearsal_not_a_finding():
    res = run_prepared(prepare(TaskSpec(backend="sim", peers=False, iterations=10, fault="nan"), None),
                       store=ResultStore())
    assert res.status.value == "incorrect"
    rules = collect_rules(_app(res))
    assert rules and all(src == f"rehearsal #{res.run_id}" for src, _ in rules)
    for _, r in rules:
        assert r["title"].startswith("rehearsal: ") and "simulated device (fault=nan)" in r["cause"]


def test_an_ok_runs_slow_knobs_finding_is_listed():
    store = ResultStore()
    run_prepared(prepare(TaskSpec(backend="sim", peers=False, iterations=10), None), store=store)
    slow = run_prepared(prepare(TaskSpec(backend="sim", peers=False, iterations=10, block_size="16x64"), None),
                        store=store)
    assert slow.ok and [r["id"] for _, r in collect_rules(_app(slow))] == ["knobs-much-slower"]
