"""The GPU tests' expectations about the knobs they run, checked where no GPU is: every GPU test
that runs knobs through ``_wrong`` also asserts what the launch reports (the default tile at a
shape, where the epilogue tile lives, the consumers, the schedule). Those reports come from the
host-side plan, so a change of a default rule that moves a GPU test's shape onto other knobs fails
here, before a device is lent, instead of on the H200 as a kernel failure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import tests.gpu.test_engine_gpu as gpu_tests
from engine.profiles import load_profiles
from engine.result import RunStatus
from kernels import get_spec
from kernels.spec import DeviceLimits

H200 = DeviceLimits.from_profile(load_profiles().get("h200"))

EXPECTING = ("test_epilogue_tile_in_the_ring_correct", "test_fit_tiles_correct",
             "test_half_tail_with_few_ctas_and_many_halves", "test_m_fastest_and_grouped_tile_orders_correct",
             "test_reused_ring_and_wide_tiles_correct",
             "test_shared_epilogue_buffer_correct", "test_swapped_tiles_correct",
             "test_tile_orders_at_every_stage_count", "test_wide_swapped_tiles_correct")


def _planned_run(task):
    """What ``_backend_run`` would report, without running: the same default knobs (the kernel's own
    rules where both are unset), the kernel's validation, and the build's launch info; correct
    and fully written by assumption (the GPU checks that part)."""
    spec = get_spec(task.kernel)
    if task.block_size is None and task.memory_pipelining is None:
        bs, st = spec.default_knobs(H200, task.dtype.value, spec.normalize_shape(task.shape))
        task = task.model_copy(update={"block_size": bs, "memory_pipelining": st})
    violations = spec.check(task, H200)
    if violations:
        return SimpleNamespace(status=RunStatus.invalid, launch=None, correctness=None,
                               error="; ".join(v.message for v in violations))
    build = spec.build(task, H200)
    return SimpleNamespace(status=RunStatus.ok, launch={"info": build.info},
                           correctness=SimpleNamespace(correct=True, unwritten_count=0), error="")


def test_every_expecting_gpu_test_is_listed() -> None:
    import inspect

    source = inspect.getsource(gpu_tests)
    users = {name for name, fn in vars(gpu_tests).items()
             if name.startswith("test_") and callable(fn) and "_wrong(" in inspect.getsource(fn)}
    assert users == set(EXPECTING), "list the GPU tests that call _wrong here"
    assert "def _backend_run" in source


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("name", EXPECTING)
def test_gpu_test_knobs_are_planned_as_it_expects(monkeypatch: pytest.MonkeyPatch, name: str, dtype: str) -> None:
    monkeypatch.setattr(gpu_tests, "_backend_run", _planned_run)
    fn = getattr(gpu_tests, name)
    if "monkeypatch" in fn.__code__.co_varnames[:fn.__code__.co_argcount]:
        fn(monkeypatch, dtype)
    else:
        fn(dtype)
