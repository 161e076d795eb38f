"""A run's records (``engine.run_records``) are typed, and stored runs and ``tui bench --json`` read and
write the same bytes as before they were: legacy documents in ``legacy_runs.json``."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from engine.result import RunResult
from engine.run_records import EnergyRecord, LaunchRecord, Record, SolRecord, ValidityRecord
from engine.store import ResultStore
from tui.cli.output import print_json

LEGACY = json.loads((Path(__file__).parent / "legacy_runs.json").read_text())["runs"]


def sol_of(**figures: float | str | None) -> dict:
    """SOL figures for a test that needs only some of them: the ones every run records (FLOPs,
    bytes, the T_SOL terms and the roofline's bound) filled in, ``figures`` over them."""
    return {"flops": 1, "bytes": 1, "t_sol_ms": 1.0, "t_compute_ms": 1.0, "t_memory_ms": 0.1,
            "sol_bound": "compute", **figures}


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_a_stored_run_from_before_reads_and_writes_the_same_bytes(name):
    stored = LEGACY[name]["stored"]
    res = RunResult.model_validate_json(stored)
    assert isinstance(res.sol, SolRecord) and isinstance(res.launch, LaunchRecord)
    assert isinstance(res.validity, ValidityRecord)
    assert res.model_dump_json() == stored


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_bench_json_of_a_run_from_before_is_the_same_bytes(name):
    res = RunResult.model_validate_json(LEGACY[name]["stored"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_json(res.summary_json())
    assert out.getvalue() == LEGACY[name]["bench_json"]


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_a_run_from_before_round_trips_through_the_store(tmp_path, name):
    store = ResultStore(tmp_path / "results.sqlite")
    run_id = store.save(RunResult.model_validate_json(LEGACY[name]["stored"]))
    again = store.get(run_id)
    assert again is not None
    assert again.model_dump_json(exclude={"run_id"}) == RunResult.model_validate_json(
        LEGACY[name]["stored"]).model_dump_json(exclude={"run_id"})


def test_the_cuda_records_read_as_types():
    res = RunResult.model_validate_json(LEGACY["cuda"]["stored"])
    v = res.validity
    assert v.harmful_throttle is True and v.sm_clock_mhz_min == 1710 and isinstance(v.sm_clock_mhz_min, int)
    assert v.other_processes is not None and v.other_processes[0].pid == 4242
    assert v.queue_hold is not None and v.queue_hold.expired == ["ours"]
    assert v.launches_each is not None and v.launches_each.timed == 100
    assert v.model_extra == {"ecc_note": "a key this version does not know"}
    assert res.energy is not None and res.energy.watts == 698.2 and res.energy.note is None
    assert res.launch.launches is not None and res.launch.launches[0].cluster == 2
    assert res.launch.resources is not None and res.launch.resources["gemm_residual_sm90"].registers == 168
    assert res.sol is not None and res.sol.gbps == 547 and isinstance(res.sol.gbps, int)
    assert res.sol_measured is not None and res.sol_measured.sol_pct == 88.7


def test_a_record_keeps_the_keys_given_in_their_order_and_drops_none_it_was_not_given():
    e = EnergyRecord.model_validate({"source": "x", "watts": 5, "note": None})
    assert e.model_dump_json() == '{"source":"x","watts":5,"note":null}'
    e.mj_per_launch = 1.5
    assert e.model_dump() == {"source": "x", "watts": 5, "note": None, "mj_per_launch": 1.5}
    assert EnergyRecord().model_dump_json() == "{}" and ValidityRecord().model_dump() == {}


def test_a_record_assigned_as_a_dict_is_read_as_its_type():
    res = RunResult.model_validate_json(LEGACY["sim"]["stored"])
    assert res.sol is not None
    res.sol_measured = res.sol.model_dump()  # as engine.runner.attach_measured_sol assigns it
    assert isinstance(res.sol_measured, SolRecord) and res.sol_measured == res.sol


def test_a_malformed_record_names_its_field():
    with pytest.raises(ValueError, match="sol.flops"):
        RunResult.model_validate({"status": "ok", "simulated": True, "task": {}, "profile": "h200",
                                  "sol": {"flops": "many", "bytes": 1, "t_sol_ms": 1, "t_compute_ms": 1,
                                          "t_memory_ms": 1, "sol_bound": "compute"}})


def test_every_field_of_every_record_has_a_docstring():
    """STYLE 6: a docstring under every field (pydantic keeps it as the field's description with
    ``use_attribute_docstrings``; here read from the source)."""
    import ast
    import inspect

    import engine.run_records as mod

    tree = ast.parse(inspect.getsource(mod))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if not issubclass(getattr(mod, cls.name), Record) or cls.name == "Record":
            continue
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                nxt = body[i + 1] if i + 1 < len(body) else None
                assert (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                        and isinstance(nxt.value.value, str)), f"{cls.name}.{node.target.id} has no docstring"
