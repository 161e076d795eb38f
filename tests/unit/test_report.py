"""The shareable report: checks, profile, best runs, rules that fired, checklist."""

from __future__ import annotations

from engine.checks import run_checks
from engine.report import build_report, to_markdown
from engine.store import ResultStore
from tests.unit.test_checklist import save_run
from tests.unit.test_checks_support import make_ctx, no_driver_nvml


def test_report_gathers_everything() -> None:
    store = ResultStore()
    save_run(store)
    save_run(store, simulated=True)
    save_run(store, status="launch_error",
             matched_rules=[{"id": "cuda-illegal-address", "title": "Illegal memory access", "fix": "restart",
                             "evidence": "CUDA_ERROR_ILLEGAL_ADDRESS"}])
    checks = run_checks(ctx=make_ctx(nvml=no_driver_nvml()))
    rep = build_report(store, profile_name="h100", checks=checks)
    assert rep["profile"]["name"] == "h100-sxm"
    assert rep["summary"]["fail"] >= 1
    assert len(rep["best_runs"]) == 2 and all(r["status"] == "ok" for r in rep["best_runs"])
    fired = {r["id"]: r for r in rep["rules_fired"]}
    assert "nvml-library-not-found" in fired and fired["nvml-library-not-found"]["source"].startswith("check ")
    assert fired["cuda-illegal-address"]["source"].startswith("run #3")
    assert [s["id"] for s in rep["checklist"]][0] == "checks"
    md = to_markdown(rep)
    assert md.startswith("# SOL Cockpit report")
    for heading in ("## Profile", "## Checks", "## Best runs", "## Rules that fired", "## Checklist"):
        assert heading in md
    assert "SIMULATED" in md and "FAIL" in md


def test_report_without_profile_or_runs() -> None:
    rep = build_report(ResultStore(), checks=run_checks(ctx=make_ctx()))
    assert rep["profile"] is None and rep["best_runs"] == [] and rep["rules_fired"] == []
    md = to_markdown(rep)
    assert "No profile confirmed" in md and "No successful runs stored yet." in md
