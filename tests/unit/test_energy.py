"""engine.energy: edge-to-edge power on a stepped energy counter, without a GPU."""

from __future__ import annotations

import math

import pytest

from engine import energy
from engine.run_records import EnergyRecord
from engine.task import TaskSpec


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class FakeLoad:
    """Each batch takes `batch_ms` of GPU time; queuing one advances the host clock a little."""

    def __init__(self, clock: FakeClock, launch_ms: float, batch: int = 20, in_flight: int = 3) -> None:
        self.clock, self.launch_ms, self.batch, self.in_flight = clock, launch_ms, batch, in_flight
        self.ends: list[float] = []

    def ready(self) -> bool:
        return len(self.ends) < self.in_flight or self.ends[-self.in_flight] <= self.clock.t

    def step(self) -> None:
        start = max(self.clock.t, self.ends[-1] if self.ends else 0.0)
        self.ends.append(start + self.batch * self.launch_ms / 1e3)
        self.clock.t += 20e-6

    def batches(self) -> int:
        return len(self.ends)

    def ms_per_launch(self, first: int, last: int) -> float:
        return self.launch_ms


class FakeReader:
    """A counter that advances every `step_s` by watts x step_s (in mJ), as NVML's does."""

    def __init__(self, clock: FakeClock, watts: float, step_s: float = 0.02, answers: bool = True,
                 frozen: bool = False) -> None:
        self.clock, self.watts, self.step_s, self.answers, self.frozen = clock, watts, step_s, answers, frozen

    def energy_mj(self) -> int | None:
        if not self.answers:
            return None
        if self.frozen:
            return 123
        return int(self.watts * 1e3 * self.step_s * math.floor(self.clock.t / self.step_s))

    def instant_w(self) -> float | None:
        return self.watts + 3.0

    def clock_mhz(self) -> float | None:
        return 1500.0

    def reasons(self) -> int | None:
        return 0x4 | 0x1


def _measure(reader_kw: dict, seconds: float = 1.0, launch_ms: float = 0.15) -> dict:
    clock = FakeClock()
    load = FakeLoad(clock, launch_ms)
    reader = FakeReader(clock, **reader_kw)
    return energy.measure(load, reader, seconds, now=clock, sleep=clock.sleep)


def test_power_edge_to_edge_on_a_stepped_counter():
    fig = _measure({"watts": 700.0, "step_s": 0.02})
    assert fig["watts"] == pytest.approx(700.0, rel=0.01)
    assert fig["ms_per_launch"] == 0.15
    assert fig["mj_per_launch"] == pytest.approx(fig["watts"] * 0.15)
    assert 1.0 <= fig["window_s"] < 1.05
    assert fig["instant_w"] == 703.0 and fig["sm_clock_mhz"] == 1500.0
    assert fig["throttle_reasons"] == ["software power cap"]  # idle bit dropped
    assert fig["launches"] > 0 and "NVML" in fig["source"]
    assert fig["counter_step_s"] == pytest.approx(0.02, rel=0.05)
    assert fig["uncertainty_pct"] == pytest.approx(4.0, rel=0.1)  # 2 steps / 1 s window


def test_coarse_steps_do_not_bias_the_power():
    # a 100 ms step on a 0.5 s window: a naive read at the window's ends would be off by up to 20 %
    fig = _measure({"watts": 450.0, "step_s": 0.1}, seconds=0.5)
    assert fig["watts"] == pytest.approx(450.0, rel=0.01)


def test_no_counter_and_a_frozen_counter_give_a_note():
    assert "no NVML energy counter" in _measure({"watts": 1.0, "answers": False})["note"]
    assert "did not advance" in _measure({"watts": 1.0, "frozen": True})["note"]


def test_per_work_and_describe():
    fig = energy.per_work({"watts": 700.0, "ms_per_launch": 0.15, "mj_per_launch": 105.0,
                           "window_s": 2.0, "uncertainty_pct": 10.0, "sm_clock_mhz": 1500.0, "instant_w": 690.0,
                           "throttle_reasons": ["software power cap"]}, flops=int(107.4e9), nbytes=139_000_000)
    assert fig["gflop_per_j"] == pytest.approx(107.4 / 0.105)
    assert fig["gb_per_j"] == pytest.approx(0.139 / 0.105)
    line = energy.describe(EnergyRecord.model_validate(fig))
    assert line.startswith("energy: 700 W board power") and "105 mJ per launch" in line
    assert "1023 GFLOP/J" in line and "software power cap" in line and "+-10 %" in line
    assert energy.describe(EnergyRecord(note="SIMULATED: none")) == "energy: not measured: SIMULATED: none"
    assert energy.per_work({"note": "x"}, 1, 1) == {"note": "x"}


