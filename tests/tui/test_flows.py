"""Each screen's main flow on the simulated backend, driven with Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from engine.task import TaskSpec
from tests.tui.conftest import screen_lines, wait_for_run
from tui import diagnostics
from tui.app import with_fields

FAKE_RULE = {"id": "cuda.illegal_address", "title": "Illegal memory access in the kernel",
             "cause": "an out-of-bounds load or store", "fix": "turn MEMORY_PIPELINING off and re-run",
             "knob": "MEMORY_PIPELINING=off", "evidence": "cudaErrorIllegalAddress"}


def text_of(app, selector: str) -> str:
    """The plain text a Static shows (Rich tables rendered at a generous width)."""
    import io

    from rich.console import Console

    content = app.screen.query_one(selector, Static).content
    if isinstance(content, str) or hasattr(content, "plain"):
        return str(content)
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(content)
    return console.export_text()


async def test_run_a_task_and_read_the_result(make):
    app = make(start_mode="run")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        res = app.last_result
        assert res.ok and res.simulated and res.run_id == 1
        summary = text_of(app, "#run-summary")
        assert "OK" in summary and "SIMULATED" in summary and "T_SOL" in summary
        assert "SOL-ExecBench" in text_of(app, "#run-sol")
        assert "CuPy matmul + add" in text_of(app, "#run-table")
        assert "✓ collect" in text_of(app, "#run-stages")


async def test_the_knobs_shown_are_the_knobs_that_run(make):
    """The Run screen's task line fills the defaults by shape, as the engine does: the knobs it
    shows before a run are those the result reports (the shape-blind defaults once differed)."""
    app = make(start_mode="run")
    async with app.run_test(size=(120, 40)) as pilot:
        before = text_of(app, "#run-task")
        await pilot.press("r")
        await wait_for_run(pilot, app)
        ran = app.last_result.task
        assert f"BLOCK_SIZE={ran.block_size} MEMORY_PIPELINING={ran.memory_pipelining}" in before
        small = with_fields(app.task_spec, shape={"m": 1024, "n": 2560, "k": 2560})
        app.task_spec = small
        await pilot.pause()
        await pilot.press("r")
        await wait_for_run(pilot, app, runs=2)
        ran = app.last_result.task
        assert (ran.block_size, ran.memory_pipelining) == ("128x160", 6)  # h200, M = 1024
        assert f"BLOCK_SIZE={ran.block_size} MEMORY_PIPELINING={ran.memory_pipelining}" in text_of(app, "#run-task")


async def test_injected_fault_shows_the_rule_and_the_next_run_works(make, monkeypatch):
    import engine.runner

    monkeypatch.setattr(engine.runner, "match_rules", lambda text: [])
    monkeypatch.setattr(diagnostics, "rules_for_text", lambda text: [dict(FAKE_RULE)])
    app = make(start_mode="run")
    async with app.run_test(size=(100, 40)) as pilot:
        app.task_spec = with_fields(app.task_spec, fault="illegal_address")
        await pilot.press("r")
        await wait_for_run(pilot, app)
        assert app.last_result.status.value == "launch_error"
        summary = text_of(app, "#run-summary")
        assert "illegal memory access" in summary
        assert "rule " in summary
        await pilot.press("6")
        table = app.screen.query_one("#ts-table", DataTable)
        assert table.row_count >= 1
        assert "fix:" in text_of(app, "#ts-detail")
        await pilot.press("f")  # apply the knob fix
        assert app.task_spec.memory_pipelining == 0 and app.task_spec.fault.value == "none"
        await pilot.press("4", "r")
        await wait_for_run(pilot, app, runs=2)
        assert app.last_result.ok


async def test_injected_fault_matches_the_engine_rules(make):
    pytest.importorskip("engine.troubleshoot")
    app = make(start_mode="run")
    async with app.run_test(size=(100, 40)) as pilot:
        app.task_spec = with_fields(app.task_spec, fault="compile_error")
        await pilot.press("r")
        await wait_for_run(pilot, app)
        assert app.last_result.status.value == "compile_error"
        assert app.last_result.matched_rules, "the engine's rules should match an NVRTC error"
        rule_id = app.last_result.matched_rules[0]["id"]
        assert f"rule {rule_id}" in text_of(app, "#run-summary")
        await pilot.press("6")
        assert rule_id in text_of(app, "#ts-detail")


async def test_change_a_knob_and_see_the_comparison(make):
    app = make(start_mode="run")
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        await pilot.press("3")
        # the default at this shape is ping-pong 128x128 with 5 stages: the cooperative 128x256
        # tile fits 3 (the pipelining field is emptied so the tile's default applies)
        await pilot.click("#f-block_size")
        await pilot.press(*"128x256")
        await pilot.click("#f-memory_pipelining")
        await pilot.press("ctrl+a", "backspace")
        await pilot.press(*"3")
        await pilot.press("escape")
        assert str(app.task_spec.block_size) == "128x256"
        assert app.task_spec.memory_pipelining == 3
        await pilot.press("4", "r")
        await wait_for_run(pilot, app, runs=2)
        compare = text_of(app, "#run-compare")
        assert "BLOCK_SIZE" in compare and "changed" in compare and "#1" in compare and "#2" in compare


async def test_invalid_knob_names_field_and_limit(make):
    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        before = app.task_spec
        app.screen.query_one("#f-block_size", Input).value = "512x512"
        await pilot.pause()
        status = text_of(app, "#tune-status")
        assert "BLOCK_SIZE=512x512" in status
        assert app.task_spec == before  # an invalid form never reaches the Run screen
        assert "predicted T_SOL" in text_of(app, "#tune-prediction")


async def test_rest_field_reaches_the_task_and_is_bounded(make):
    """The Tune form's "rest s": the idle before ours and each peer (TaskSpec.rest_s), refused past
    its limit with the field named, and the last valid task kept."""
    from engine.task import REST_MAX_S

    app = make(start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        app.screen.query_one("#f-rest_s", Input).value = "3"
        await pilot.pause()
        assert app.task_spec.rest_s == 3.0
        app.screen.query_one("#f-rest_s", Input).value = str(REST_MAX_S + 1)
        await pilot.pause()
        assert "rest_s" in text_of(app, "#tune-status") and app.task_spec.rest_s == 3.0


async def test_malformed_task_file_at_start_and_on_load(make, cockpit_env):
    bad = Path(cockpit_env) / "bad.toml"
    bad.write_text("kernel = \n[[[ not toml", encoding="utf-8")
    app = make(task_file=bad, start_mode="tune")
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.startup_problems and "bad.toml" in app.startup_problems[0]
        assert app.task_spec.kernel == "gemm_residual"  # the default task
        wrong = Path(cockpit_env) / "wrong.toml"
        wrong.write_text('iterations = "many"\n', encoding="utf-8")
        app.screen.query_one("#f-path", Input).value = str(wrong)
        await pilot.press("ctrl+o")
        assert "iterations" in text_of(app, "#tune-status")
        assert app.is_running
        good = Path(cockpit_env) / "good.toml"
        app.screen.query_one("#f-path", Input).value = str(good)
        await pilot.press("ctrl+s")
        assert good.exists()
        app.screen.query_one("#f-path", Input).value = str(good)
        await pilot.press("ctrl+o")
        assert "valid" in text_of(app, "#tune-status")


async def test_live_gauges_and_a_gpu_that_stops_answering(make):
    from engine.nvml import Sample
    from engine.telemetry import TelemetrySampler

    calls = {"n": 0}

    def flaky(index):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return Sample(index=index, t=0.0, gpu_util_pct=42.0, power_w=300.0, power_limit_w=700.0)

    sampler = TelemetrySampler(flaky, [0], source="test")
    app = make(start_mode="live", telemetry=sampler)
    async with app.run_test(size=(80, 24)) as pilot:
        live = text_of(app, "#live-gpus")
        assert "GPU util" in live and "42 %" in live and "N/A" in live  # no GPM on this fake
        sampler.poll_once()
        app.screen.refresh_view()
        await pilot.pause()
        assert "NOT ANSWERING" in text_of(app, "#live-gpus")


async def test_history_lists_runs_and_compares_two(make):
    app = make(start_mode="run")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await wait_for_run(pilot, app)
        app.task_spec = with_fields(app.task_spec, memory_pipelining=2)
        await pilot.press("r")
        await wait_for_run(pilot, app, runs=2)
        await pilot.press("7")
        await pilot.pause(0.3)
        table = app.screen.query_one("#hist-table", DataTable)
        assert table.row_count == 2
        await pilot.press("space", "down", "space", "c")
        compare = text_of(app, "#compare-table")
        assert "MEMORY_PIPELINING" in compare and "#1" in compare and "#2" in compare


async def test_checklist_failed_check_opens_its_rules(make, monkeypatch):
    from engine.checks.model import CheckResult

    checks = [CheckResult(id="driver.loaded", title="NVIDIA driver loaded", status="fail",
                              detail="libnvidia-ml.so.1 not found", fix="install the driver", rules=["no_driver"])]
    monkeypatch.setattr(diagnostics, "run_checks", lambda profile, only=None: checks)
    monkeypatch.setattr(diagnostics, "rules_for_check", lambda r: [dict(FAKE_RULE, id="no_driver")])
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        assert app.check_results == checks
        assert "install the driver" in text_of(app, "#check-detail")
        await pilot.press("enter")
        assert type(app.screen).__name__ == "TroubleshootScreen"
        assert "no_driver" in text_of(app, "#ts-detail")


async def test_checks_not_available_is_a_message(make, monkeypatch):
    def missing(profile, only=None):
        raise diagnostics.NotAvailable("engine.checks is not available")

    monkeypatch.setattr(diagnostics, "run_checks", missing)
    app = make(start_mode="checklist", checks_on_start=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        assert "checks not available" in text_of(app, "#checks-heading")


async def test_profile_choice_and_mismatch(make):
    from engine.backends.select import BackendChoice

    app = make(start_mode="profile", backend_choice=BackendChoice(name="sim", device_name="NVIDIA H200"))
    async with app.run_test(size=(120, 40)) as pilot:
        status = text_of(app, "#profile-status")
        assert "detected profile: h200" in status
        assert app.screen.highlighted() == "h200"  # the cursor starts on the profile in use
        await pilot.press("ctrl+home", "u")  # a10, the first row
        assert app.profile_name == "a10"
        assert "MISMATCH" in text_of(app, "#profile-status")


async def test_no_driver_offers_the_simulated_device(make, monkeypatch):
    from engine.errors import BackendUnavailable
    from tui import app as app_mod

    def no_driver(requested, device=0):
        raise BackendUnavailable("no NVIDIA driver found", fix="install the NVIDIA driver or use --backend sim")

    monkeypatch.setattr(app_mod, "choose_backend", no_driver)
    app = make(backend="cuda", start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        header = screen_lines(app)[0]
        assert "NO GPU" in header and "S uses the SIMULATED device" in header, header
        assert "no NVIDIA driver found" in str(app.screen.query_one("#status").tooltip)
        await pilot.press("S")
        await pilot.pause()
        assert app.simulated and app.task_spec.backend.value == "sim"
        assert screen_lines(app)[0].startswith(" SIM "), screen_lines(app)[0]


async def test_every_binding_has_a_description_and_a_palette_command(make):
    from tui.app import CockpitApp

    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        for mode in CockpitApp.MODES:
            app.switch_mode(mode)
            await pilot.pause()
            commands = {c.title for c in app.get_system_commands(app.screen)}
            for b in list(app.screen.BINDINGS) + list(CockpitApp.BINDINGS):
                assert b.description, b
                assert any(c.startswith(b.description) for c in commands), (mode, b.description)


def test_run_app_rejects_bad_arguments():
    from tui.app import run_app

    assert run_app(["--backend", "opencl"]) == 2


def test_task_spec_default_is_the_seed_case():
    assert TaskSpec().shape == {"m": 8192, "n": 2560, "k": 2560}


async def test_unknown_profile_is_reported_and_the_app_starts(make):
    app = make(profile="nosuchgpu", start_mode="profile")
    async with app.run_test(size=(80, 24)):
        assert app.profile_name is None
        assert any("nosuchgpu" in p for p in app.startup_problems)
        assert app.effective_profile() is not None


async def test_memory_bound_kernel_and_tf32_through_the_form(make):
    from textual.widgets import Select

    app = make(start_mode="tune")
    async with app.run_test(size=(100, 40)) as pilot:
        app.screen.query_one("#f-kernel", Select).value = "add_rmsnorm"
        await pilot.pause()
        # the GEMM's m, n, k do not fit add_rmsnorm: the form takes its default shape, valid at once
        assert app.screen.query_one("#f-shape", Input).value == "m=32768,n=4096"
        assert app.task_spec.kernel == "add_rmsnorm" and app.task_spec.shape == {"m": 32768, "n": 4096}
        assert "valid" in text_of(app, "#tune-status")
        app.screen.query_one("#f-shape", Input).value = "m=4096,n=4096"
        await pilot.pause()
        app.screen.query_one("#f-kernel", Select).value = "bias_gelu"   # m, n fit: the shape is kept
        await pilot.pause()
        assert app.task_spec.kernel == "bias_gelu" and app.task_spec.shape == {"m": 4096, "n": 4096}
        app.screen.query_one("#f-kernel", Select).value = "add_rmsnorm"
        await pilot.pause()
        assert app.task_spec.kernel == "add_rmsnorm" and app.task_spec.shape == {"m": 4096, "n": 4096}
        await pilot.press("4", "r")
        await wait_for_run(pilot, app)
        assert app.last_result.ok and "add_rmsnorm" in text_of(app, "#run-summary") + str(app.last_result.task)
        await pilot.press("3")
        app.screen.query_one("#f-kernel", Select).value = "gemm_residual"
        app.screen.query_one("#f-shape", Input).value = "m=512,n=1024,k=1024"
        app.screen.query_one("#f-dtype", Select).value = "tf32"
        await pilot.pause()
        assert app.task_spec.dtype.value == "tf32"
