"""Issue 47's cockpit defects about what is shown as current: checks that never ran read as fine
(3), Live keeping the previous profile's card (4), stale results shown as the current run's (13).
Each test failed before its fix, at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from tests.tui.conftest import screen_lines, wait_for_run, wait_until
from tests.tui.test_flows import FAKE_RULE, text_of
from tui import diagnostics

SIZES = [(80, 24), (120, 40)]


def _ids(size):
    return f"{size[0]}x{size[1]}"


def _failing_checks():
    from engine.checks.model import CheckResult

    return [CheckResult(id="driver.loaded", title="NVIDIA driver loaded", status="fail", detail="missing",
                        fix="install the driver", rules=["no_driver"]),
            CheckResult(id="gpu.ecc", title="No ECC errors", status="fail", detail="12 uncorrectable",
                        fix="drain the node", rules=["ecc_errors"])]


# 3 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_checks_run_at_start_whatever_the_first_screen(make, monkeypatch, size):
    """Diagnose first: the checks ran only when screen 1 was shown, and Diagnose said "look fine"
    with two checks failing."""
    checks = _failing_checks()
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    monkeypatch.setattr(diagnostics, "rules_for_check", lambda r: [dict(FAKE_RULE, id=f"rule-of-{r.id}")])
    app = make(start_mode="troubleshoot", checks_on_start=True)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.check_results == checks, what="the checks at start")
        await pilot.pause()
        shown = " ".join(screen_lines(app))
        assert "check driver.loaded" in shown and "check gpu.ecc" in shown, shown
        assert "look fine" not in shown


@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_diagnose_never_says_fine_when_the_checks_never_ran(make, size):
    app = make(start_mode="troubleshoot", checks_on_start=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        detail = " ".join(text_of(app, "#ts-detail").split())
        assert "environment checks have not run" in detail and "checks look fine" not in detail, detail


# 4 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_live_follows_a_profile_chosen_on_profile_at_once(make, size):
    """u on rtx-4090: Live kept the previous card (74.5 GiB / 700 W) until the next run."""
    app = make(start_mode="profile")
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#profile-table")
        names = [str(k.value) for k in table.rows]
        table.move_cursor(row=names.index("rtx-4090"))
        await pilot.press("u")
        await pilot.pause()
        assert app.effective_profile().name == "rtx-4090"
        await pilot.press("5")
        await pilot.pause(0.3)
        shown = " ".join(screen_lines(app))
        assert "/450W" in shown.replace(" ", "") and "700W" not in shown.replace(" ", ""), shown
        assert "rtx-4090" in screen_lines(app)[0]


# 13 ------------------------------------------------------------------------------------------
def _report(app) -> str:
    return " ".join(" ".join(text_of(app, sel).split()) for sel in ("#run-stages", "#run-sol", "#run-table",
                                                                      "#run-compare", "#run-summary"))


@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_a_refused_run_leaves_no_earlier_report_on_screen(make, size):
    """After a refused run the old stages (✓), bars and peers stayed, with no run label."""
    app = make(start_mode="run")
    async with app.run_test(size=size) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        assert "✓ compile" in _report(app) and "median" in _report(app)
        app.form_problems = ["shape: m must be more than 0"]
        await pilot.press("r")
        await pilot.pause()
        report = _report(app)
        assert "Not run" in report and "✓" not in report and "median" not in report, report
        assert "T_SOL" not in text_of(app, "#run-sol")


@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_a_new_run_clears_the_previous_median_while_it_runs(make, monkeypatch, size):
    monkeypatch.setenv("SOL_SIM_DELAY", "0.3")
    app = make(start_mode="run")
    async with app.run_test(size=size) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        first = app.last_result.run_id
        await pilot.press("r")
        await pilot.pause()
        assert app.run_active or "run" in app.work
        report = _report(app)
        assert "median" not in report and f"run #{first}" not in report, report
        await wait_for_run(pilot, app, runs=2)
        assert f"run #{app.last_result.run_id}" in _report(app)


async def test_cancelling_a_hang_leaves_no_stage_running(make):
    """After x on a hung run the stage row kept '▶ warm-up'."""
    from tui.app import with_fields

    app = make(start_mode="run")
    app.task_spec = with_fields(app.task_spec, fault="hang", timeout_s=60)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await wait_until(pilot, lambda: "▶" in text_of(app, "#run-stages"), what="a stage running")
        await pilot.pause(0.3)
        await pilot.press("x")
        await wait_for_run(pilot, app)
        stages = text_of(app, "#run-stages")
        assert "▶" not in stages and "■" in stages, stages
        assert app.last_result.status.value == "cancelled"


# 8 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_x_never_ticks_a_hidden_step_nor_checks_that_fail(make, monkeypatch, size):
    """x on the checks table ticked the steps table's hidden row; "Environment checks pass" could
    be ticked with two checks failing."""
    checks = _failing_checks()
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.check_results == checks, what="the checks")
        await pilot.pause()
        before = {k: v.get("state") for k, v in app.screen.steps.items()}
        assert app.screen.query_one("#checks-table").has_focus
        await pilot.press("x")
        await pilot.pause()
        assert {k: v.get("state") for k, v in app.screen.steps.items()} == before
        assert "Tab to the steps table" in text_of(app, "#check-detail")
        steps = app.screen.query_one("#steps-table")
        steps.focus()
        steps.move_cursor(row=list(app.screen.steps).index("checks"))
        await pilot.press("x")
        await pilot.pause()
        assert app.screen.steps["checks"]["state"] != "done"
        assert "2 checks fail" in text_of(app, "#check-detail")


# 21 ------------------------------------------------------------------------------------------
async def test_the_schedule_placeholder_is_the_kernels_own(make):
    """The schedule placeholder showed a GEMM's knobs for kernels without any."""
    from textual.widgets import Input, Select

    app = make(start_mode="tune")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        field = app.screen.query_one("#f-schedule", Input)
        assert "consumers=" in field.placeholder
        app.screen.query_one("#f-kernel", Select).value = "add_rmsnorm"
        await pilot.pause(0.3)
        assert "has no schedule knobs" in field.placeholder and "consumers" not in field.placeholder


