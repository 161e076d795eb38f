"""A result's task (``engine.recorded_task``): typed for reading, written back exactly as stored,
however old the record and whatever today's rules say of it."""

import json

import pytest

from engine.errors import InputError
from engine.recorded_task import RecordedTask
from engine.result import PeerResult, RunResult, RunStatus
from engine.store import ResultStore
from engine.task import TaskSpec
from engine.timing import timing_stats
from tests.unit.test_run_records import sol_of

LEGACY_TASK = ('{"kernel":"gemm_residual","shape":{"m":8192,"n":2560,"k":2560},"dtype":"bf16","block_size":"128x128",'
               '"memory_pipelining":4,"fusion":true,"warmup":10,"iterations":100,"device":0,"backend":"cuda",'
               '"verify":true,"peers":true,"seed":0,"timeout_s":300.0,"fault":"none"}')
"""A task as a version before rest_s, energy_s, schedule and kernel_file recorded it."""

REFUSED_TASK = ('{"kernel":"gemm_residual","shape":{"m":8192,"n":2560,"k":2560},"dtype":"fp8","block_size":"96x96",'
                '"memory_pipelining":1,"split_k":2,"fusion":true,"iterations":0,"rest_s":3,"verify":"sometimes"}')
"""A task today's TaskSpec refuses: a dtype, a stage count and an iteration count it no longer
allows, a field it no longer has (split_k), a rest written as an integer and a value of no type the
field takes (verify)."""


def stored_with_task(store: ResultStore, task_json: str) -> tuple[int, str]:
    """A real run's result stored with ``task_json`` as its task, as an older version wrote it."""
    peer = PeerResult(name="cublas_gemm", label="cuBLAS GEMM", timing=timing_stats([0.17, 0.18]))
    res = RunResult(status=RunStatus.ok, simulated=False, task=RecordedTask.of(TaskSpec(backend="cuda")),
                    profile="h200", timing=timing_stats([0.15, 0.16]), peers=[peer], sol=sol_of(sol_pct=50.0),
                    started_at="2025-05-14T13:02:00+00:00")
    run_id = store.save(res)
    text = res.model_dump_json()
    now = json.dumps(res.task.model_dump(mode="json"), separators=(",", ":"))
    assert text.count(now) == 1
    text = text.replace(now, task_json)
    with store.transaction() as conn:
        conn.execute("UPDATE runs SET result_json = ? WHERE id = ?", (text, run_id))
    return run_id, text


def test_a_new_result_records_the_task_as_task_spec_dumps_it():
    task = TaskSpec(kernel="add_rmsnorm", block_size="256", rest_s=2.0)
    dumped = task.model_dump(mode="json")
    rec = RecordedTask.of(task)
    assert json.dumps(rec.model_dump(mode="json")) == json.dumps(dumped)  # keys, order and values
    assert (rec.kernel, rec.shape, rec.dtype, rec.rest_s) == ("add_rmsnorm", task.shape, "bf16", 2.0)
    assert rec.knobs == {"block_size": "256", "memory_pipelining": None, "fusion": True}
    assert rec.to_task() == task
    res = RunResult(status=RunStatus.ok, simulated=True, task=rec, profile="h200")
    assert f'"task":{json.dumps(dumped, separators=(",", ":"))},' in res.model_dump_json()
    assert RunResult.model_validate_json(res.model_dump_json()) == res


def test_a_recorded_shape_replaces_the_tasks_in_its_place():
    """The run records the shape under the kernel's own names (``backends.collect``)."""
    task = TaskSpec(shape="16x512x2560")
    rec = RecordedTask.of(task, shape={"m": 8192, "n": 2560, "k": 2560})
    assert list(rec.model_dump()) == list(task.model_dump())
    assert rec.model_dump()["shape"] == rec.shape == {"m": 8192, "n": 2560, "k": 2560}


def test_the_record_has_a_field_for_each_of_task_specs():
    assert list(RecordedTask.model_fields) == list(TaskSpec.model_fields)


def test_a_record_is_frozen_and_a_copy_with_changes_writes_the_changes():
    rec = RecordedTask.of(TaskSpec())
    with pytest.raises(ValueError):
        rec.iterations = 5
    changed = rec.model_copy(update={"iterations": 5})
    assert changed.iterations == 5 and changed.model_dump()["iterations"] == 5
    assert list(changed.model_dump()) == list(rec.model_dump()) and rec.iterations == 100


def test_a_record_made_before_rest_s_reads_it_as_not_recorded():
    rec = RecordedTask.model_validate_json(LEGACY_TASK)
    assert rec.model_dump_json() == LEGACY_TASK
    assert rec.rest_s is None and rec.energy_s is None and rec.schedule is None and rec.model_extra == {}
    again = rec.to_task()  # to run it again, today's defaults fill what was not recorded
    assert again.rest_s == 0.0 and again.schedule == {} and again.memory_pipelining == 4


def test_a_record_today_refuses_reads_as_recorded_and_runs_again_only_with_a_named_error():
    rec = RecordedTask.model_validate_json(REFUSED_TASK)
    assert rec.model_dump_json() == REFUSED_TASK
    assert (rec.dtype, rec.block_size, rec.memory_pipelining, rec.iterations, rec.rest_s) == ("fp8", "96x96", 1, 0, 3.0)
    assert rec.model_extra == {"split_k": 2}
    assert rec.verify is None  # recorded in a form no field type reads: None, and kept as recorded
    with pytest.raises(InputError) as err:
        rec.to_task()
    for field in ("dtype='fp8'", "memory_pipelining=1", "iterations=0", "verify='sometimes'", "split_k: unknown field"):
        assert field in err.value.message, field


def test_a_result_saved_before_rest_s_reads_as_no_rest_and_is_written_back_as_stored(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    run_id, stored = stored_with_task(store, LEGACY_TASK)
    res = store.get(run_id)
    assert res is not None and res.model_dump_json() == stored
    assert res.task == RecordedTask.model_validate_json(LEGACY_TASK) and res.task.rest_s is None
    assert res.rest_s == 0.0 and res.summary_json()["rest_s"] == 0.0  # no rest was taken then
    assert res.peers_caveat is not None and res.timing_note is None
    assert res.summary_json()["knobs"] == {"block_size": "128x128", "memory_pipelining": 4, "fusion": True}


def test_a_result_whose_task_today_refuses_still_reads_and_is_written_back_as_stored(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    run_id, stored = stored_with_task(store, REFUSED_TASK)
    res = store.get(run_id)
    assert res is not None and res.model_dump_json() == stored
    assert res.task == RecordedTask.model_validate_json(REFUSED_TASK)
    assert res.rest_s == 3.0 and res.summary_json()["dtype"] == "fp8" and res.summary_json()["knobs"] == {
        "block_size": "96x96", "memory_pipelining": 1, "fusion": True}
    assert [r.id for r in store.list()] == [run_id]
    with pytest.raises(InputError, match="split_k"):
        res.task.to_task()
