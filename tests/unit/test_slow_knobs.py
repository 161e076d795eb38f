"""A knob choice that runs twice as slow as others on the same task fires a rule (issue 47, defect
20), and the simulated device spends simulated time on its launches: 50 000 take longer than 100."""

from __future__ import annotations

import json
import time

import pytest

from engine import ResultStore
from tui.cli.main import main

BENCH = ["bench", "--backend", "sim", "--no-peers", "--iterations", "20", "--warmup", "1"]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_twice_as_slow_knob_choice_fires_a_rule(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    fast = json.loads(cli(capsys, *BENCH, "--json")[1])["run_id"]
    code, out, _ = cli(capsys, *BENCH, "--block-size", "16x64")
    assert code == 0 and "finding (knobs-much-slower)" in out and f"of run #{fast} with 128x128" in out
    slow = ResultStore().list(limit=1)[0]
    assert [r["id"] for r in ResultStore().get(slow.id).matched_rules] == ["knobs-much-slower"]
    code, out, _ = cli(capsys, *BENCH)  # the same knobs as the fast run: nothing to say
    assert "knobs-much-slower" not in out


def test_simulated_launches_take_simulated_time(capsys, monkeypatch):
    monkeypatch.setenv("SOL_SIM_SPEED", "4")  # 50 000 x 0.156 ms = 7.8 s of launches -> 1.95 s
    walls = []
    for n in ("100", "50000"):
        t0 = time.monotonic()
        assert cli(capsys, *BENCH[:-4], "--iterations", n, "--no-store")[0] == 0
        walls.append(time.monotonic() - t0)
    assert walls[1] - walls[0] > 1.2, walls  # 100 launches: 4 ms
    monkeypatch.setenv("SOL_SIM_SPEED", "0")
    code, _, err = cli(capsys, *BENCH)
    assert code == 2 and "SOL_SIM_SPEED" in err


def test_a_run_stored_by_the_engine_carries_the_finding(capsys):
    """The cockpit's runs are stored by ``run_prepared(store=...)``: the finding is on them too."""
    from engine import TaskSpec, prepare, run_prepared

    store = ResultStore()
    fast = run_prepared(prepare(TaskSpec(backend="sim", peers=False, iterations=20), None), store=store)
    slow = run_prepared(prepare(TaskSpec(backend="sim", peers=False, iterations=20, block_size="16x64"), None),
                        store=store)
    assert fast.matched_rules == [] and [r["id"] for r in slow.matched_rules] == ["knobs-much-slower"]
    assert [r["id"] for r in store.get(slow.run_id).matched_rules] == ["knobs-much-slower"]


@pytest.mark.parametrize("name", ["SOL_SIM_SPEED", "SOL_SIM_SOAK_SPEED"])
@pytest.mark.parametrize("bad", ["abc", "0", "-5", "1e9", "nan"])
def test_a_malformed_simulated_speed_is_an_input_error_naming_the_variable(name, bad):
    from engine.backends.sim import run_speed, soak_speed
    from engine.errors import InputError

    read = run_speed if name == "SOL_SIM_SPEED" else soak_speed
    with pytest.raises(InputError) as err:
        read({name: bad})
    assert name in str(err.value)
    assert read({}) == 1.0
