"""The Run screen tells the truth about a result: a validity badge (clocks, throttling, other
processes, queue hold) and a roofline with the datasheet (and measured) roofs, the kernel's point
and each peer's, a wrong run's point marked not valid."""

from __future__ import annotations

import pytest

from engine import RunResult, TaskSpec, sol_figures
from engine.result import Correctness, PeerResult, Timing
from engine.run_records import ValidityRecord
from tests.tui.conftest import wait_for_run, wait_until
from tests.tui.test_flows import text_of
from tui.widgets.roofline import Roof, RooflinePlot, RoofPoint, log_ticks, roofline_data, tick_label
from tui.widgets.validity import validity_badge, validity_parts, verdict

CLEAN = {"samples": 40, "sm_clock_mhz_min": 1980.0, "sm_clock_mhz_max": 1980.0, "throttle_reasons_seen": [],
         "harmful_throttle": False, "other_processes": [],
         "queue_hold": {"held": ["ours"], "not_held": ["torch_addmm"], "held_chunks": 4, "expired_chunks": 0,
                        "expired": []},
         "rest_applied_s": 0.0}
THROTTLED = CLEAN | {"sm_clock_mhz_min": 1290.0, "throttle_reasons_seen": ["software power cap"],
                     "harmful_throttle": True, "other_processes": [{"pid": 4242, "used_mib": 3072.0}]}
H100_BF16, H100_BW = 989.4e12, 3.35e12
"""The h100-sxm profile's bf16 peak and bandwidth (the simulated device's default profile)."""
V = ValidityRecord.model_validate


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, p10_ms=ms * 0.98, p90_ms=ms * 1.02, mean_ms=ms, min_ms=ms * 0.97, samples=100)


def fabricated(validity: dict, correct: bool = True, measured: bool = False) -> RunResult:
    """A GPU-like result of the default task on h100-sxm: 0.156 ms, two peers, ``validity``."""
    task = TaskSpec(backend="cuda").model_dump(mode="json")
    flops, nbytes = 2 * 8192 * 2560 * 2560, 138936320
    sol = sol_figures(flops, nbytes, H100_BF16, H100_BW, 0.156).to_dict()
    sol_m = sol_figures(flops, nbytes, 702e12, 2.9e12, 0.156).to_dict() if measured else None

    def peer(name: str, label: str, ms: float, **kw) -> PeerResult:
        f = sol_figures(flops, nbytes, H100_BF16, H100_BW, ms)
        return PeerResult(name=name, label=label, timing=timing(ms), tflops=f.tflops, gbps=f.gbps,
                          sol_pct=f.sol_pct, correct=True, **kw)

    peers = [peer("torch_addmm", "torch.addmm", 0.1668), peer("cupy_matmul_add", "CuPy matmul + add", 0.2358,
                                                              baseline=True),
             PeerResult(name="broken_peer", label="a peer that failed", error="RuntimeError: no")]
    return RunResult(status="ok" if correct else "incorrect", simulated=False, task=task, profile="h100-sxm",
                     timing=timing(0.156), sol=sol, sol_measured=sol_m,
                     measured_profile="h100-sxm-measured" if measured else None,
                     correctness=Correctness(correct=correct, max_abs_err=0.5, max_rel_err=0.002,
                                             normwise_rel_err=0.0016, rtol=0.016, checked_elements=100),
                     peers=peers, solexec_score=0.7, validity=validity)


# --- the badge, without an app ----------------------------------------------------------------
def test_a_clean_run_reads_valid_in_full_or_shortened():
    assert validity_badge(V(CLEAN)).plain == ("valid: clocks 1980 MHz steady · no throttling · no other processes"
                                           " · queue held")
    narrow = validity_badge(V(CLEAN), 77).plain
    assert narrow == "valid: 1980 MHz steady · no throttling · no other procs · queue held"


def test_what_is_off_comes_first_in_the_warning_colour():
    badge = validity_badge(V(THROTTLED))
    assert badge.plain == ("suspect: clocks 1290-1980 MHz · throttled: sw power cap · 1 other process on the GPU"
                           " (pid 4242) · queue held")
    assert validity_badge(V(THROTTLED), 77).plain.startswith("suspect: clocks 1290-1980 MHz · throttled: sw power cap")
    styles = {badge.plain[s.start:s.end]: str(s.style) for s in badge.spans}
    assert styles["clocks 1290-1980 MHz"] == "bold yellow" and styles["queue held"] == "green"


