"""TaskSpec.rest_s: the same rest before ours and each peer, so the comparison starts from one card
state (a GEMM timed right after another measured up to 12 % slower on the H200)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.task import REST_MAX_S, TaskSpec


@pytest.mark.parametrize("value,ok", [(0.0, True), (3.0, True), (REST_MAX_S, True), (-0.5, False),
                                      (REST_MAX_S + 1, False)])
def test_rest_seconds_validated(value, ok):
    if ok:
        assert TaskSpec(rest_s=value).rest_s == value
    else:
        with pytest.raises(ValidationError, match="rest_s"):
            TaskSpec(rest_s=value)


def test_cli_rest_flag_defaults_to_three_seconds():
    from tui.cli.main import build_parser
    from tui.cli.task_args import task_from_args

    parser = build_parser()
    for argv, want in ((["bench"], 0.0), (["bench", "--rest"], 3.0), (["bench", "--rest", "7.5"], 7.5)):
        args = parser.parse_args(argv)
        assert task_from_args(args).rest_s == want


def test_rest_leaves_the_simulated_timings_alone():
    from engine.backends.sim import task_seed

    assert task_seed(TaskSpec(rest_s=3.0)) == task_seed(TaskSpec())


def test_rest_sleeps_and_says_so(monkeypatch):
    pytest.importorskip("cupy")
    from engine.backends import cuda_timer as cuda

    slept, said = [], []
    monkeypatch.setattr(cuda.time, "sleep", slept.append)

    class Em:
        def info(self, message, level="info"):
            said.append(message)

    cuda.rest(0.0, Em(), "ours")
    assert slept == [] and said == []
    cuda.rest(3.0, Em(), "cublas_gemm")
    assert slept == [3.0] and said == ["resting 3 s before timing cublas_gemm"]


def test_rested_runs_drop_the_peers_caveat():
    from engine.result import PeerResult, RunResult, RunStatus
    from engine.timing import timing_stats

    peer = PeerResult(name="cublas_gemm", label="cuBLAS GEMM", timing=timing_stats([0.14]))
    base = dict(status=RunStatus.ok, simulated=False, profile="h200", peers=[peer])
    assert RunResult(task={"rest_s": 0.0}, **base).peers_caveat is not None
    assert RunResult(task={"rest_s": 3.0}, **base).peers_caveat is None
    assert RunResult(task={"rest_s": 3.0}, **base).summary_json()["rest_s"] == 3.0
    assert RunResult(task={}, **base).summary_json()["rest_s"] == 0.0  # results saved before rest_s
