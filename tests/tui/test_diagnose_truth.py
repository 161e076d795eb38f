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


async def test_x_on_the_checks_table_ticks_no_hidden_step(make):
    """Defect 8: x ticked the steps table's highlighted row while focus was on the checks table."""
    from textual.widgets import DataTable

    from engine import Checklist

    app = make(start_mode="checklist")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#checks-table", DataTable).focus()
        await pilot.pause()
        before = {s.id: s.done for s in Checklist(app.store).steps()}
        await pilot.press("x")
        await pilot.pause()
        assert {s.id: s.done for s in Checklist(app.store).steps()} == before
        assert "Tab to the steps table" in str(app.screen.query_one("#check-detail").render())