def test_the_badge_reads_steady_clocks_expired_holds_and_missing_samples():
    one_step = CLEAN | {"sm_clock_mhz_min": 1965.0}  # one NVML clock step under 1980: steady
    assert "clocks 1980 MHz steady" in validity_badge(V(one_step)).plain
    expired = CLEAN | {"queue_hold": {"held": ["ours"], "held_chunks": 4, "expired_chunks": 1, "expired": ["ours"]}}
    assert validity_badge(V(expired)).plain.startswith("suspect: queue hold ran out in 1 of 4 chunks (ours)")
    harmless = CLEAN | {"throttle_reasons_seen": ["application clocks setting"]}
    assert "no throttling (app clocks)" in validity_badge(V(harmless)).plain
    no_samples = {"queue_hold": CLEAN["queue_hold"], "rest_applied_s": 0.0}
    assert verdict(validity_parts(V(no_samples))) == "unchecked"
    assert validity_badge(V(no_samples)).plain.startswith("unchecked: clocks not sampled")
    sim = {"note": "SIMULATED: no clocks, throttling or other processes"}
    assert validity_badge(V(sim)).plain == sim["note"]
    assert validity_badge(V({})).plain == "validity: not recorded for this run"


# --- the badge on the Run screen ----------------------------------------------------------------
async def test_a_simulated_run_says_its_validity_is_simulated(make):
    app = make(start_mode="run")
    async with app.run_test(size=(120, 40)) as pilot:
        assert not app.screen.query_one("#run-validity").display
        await pilot.press("r")
        await wait_for_run(pilot, app)
        assert app.screen.query_one("#run-validity").display
        assert text_of(app, "#run-validity") == "SIMULATED: no clocks, throttling or other processes"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_throttled_result_with_other_processes_is_suspect(make, size):
    from tui.screens.run import RunScreen

    app = make(start_mode="run")
    async with app.run_test(size=size) as pilot:
        app.screen.post_message(RunScreen.Finished(fabricated(THROTTLED)))  # as the run worker posts it
        await wait_until(pilot, lambda: app.last_result is not None, what="the result recorded")
        badge = text_of(app, "#run-validity")
        assert badge.startswith("suspect: clocks 1290-1980 MHz · throttled: sw power cap · 1 other process")
        assert len(badge) <= size[0] - 3
        if size[0] >= 110:
            assert "(pid 4242) · queue held" in badge


async def test_a_result_set_as_the_last_one_shows_when_run_opens(make):
    app = make(start_mode="live")
    async with app.run_test(size=(120, 40)) as pilot:
        app.last_result = fabricated(CLEAN)
        await pilot.press("4")
        await pilot.pause()
        assert text_of(app, "#run-validity").startswith("valid: clocks 1980 MHz steady")
        assert app.screen.query_one("#run-plot", RooflinePlot).has_data


# --- the roofline -------------------------------------------------------------------------------
def test_roofline_data_of_a_run_with_peers_and_measured_ceilings():
    result = fabricated(CLEAN, measured=True)
    roofs, points = roofline_data(result)
    sheet, measured = roofs
    assert (sheet.label, measured.label) == ("datasheet h100-sxm", "measured h100-sxm-measured")
    assert sheet.peak_flops == pytest.approx(H100_BF16) and sheet.bandwidth_bytes_per_s == pytest.approx(H100_BW)
    assert measured.measured and measured.peak_flops == pytest.approx(702e12)
    assert measured.bandwidth_bytes_per_s == pytest.approx(2.9e12)
    flops, nbytes = result.sol.flops, result.sol.bytes
    assert [p.label for p in points] == ["ours", "torch_addmm", "cupy_matmul_add"]  # the failed peer has no time
    assert all(p.intensity == pytest.approx(flops / nbytes) for p in points)
    assert points[0].ours and points[0].flops_per_s == pytest.approx(flops / 0.156e-3)
    assert points[2].flops_per_s == pytest.approx(flops / 0.2358e-3) and all(p.valid for p in points)
    assert sheet.flops_at(sheet.ridge / 2) == pytest.approx(H100_BF16 / 2)