def _every_check_failing():
    """A result for every check the product has, under its own title (the longest titles it makes)."""
    from engine import CHECK_SIM_HINT, CHECKS
    from engine.checks.model import CheckResult

    return [CheckResult(id=c.id, title=c.title, status="fail", detail="found wanting",
                        fix=f"install the driver; {CHECK_SIM_HINT}") for c in CHECKS]


@pytest.mark.parametrize("size", SIZES, ids=_ids)
async def test_check_titles_are_whole_beside_the_checklist(make, monkeypatch, size):
    """Defect 21: at 120x40 the check titles were cut ('…') while the checklist beside them took
    half the width for a column of short step names."""
    checks = _every_check_failing()
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.check_results == checks, what="the checks at start")
        await pilot.pause()
        lines = screen_lines(app)
        shown = [c.title for c in checks if any(c.title in line for line in lines)]
        assert len(shown) >= (20 if size[1] >= 40 else 3), lines
        assert not [line for line in lines if "…" in line], "\n".join(lines)


async def test_the_cockpit_says_press_s_where_a_check_says_backend_sim(make, monkeypatch):
    """Defect 21: a check's fix in the cockpit said "or rehearse ... `tui bench --backend sim`",
    a command line, where the header says "S uses the SIMULATED device"; on the simulated device
    the hint is moot."""
    from engine import CHECK_SIM_HINT

    checks = _every_check_failing()[:1]
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.check_results == checks, what="the checks at start")
        await pilot.pause()
        detail = text_of(app, "#check-detail")
        assert "fix: install the driver" in detail and "--backend" not in detail and "press S" not in detail
    fix = f"install the driver; {CHECK_SIM_HINT}"
    assert diagnostics.cockpit_fix(fix, simulated=False) == (
        "install the driver; or press S to rehearse on the SIMULATED device")
