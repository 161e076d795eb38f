"""The operators' checklist: ordered steps, derived from the store where possible, resumable."""

from __future__ import annotations

from typing import Any

import pytest

from engine.checklist import Checklist, step_ids
from engine.errors import InputError
from engine.result import Correctness, Fingerprint, RunResult, Timing
from engine.store import ResultStore
from tests.unit.test_run_records import sol_of


def save_run(store: ResultStore, simulated: bool = False, block: str = "128x128x32", stages: int = 3,
             status: str = "ok", profile: str = "h100-sxm", **kw: Any) -> int:
    res = RunResult(
        status=status, simulated=simulated, profile=profile,
        task={"kernel": "gemm_residual", "dtype": "bf16", "shape": {"m": 8192, "n": 2560, "k": 2560},
              "block_size": block, "memory_pipelining": stages, "fusion": True, "backend": "cuda"},
        timing=Timing(median_ms=0.5, p10_ms=0.49, p90_ms=0.52, mean_ms=0.5, min_ms=0.48, samples=100),
        correctness=Correctness(correct=True, max_abs_err=0.01, max_rel_err=0.001, normwise_rel_err=0.001,
                                rtol=0.02, checked_elements=10),
        sol=sol_of(tflops=640.0, gbps=300.0, sol_pct=72.0),
        fingerprint=Fingerprint(gpu_name="NVIDIA H100 80GB HBM3", backend="sim" if simulated else "cuda"), **kw)
    return store.save(res)


@pytest.fixture
def store() -> ResultStore:
    return ResultStore()


def test_fresh_host_starts_at_the_first_step(store: ResultStore) -> None:
    steps = Checklist(store).steps()
    assert [s.id for s in steps] == step_ids() == ["checks", "profile", "smoke", "baseline", "tuned", "exported"]
    assert not any(s.done for s in steps)
    assert all(s.next_action for s in steps)
    assert Checklist(store).next_step().id == "checks"


def test_checks_step_follows_the_last_check_summary(store: ResultStore) -> None:
    cl = Checklist(store)
    cl.record_checks({"pass": 20, "warn": 2, "fail": 1, "skip": 7})
    assert not cl.steps()[0].done
    cl.record_checks({"pass": 21, "warn": 2, "fail": 0, "skip": 7})
    assert cl.steps()[0].done and cl.steps()[0].source == "derived"


def test_runs_derive_smoke_baseline_and_tuned_but_simulated_runs_do_not_count(store: ResultStore) -> None:
    cl = Checklist(store)
    save_run(store, simulated=True)
    by = {s.id: s for s in cl.steps()}
    assert not by["smoke"].done and "simulated" in by["smoke"].detail
    save_run(store)
    by = {s.id: s for s in cl.steps()}
    assert by["smoke"].done and by["baseline"].done and not by["tuned"].done
    save_run(store, block="128x256x32", stages=4)
    assert {s.id: s for s in cl.steps()}["tuned"].done


def test_baseline_needs_the_confirmed_profile(store: ResultStore) -> None:
    cl = Checklist(store)
    save_run(store, profile="a100-sxm-80gb")
    cl.mark("profile", True, profile="h100-sxm")
    by = {s.id: s for s in cl.steps()}
    assert by["profile"].done and "h100-sxm" in by["profile"].detail
    assert not by["baseline"].done and "h100-sxm" in by["baseline"].detail


def test_state_survives_a_restart_and_is_per_host(store: ResultStore) -> None:
    Checklist(store).mark("exported", True, "sent to the team")
    again = Checklist(ResultStore(store.path))
    assert {s.id: s for s in again.steps()}["exported"].done
    other = Checklist(store, host="other-box")
    assert not {s.id: s for s in other.steps()}["exported"].done


def test_undo_reset_and_unknown_step(store: ResultStore) -> None:
    cl = Checklist(store)
    cl.mark("tuned", True)
    cl.mark("tuned", False)
    assert not {s.id: s for s in cl.steps()}["tuned"].done
    cl.mark("exported", True)
    cl.reset()
    assert not any(s.done for s in cl.steps())
    with pytest.raises(InputError):
        cl.mark("coffee", True)


def test_simulated_runs_are_said_not_to_count_and_a_tune_ticks_tuned(tmp_path, monkeypatch):
    """The baseline step said 'no stored ok run' while History listed ok (simulated) runs."""
    from engine.checklist import Checklist
    from engine.runner import prepare, run_prepared
    from engine.store import ResultStore
    from engine.task import TaskSpec

    monkeypatch.setenv("SOL_SIM_DELAY", "0")
    store = ResultStore(tmp_path / "s.db")
    run_prepared(prepare(TaskSpec(backend="sim", iterations=5)), store=store)
    steps = {st.id: st for st in Checklist(store).steps()}
    assert not steps["baseline"].done and "1 SIMULATED run(s) stored do not count" in steps["baseline"].detail
    store.put_tuned({"gpu": "NVIDIA H200", "sm_count": 132, "kernel": "gemm_residual", "source_hash": "x",
                     "dtype": "bf16", "shape": "k=1,m=1,n=1", "fusion": 1, "regime": "burst", "block_size": "8x16",
                     "memory_pipelining": 6, "schedule": {}, "median_ms": 0.01, "default_ms": None,
                     "candidates": 3, "simulated": 0, "tuned_at": "t", "host": "h", "origin": None})
    steps = {st.id: st for st in Checklist(store).steps()}
    assert steps["tuned"].done and "NVIDIA H200" in steps["tuned"].detail
