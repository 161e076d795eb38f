"""GPU tests (marker `gpu`): the example user kernels run correct through the CUDA backend in the
engine process, a tune on the GPU finds a correct best, and a user kernel that faults or hangs is
contained like ours (the run says what happened and the GPU takes the next run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.result import RunStatus
from engine.runner import prepare, run_prepared
from engine.task import TaskSpec

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernels"
MATMUL, SAXPY = EXAMPLES / "scaled_matmul.toml", EXAMPLES / "saxpy.toml"


@pytest.fixture(autouse=True)
def _forget_user_kernels():
    """User kernels registered by a test are forgotten after it, so other tests in the session see
    the built-in kernels only."""
    yield
    import kernels

    kernels._USER.clear()


def _run(spec: Path, **kw):
    task = TaskSpec(kernel_file=str(spec), backend="cuda", warmup=2, iterations=10, peers=False, **kw)
    return run_prepared(prepare(task))


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("tile,depth", [("8", 1), ("16", 2), ("32", 4)])
def test_scaled_matmul_is_correct(dtype, tile, depth):
    res = _run(MATMUL, dtype=dtype, shape={"m": 333, "n": 515, "k": 257}, block_size=tile,
               schedule={"depth": depth})
    assert res.status is RunStatus.ok, res.error
    assert not res.simulated and res.correctness is not None and res.correctness.correct, res.correctness
    assert res.correctness.unwritten_count == 0


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("block,items", [("128", 1), ("256", 2), ("1024", 8)])
def test_saxpy_is_correct(dtype, block, items):
    res = _run(SAXPY, dtype=dtype, shape={"n": 1_000_000 + 8 * 17}, block_size=block,
               schedule={"items_per_thread": items})
    assert res.status is RunStatus.ok, res.error
    assert res.correctness is not None and res.correctness.correct, res.correctness


def test_saxpy_reaches_most_of_the_bandwidth():
    """Memory-bound: at 256 M elements the example moves 3 GB per launch; well over half of the
    H200's datasheet bandwidth is a low bar a working vectorised kernel clears."""
    res = _run(SAXPY, shape={"n": 256 * 2**20})
    assert res.status is RunStatus.ok and res.correctness.correct
    assert res.sol and (res.sol.bandwidth_util_pct or 0) > 50, res.sol


def test_tune_on_the_gpu_finds_a_correct_best():
    from engine.tuner import tune

    result = tune(TaskSpec(kernel_file=str(MATMUL), backend="cuda", shape={"m": 1024, "n": 1024, "k": 1024},
                           peers=False, iterations=20), budget_s=60)
    assert result.best is not None and result.best.correct and not result.simulated


def _faulty(tmp_path: Path, body: str) -> Path:
    """The saxpy example with its function body replaced by ``body``."""
    (tmp_path / "faulty.cu").write_text(
        "extern \"C\" __global__ void saxpy(const scalar_t* x, const scalar_t* y, scalar_t* out, float a, int n) {\n"
        f"{body}\n}}\n")
    spec = tmp_path / "faulty.toml"
    spec.write_text(SAXPY.read_text().replace('name = "saxpy"', 'name = "faulty"')
                    .replace('source = "saxpy.cu"', 'source = "faulty.cu"'))
    return spec


def test_a_faulting_user_kernel_is_contained(tmp_path):
    spec = _faulty(tmp_path, "    ((volatile float*)0x10)[threadIdx.x] = 1.0f;")
    res = _run(spec, shape={"n": 4096})
    assert res.status is RunStatus.launch_error, (res.status, res.error)
    again = _run(SAXPY, shape={"n": 4096})  # the GPU takes the next run
    assert again.status is RunStatus.ok and again.correctness.correct


def test_a_hanging_user_kernel_is_killed(tmp_path):
    # an asm volatile in the loop is a side effect: the compiler may not drop the loop (an empty
    # infinite loop is undefined behaviour in C++, and NVRTC removed one on a local volatile)
    spec = _faulty(tmp_path, "    for (;;) { asm volatile(\"nanosleep.u32 1000;\"); }")
    res = run_prepared(prepare(TaskSpec(kernel_file=str(spec), backend="cuda", shape={"n": 4096},
                                        warmup=1, iterations=1, peers=False, timeout_s=20)))
    assert res.status is RunStatus.timeout, (res.status, res.error)
    again = _run(SAXPY, shape={"n": 4096})
    assert again.status is RunStatus.ok and again.correctness.correct


def test_a_user_kernel_from_the_config_dir(tmp_path, monkeypatch):
    folder = tmp_path / "config" / "kernels"
    folder.mkdir(parents=True)
    for f in ("scaled_matmul.toml", "scaled_matmul.cu"):
        shutil.copy(EXAMPLES / f, folder / f)
    monkeypatch.setenv("SOL_COCKPIT_CONFIG_DIR", str(tmp_path / "config"))
    res = run_prepared(prepare(TaskSpec(kernel="scaled_matmul", backend="cuda", shape={"m": 256, "n": 256, "k": 256},
                                        warmup=1, iterations=5, peers=False)))
    assert res.status is RunStatus.ok and res.correctness.correct
