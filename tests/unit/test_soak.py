"""`tui soak`: durations and percentages as input, the summary's arithmetic, and soaks on the
simulated device (run 30x faster than the wall clock) that pass, drift under thermal throttling,
stop at silent data corruption or new ECC errors naming the rule, and leave their series in the
store, including a store made before the soak table existed."""

from __future__ import annotations

import json
import sqlite3

import pytest

from engine.errors import InputError
from engine.soak import parse_duration, parse_percent, summarize
from engine.soak_health import delta, new_errors, xid_events
from engine.soak_options import SoakOptions
from engine.store import ResultStore
from tests.unit.test_multi_device import child_pids
from tui.cli.main import main

SOAK = ["soak", "--backend", "sim", "--json", "--verify-every", "2s"]


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "30")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SOL_COCKPIT_SIM_DEVICES", raising=False)
    monkeypatch.delenv("SOL_COCKPIT_SIM_SLOW_DEVICES", raising=False)


def run_json(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, dict]:
    rc = main(argv)
    return rc, json.loads(capsys.readouterr().out)


# --- input ----------------------------------------------------------------------------------------------

def test_parse_duration_forms() -> None:
    assert parse_duration("30m") == 1800 and parse_duration("90s") == 90 and parse_duration("45") == 45
    assert parse_duration("1h30m") == 5400 and parse_duration("500ms") == 0.5 and parse_duration("2.5h") == 9000
    for bad in ("0", "0s", "-5", "-5s", "abc", "", "5 parsecs"):
        with pytest.raises(InputError) as exc:
            parse_duration(bad, "--verify-every")
        assert exc.value.message.startswith("--verify-every=")
    assert parse_percent("5%", "--max-drift") == 5.0 and parse_percent("0", "--max-drift") == 0.0
    with pytest.raises(InputError):
        parse_percent("-1%", "--max-drift")


@pytest.mark.parametrize("argv,field", [(["--duration", "0"], "--duration"), (["--duration=-3m"], "--duration"),
                                        (["--duration", "10s", "--verify-every", "0"], "--verify-every"),
                                        (["--duration", "10s", "--max-drift", "lots"], "--max-drift")])
def test_bad_input_is_exit_2_naming_the_flag(argv: list[str], field: str, capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, ["soak", "--json", *argv])
    assert rc == 2 and out["field"] == field and out["status"] == "invalid"


# --- the summary ---------------------------------------------------------------------------------------

def series(n: int, slow_after: float | None = None, step: float = 1.0) -> list[dict]:
    out = []
    for k in range(1, n + 1):
        t = k * step
        hot = slow_after is not None and t > slow_after
        out.append({"t_s": t, "ms": 0.2 if hot else 0.1, "launches": 10, "sm_clock_mhz": 1500 if hot else 1980,
                    "throttle_mask": 0x20 if hot else 0x0, "temperature_c": 88 if hot else 50,
                    "temperature_slowdown_c": 87, "power_w": 500.0, "verified": None})
    return out


def test_summary_first_minute_against_last() -> None:
    opts = SoakOptions(duration_s=300, max_drift_pct=5)
    s = summarize(series(300, slow_after=200), opts, device=0, simulated=True)
    assert s.span_s == 60 and s.first_ms == 0.1 and s.last_ms == 0.2
    assert s.drift_pct == pytest.approx(100.0) and s.drift_exceeded and s.status == "drift" and not s.ok
    assert s.throttled_share_pct == pytest.approx(100 * 100 / 300)
    assert "software thermal slowdown" in s.throttle_reasons and "thermal-slowdown" in s.findings
    steady = summarize(series(30), SoakOptions(duration_s=30), device=1, simulated=True)
    assert steady.ok and steady.span_s == 10 and steady.drift_pct == 0 and steady.throttled_share_pct == 0


def test_summary_names_the_rule_of_an_error() -> None:
    s = summarize(series(5), SoakOptions(duration_s=10), 0, True,
                  error="silent data corruption at 4.0 s into the soak: ...", error_kind="sdc")
    assert s.status == "error" and s.rule["id"] == "silent-data-corruption"