def test_a_wrong_run_marks_its_point_not_valid():
    _, points = roofline_data(fabricated(CLEAN, correct=False))
    assert points[0].ours and not points[0].valid and all(p.valid for p in points[1:])
    plot = RooflinePlot()
    plot.show(*roofline_data(fabricated(CLEAN, correct=False)))
    plot.draw(116, 16)
    assert any(label.startswith("ours 688 (NOT VALID)") for label in plot.labels)
    assert plot.labels[0] == "datasheet h100-sxm: 989 TFLOP/s, 3.35 TB/s"


def test_a_run_without_time_has_no_roofline_and_ticks_are_round():
    failed = RunResult(status="launch_error", simulated=True, task={"dtype": "bf16"}, profile="h100-sxm")
    assert roofline_data(failed) == ([], [])
    assert log_ticks(40, 6000, 4) == [100, 1000]
    assert log_ticks(40, 6000, 5) == [50, 100, 500, 1000, 5000]
    assert log_ticks(150, 1500, 6) == [200, 500, 1000]
    assert [tick_label(v) for v in (50, 1000, 2e4)] == ["50", "1k", "20k"]


def test_points_on_one_row_share_a_label_and_roof_labels_stay_clear():
    roofs = [Roof("datasheet x", 1000e12, 3e12), Roof("measured x-m", 700e12, 2.9e12, measured=True)]
    points = [RoofPoint("ours", 700.0, 600e12, ours=True), RoofPoint("a", 700.0, 598e12),
              RoofPoint("b", 700.0, 200e12)]
    plot = RooflinePlot()
    plot.show(roofs, points)
    plot.draw(116, 16)
    assert plot.labels == ["datasheet x: 1 PFLOP/s, 3 TB/s", "measured x-m: 700 TFLOP/s, 2.9 TB/s",
                           "ours 600, a 598", "b 200"]


async def test_the_roofline_of_a_simulated_run_with_peers(make):
    app = make(start_mode="run")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        plot = app.screen.query_one("#run-plot", RooflinePlot)
        prof = app.effective_profile()
        res = app.last_result
        assert plot.display and [r.label for r in plot.roofs] == [f"datasheet {prof.name}"]
        assert plot.roofs[0].peak_flops == prof.sol_peak_flops("bf16")
        assert plot.roofs[0].bandwidth_bytes_per_s == prof.bandwidth_bytes_per_s
        assert [p.label for p in plot.points] == ["ours"] + [p.name for p in res.peers if p.timing is not None]
        assert plot.points[0].flops_per_s == pytest.approx(res.sol.flops / (res.timing.median_ms * 1e-3))
        await pilot.pause()
        assert plot.labels and plot.labels[0].startswith(f"datasheet {prof.name}: ")


async def test_a_wrong_simulated_run_draws_its_point_not_valid(make):
    app = make(start_mode="run")
    app.task_spec = TaskSpec(backend="sim", fault="nan")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        plot = app.screen.query_one("#run-plot", RooflinePlot)
        assert app.last_result.status.value == "incorrect"
        assert not plot.points[0].valid and plot.points[0].ours
        await pilot.pause()
        assert any("ours" in label and "(NOT VALID)" in label for label in plot.labels)


async def test_p_shows_the_roofline_in_place_of_the_report_when_narrow(make):
    app = make(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.press("p")
        assert any("No roofline yet" in n.message for n in app._notifications)
        await pilot.press("r")
        await wait_for_run(pilot, app)
        plot = screen.query_one("#run-plot", RooflinePlot)
        assert not plot.display and screen.query_one("#run-table").display
        await pilot.press("p")
        assert plot.display and not screen.query_one("#run-table").display
        assert not screen.query_one("#run-summary").display and screen.query_one("#run-validity").display
        await pilot.pause()
        assert plot.size.height >= 12
        await pilot.press("p")
        assert not plot.display and screen.query_one("#run-table").display


async def test_p_hides_and_shows_the_roofline_when_wide(make):
    app = make(start_mode="run")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        plot = app.screen.query_one("#run-plot", RooflinePlot)
        assert plot.display and app.screen.query_one("#run-table").display
        await pilot.press("p")
        assert not plot.display and app.screen.query_one("#run-table").display
        await pilot.press("p")
        assert plot.display
