"""The GPU tests' expectations about the knobs they run, checked where no GPU is: every GPU test
that runs knobs through ``_wrong`` also asserts what the launch reports (the default tile at a
shape, where the epilogue tile lives, the consumers, the schedule). Those reports come from the
host-side plan, so a change of a default rule that moves a GPU test's shape onto other knobs fails
here, before a device is lent, instead of on the H200 as a kernel failure."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

import tests.gpu.test_engine_gpu as gpu_tests
from engine.profiles import load_profiles
from engine.result import RunStatus
from engine.run_records import LaunchRecord
from kernels import get_spec
from kernels.spec import DeviceLimits, render_task, violations_of

H200 = DeviceLimits.from_profile(load_profiles().get("h200"))

EXPECTING = sorted(name for name, fn in vars(gpu_tests).items()
                   if name.startswith("test_") and callable(fn) and "_wrong(" in inspect.getsource(fn))
"""The GPU tests that run knobs through ``_wrong`` (and so assert what the launch reports)."""


def _planned_run(task):
    """What ``_backend_run`` would report, without running: the same default knobs, the kernel's
    validation, and the build's launch info; correct and fully written by assumption (the GPU
    checks that part)."""
    spec = get_spec(task.kernel)
    task = gpu_tests.with_default_knobs(task, H200)
    violations = violations_of(spec, task, H200)
    if violations:
        return SimpleNamespace(status=RunStatus.invalid, launch=LaunchRecord(), correctness=None,
                               error="; ".join(v.message for v in violations))
    build = render_task(spec, task, H200)
    return SimpleNamespace(status=RunStatus.ok, launch=LaunchRecord(info=build.info),
                           correctness=SimpleNamespace(correct=True, unwritten_count=0), error="")


def test_the_gpu_tests_that_expect_knobs_are_found() -> None:
    assert len(EXPECTING) >= 9 and "test_epilogue_tile_in_the_ring_correct" in EXPECTING


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("name", EXPECTING)
def test_gpu_test_knobs_are_planned_as_it_expects(monkeypatch: pytest.MonkeyPatch, name: str, dtype: str) -> None:
    monkeypatch.setattr(gpu_tests, "_backend_run", _planned_run)
    fn = getattr(gpu_tests, name)
    if "monkeypatch" in fn.__code__.co_varnames[:fn.__code__.co_argcount]:
        fn(monkeypatch, dtype)
    else:
        fn(dtype)