def test_counters_delta_and_xid_lines() -> None:
    before = {"ecc_volatile_uncorrected": 0, "ecc_aggregate_uncorrected": 4, "remapped_rows_uncorrectable": None,
              "xid_events": 1, "xid_last": None}
    after = {**before, "xid_events": 2, "xid_last": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1"}
    assert delta(before, after) == {"ecc_volatile_uncorrected": 0, "ecc_aggregate_uncorrected": 0,
                                    "remapped_rows_uncorrectable": None, "xid_events": 1}
    assert "Xid (PCI:0000:3b:00): 79" in new_errors(before, after)
    log = ("[1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
           "[2.0] NVRM: Xid (PCI:0000:18:00): 13, pid=2\n")
    assert xid_events("00000000:3B:00.0", run=lambda argv, t: (0, log)) == (1, log.splitlines()[0][6:])
    assert xid_events("00000000:3B:00.0", run=lambda argv, t: None) == (None, None)


# --- soaks on the simulated device ------------------------------------------------------------------------

def test_soak_ok_stores_its_series(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, [*SOAK, "--duration", "30s"])
    assert rc == 0 and out["ok"] and out["status"] == "ok" and out["simulated"]
    assert out["elapsed_s"] == pytest.approx(30.0) and out["windows"] == 120 and abs(out["drift_pct"]) < 2
    assert out["verifications"] >= 15 and out["verify_failures"] == 0 and out["counters_delta"]["xid_events"] == 0
    assert "series" not in out
    store = ResultStore()
    rows = store.soak_series(out["run_id"])
    assert len(rows) == 120 and rows[0]["t_s"] == pytest.approx(0.25) and rows[-1]["t_s"] == pytest.approx(30.0)
    assert all(r["ms"] > 0 and r["sm_clock_mhz"] == 1980 for r in rows)
    run = store.get(out["run_id"])
    assert run.status.value == "ok" and run.validity.soak["windows"] == 120 and run.simulated
    assert child_pids() == []


def test_soak_stops_at_silent_data_corruption(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, [*SOAK, "--duration", "60s", "--sim-fault", "corrupt", "--sim-fault-after", "10s",
                                "--series"])
    assert rc == 1 and out["status"] == "error" and out["error_kind"] == "sdc"
    assert out["rule"]["id"] == "silent-data-corruption" and "silent data corruption at" in out["error"]
    assert 10 <= out["elapsed_s"] <= 12.5  # stopped at the first failed re-verification, not at the end
    assert out["series"][-1]["verified"] is False and out["verify_failures"] == 1
    assert ResultStore().get(out["run_id"]).status.value == "incorrect"


def test_soak_drift_under_thermal_throttling(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, [*SOAK, "--duration", "30s", "--sim-fault", "throttle", "--sim-fault-after", "15s"])
    assert rc == 1 and out["status"] == "drift" and out["error"] is None and out["drift_exceeded"]
    assert out["drift_pct"] > 20 and 45 < out["throttled_share_pct"] < 55
    assert "thermal-slowdown" in out["findings"]
    rc, out = run_json(capsys, [*SOAK, "--duration", "30s", "--sim-fault", "throttle", "--sim-fault-after", "15s",
                                "--max-drift", "50%"])
    assert rc == 0 and out["status"] == "ok"  # the threshold is the user's


def test_soak_stops_at_new_ecc_errors(capsys: pytest.CaptureFixture) -> None:
    rc, out = run_json(capsys, [*SOAK, "--duration", "30s", "--sim-fault", "ecc", "--sim-fault-after", "5s"])
    assert rc == 1 and out["error_kind"] == "counters" and out["rule"]["id"] == "xid-memory-error"
    assert out["counters_delta"]["ecc_volatile_uncorrected"] == 2 and out["elapsed_s"] < 10


def test_soak_every_gpu_spread(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOL_COCKPIT_SIM_DEVICES", "2")
    monkeypatch.setenv("SOL_COCKPIT_SIM_SLOW_DEVICES", "1=1.3")
    rc, out = run_json(capsys, [*SOAK, "--duration", "9s", "--device", "all", "--no-store"])
    assert rc == 1 and [d["device"] for d in out["devices"]] == [0, 1]
    assert all(d["status"] == "ok" for d in out["devices"]) and out["spread"]["outlier"] == 1
    assert child_pids() == []


def test_sim_fault_needs_the_simulated_device() -> None:
    from tui.cli.soak_args import check_fault

    class Prep:
        simulated = False

    with pytest.raises(InputError):
        check_fault(Prep(), SoakOptions(duration_s=5, sim_fault="corrupt"))


def test_an_old_store_gains_the_soak_table(tmp_path) -> None:
    from engine.store_file import APPLICATION_ID, SCHEMA

    old = SCHEMA.split("CREATE TABLE IF NOT EXISTS soak_samples")[0]
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(old)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO kv (host, key, value, updated_at) VALUES ('h', 'k', '1', 'now')")
    conn.commit()
    conn.close()
    store = ResultStore(path)
    assert store.get_state("k", host="h") == 1  # what it held is still there
    store.save_soak_series(7, [{"t_s": 0.25, "ms": 0.1, "launches": 3, "verified": True, "throttle_mask": 0}])
    assert store.soak_series(7) == [{"t_s": 0.25, "ms": 0.1, "launches": 3, "sm_clock_mhz": None,
                                     "mem_clock_mhz": None, "power_w": None, "temperature_c": None,
                                     "throttle_mask": 0, "verified": True}]
    assert store.soak_series(8) == []
