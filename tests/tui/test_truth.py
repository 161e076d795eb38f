"""A wrong output is drawn as a failure everywhere: the verify stage fails, the run has no score,
its SOL bars are marked not valid, and the error names the criterion that failed (CLI, JSON, Run
screen and store agree)."""

from __future__ import annotations

import json

from engine.result import Correctness
from tests.tui.conftest import wait_for_run
from tests.tui.test_flows import text_of


def _c(**kw) -> Correctness:
    base = {"correct": False, "max_abs_err": 0.1, "max_rel_err": 0.00278, "normwise_rel_err": 1e-3,
            "rtol": 0.016, "checked_elements": 100}
    return Correctness(**(base | kw))


def test_the_error_names_only_the_criteria_that_failed():
    from engine.backends.collect import mismatch_text

    nan_only = mismatch_text(_c(nan_count=8))
    assert "8 NaN" in nan_only and "> rtol" not in nan_only and "within rtol" in nan_only
    err_only = mismatch_text(_c(max_rel_err=0.05))
    assert "max rel err 0.05 > rtol 0.016" in err_only and "NaN" not in err_only
    both = mismatch_text(_c(max_rel_err=0.05, unwritten_count=3))
    assert "3 unwritten elements" in both and "> rtol" in both


def test_cli_json_and_store_agree_a_wrong_run_has_no_score(tmp_path, capsys):
    from engine.store import ResultStore
    from tui.cli.main import main

    store = tmp_path / "s.db"
    code = main(["bench", "--backend", "sim", "--fault", "nan", "--json", "--store", str(store)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["status"] == "incorrect" and out["correct"] is False
    assert out["solexec_score"] is None and "NaN" in out["error"] and "> rtol" not in out["error"]
    saved = ResultStore(store).get(out["run_id"])
    assert saved.solexec_score is None and saved.status.value == "incorrect"
    ok = main(["bench", "--backend", "sim", "--json", "--store", str(store)])
    assert ok == 0 and json.loads(capsys.readouterr().out)["solexec_score"] is not None


async def test_run_screen_draws_a_wrong_run_as_failed(make):
    from engine import TaskSpec

    app = make(start_mode="run")
    app.task_spec = TaskSpec(backend="sim", fault="nan")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        assert app.last_result.status.value == "incorrect" and app.last_result.solexec_score is None
        stages = text_of(app, "#run-stages")
        assert "✗ verify" in stages or "verify" in stages and "✓ verify" not in stages
        sol = text_of(app, "#run-sol")
        assert "not valid" in sol
        summary = text_of(app, "#run-summary")
        assert "INCORRECT" in summary
