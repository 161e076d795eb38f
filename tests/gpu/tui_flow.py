"""Drive the real cockpit headlessly on a GPU machine through the whole flow and record it.

Not a pytest test: run it on the GPU box (`python tests/gpu/tui_flow.py`). It opens the app with
backend cuda and NVML telemetry, runs the environment checks, reads the detected profile, runs the
default task on the GPU while sampling the Live screen, and saves SVG screenshots of the Run and
Live screens into $OUT (default ./out). It prints what the Live gauges read during the run, and
exits non-zero when a step fails (no GPU, a failed run, no GPM values on a Hopper GPU).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OUT = Path(os.environ.get("OUT", "out"))
GAUGES = ("gpu_util_pct", "mem_util_pct", "mem_used_mib", "sm_clock_mhz", "mem_clock_mhz", "power_w",
          "temperature_c", "pcie_tx_kbps", "pcie_rx_kbps", "sm_activity_pct", "tensor_activity_pct",
          "dram_bw_util_pct")


async def flow(size: tuple[int, int], iterations: int, backend: str) -> dict:
    from tui.app import make_app, with_fields

    report: dict = {"steps": []}
    app = make_app(backend=backend, start_mode="checklist", checks_on_start=True)
    rehearsal = backend == "sim"
    async with app.run_test(size=size) as pilot:
        def step(name: str, ok: bool, detail: str = "") -> None:
            report["steps"].append({"step": name, "ok": ok, "detail": detail})
            print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}", flush=True)

        if app.backend_problem:
            step("backend", False, app.backend_problem)
            return report
        step("backend", True, f"{app.backend_choice.name} on {app.backend_choice.device_name}")

        deadline = time.monotonic() + 120
        while not app.check_results and time.monotonic() < deadline:
            await pilot.pause(0.2)
        statuses = {}
        for r in app.check_results:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        step("checks", bool(app.check_results), json.dumps(statuses))
        for r in app.check_results:
            if r.status in ("fail", "warn"):
                print(f"    {r.status}: {r.id}: {r.detail}")
        app.save_screenshot("checklist.svg", path=str(OUT))

        await pilot.press("2")
        await pilot.pause(0.3)
        prof = app.effective_profile()
        detected = app.profiles.detect(app.backend_choice.device_name or "")
        step("profile", prof is not None and (detected is not None or rehearsal),
             f"detected {detected.name if detected else None}, in use {prof.name if prof else None}")
        app.save_screenshot("profile.svg", path=str(OUT))

        app.task_spec = with_fields(app.task_spec, iterations=iterations, backend=backend)
        await pilot.press("4", "r")
        readings = []
        t0 = time.monotonic()
        live_shot = False
        while time.monotonic() - t0 < 600:
            await pilot.pause(0.5)
            snap = app.telemetry.latest()
            if app.run_active and snap.gpus:
                g = snap.gpus[app.task_spec.device] if len(snap.gpus) > app.task_spec.device else snap.gpus[0]
                if g.sample is not None:
                    readings.append({k: getattr(g.sample, k) for k in GAUGES} | {
                        "throttle": g.sample.throttle_reasons, "state": g.state})
                busy_now = sum(1 for r in readings[-3:] if (r.get("gpu_util_pct") or 0) > 50)
                if not live_shot and busy_now >= 2:
                    await pilot.press("5")
                    await pilot.pause(0.2)
                    app.screen.refresh_view()
                    await pilot.pause(0.2)
                    app.save_screenshot("live.svg", path=str(OUT))
                    live_shot = True
                    await pilot.press("4")
            if app.runs_finished >= 1 and not app.run_active:
                break
        await pilot.pause(0.5)
        res = app.last_result
        ok = res is not None and res.ok
        detail = "no result" if res is None else (
            f"{res.status.value}: median {res.timing.median_ms:.4f} ms, SOL {res.sol.sol_pct:.1f} %, "
            f"{res.sol.tflops:.0f} TFLOP/s, score {res.solexec_score}" if res.timing and res.sol
            else f"{res.status.value}: {res.error}")
        step("run on GPU", ok, detail)
        app.save_screenshot("run.svg", path=str(OUT))
        if not live_shot:
            await pilot.press("5")
            await pilot.pause(1.2)
            app.save_screenshot("live.svg", path=str(OUT))

        busy = [r for r in readings if (r.get("gpu_util_pct") or 0) > 50]
        gpm = [r for r in readings if r.get("tensor_activity_pct") is not None]
        step("live gauges moved", bool(busy), f"{len(busy)}/{len(readings)} samples with GPU util > 50 %")
        step("GPM values present", bool(gpm), f"{len(gpm)}/{len(readings)} samples with tensor activity")
        report["readings"] = readings
        report["result"] = res.summary_json() if res is not None else None
        if readings:
            peak = {k: max((r[k] for r in readings if r.get(k) is not None), default=None) for k in GAUGES}
            print("Live gauges during the run (peak of each):")
            for k, v in peak.items():
                print(f"    {k:22s} {v}")
            report["peak"] = peak
    return report


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    # enough timed launches (~7 s at 0.15 ms each) for several telemetry samples during the run
    iterations = int(os.environ.get("TUI_FLOW_ITERATIONS", "50000"))
    # TUI_FLOW_BACKEND=sim rehearses the script on a machine without a GPU
    report = asyncio.run(flow((120, 40), iterations, os.environ.get("TUI_FLOW_BACKEND", "cuda")))
    (OUT / "tui_flow.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    print(f"screenshots and tui_flow.json in {OUT.resolve()}")
    return 0 if report["steps"] and all(s["ok"] for s in report["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