def test_batch_for_keeps_batches_near_3_ms():
    assert energy.batch_for(0.15) == 20
    assert energy.batch_for(1.0) == 3
    assert energy.batch_for(50.0) == 1
    assert energy.batch_for(0.0) == energy.BATCH


@pytest.mark.parametrize("value,ok", [(0.0, True), (0.5, True), (60.0, True), (0.2, False), (61.0, False),
                                      (-1.0, False)])
def test_task_energy_seconds_validated(value, ok):
    if ok:
        assert TaskSpec(energy_s=value).energy_s == value
    else:
        with pytest.raises(ValueError):
            TaskSpec(energy_s=value)


def test_run_summary_shows_energy_or_why_not():
    from engine.result import RunResult, RunStatus
    from tui.screens.run import summary_text

    base = {"status": RunStatus.ok, "simulated": False, "task": {}, "profile": "h200"}
    fig = {"watts": 698.0, "ms_per_launch": 0.152, "mj_per_launch": 106.1, "gflop_per_j": 1012.0,
           "window_s": 2.0}
    assert "board 698 W  106 mJ/launch  1,012 GFLOP/J" in summary_text(RunResult(**base, energy=fig)).plain
    note = summary_text(RunResult(**base, energy={"note": "SIMULATED: no power"})).plain
    assert "energy not measured: SIMULATED: no power" in note
    assert "energy" not in summary_text(RunResult(**base)).plain


def test_tune_form_takes_and_checks_energy_seconds():
    from engine.profiles import load_profiles
    from tui.screens.tune import validate_form

    prof = load_profiles().get("h200")
    base = TaskSpec().model_dump(mode="json")
    task, probs, _ = validate_form(base | {"energy_s": "0.2"}, prof)
    assert task is None and any(p.startswith("energy_s=") and "0.5 s" in p for p in probs)
    task, probs, _ = validate_form(base | {"energy_s": "abc"}, prof)
    assert task is None and any(p.startswith("energy_s='abc'") for p in probs)
    task, probs, _ = validate_form(base | {"energy_s": "5"}, prof)
    assert task is not None and task.energy_s == 5.0


def test_energy_seconds_leave_the_simulated_timings_alone():
    from engine.backends.sim import task_seed

    assert task_seed(TaskSpec(energy_s=5.0)) == task_seed(TaskSpec())


class _FakeField:
    def __init__(self, ret: int, mw: int) -> None:
        self.nvmlReturn = ret
        self.value = type("V", (), {"uiVal": mw})()


class _FakePynvml:
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_CLOCK_SM = 1

    def __init__(self, field_ret: int = 0, energy: bool = True) -> None:
        self.field_ret = field_ret
        if energy:
            self.nvmlDeviceGetTotalEnergyConsumption = lambda h: 123_456_789

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("h", i)

    def nvmlDeviceGetFieldValues(self, h, ids):
        assert ids == [186]
        return [_FakeField(self.field_ret, 612_345)]

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1755 if which == 1 else 0


@pytest.mark.parametrize("field_ret,energy", [(0, True), (3, False)])
def test_nvml_energy_readers(monkeypatch, field_ret, energy):
    from engine import nvml

    monkeypatch.setattr(nvml, "_state", {"init": True, "error": None,
                                         "mod": _FakePynvml(field_ret, energy)})
    assert nvml.energy_mj(0) == (123_456_789 if energy else None)  # a missing function: None
    assert nvml.power_instant_w(0) == (pytest.approx(612.345) if field_ret == 0 else None)
    assert nvml.sm_clock_mhz(0) == 1755


def test_comparison_shows_energy_only_when_measured():
    from rich.console import Console

    from engine.result import RunResult, RunStatus
    from tui.screens.run import comparison_table

    def res(run_id, mj=None):
        return RunResult(status=RunStatus.ok, simulated=False, task={"dtype": "fp16"}, profile="h200",
                         run_id=run_id, energy=None if mj is None else {"mj_per_launch": mj})

    def text(t):
        con = Console(width=100, record=True)
        con.print(t)
        return con.export_text()

    both = text(comparison_table(res(2, 80.0), res(1, 100.0)))
    assert "mJ/launch" in both and "-20.0 % (better)" in both
    assert "mJ/launch" not in text(comparison_table(res(2), res(1)))
