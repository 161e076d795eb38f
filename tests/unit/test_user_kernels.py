"""User kernels from spec files: field-named errors, safe expressions, constraint pruning, and the
examples run through bench, tune, kernels and the store on the simulated device."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.errors import InputError
from engine.user_kernels import load_kernel_file
from kernels.expr import ExprError, evaluate, parse
from kernels.spec import DeviceLimits, render_task, violations_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kernels"
MATMUL, SAXPY = EXAMPLES / "scaled_matmul.toml", EXAMPLES / "saxpy.toml"
H200 = DeviceLimits((9, 0), 132, 232448, 233472, profile="h200")


@pytest.fixture(autouse=True)
def _forget_user_kernels():
    """User kernels registered by a test are forgotten after it, so other tests in the session see
    the built-in kernels only."""
    yield
    import kernels

    kernels._USER.clear()


def tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli.main", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def variant(tmp_path: Path, src: Path, old: str, new: str, name: str | None = None) -> Path:
    """A copy of an example spec (and its .cu) with ``old`` replaced by ``new``."""
    text = src.read_text()
    assert old in text, old
    shutil.copy(src.with_suffix(".cu"), tmp_path / src.with_suffix(".cu").name)
    out = tmp_path / (name or src.name)
    out.write_text(text.replace(old, new))
    return out


def task(spec, **kw):
    base = dict(shape=dict(spec.default_shape), dtype="fp32", block_size=None, memory_pipelining=None, schedule={})
    return SimpleNamespace(**{**base, **kw})


# --- expressions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["__import__('os').system('id')", "x.__class__", "().__class__.__bases__",
                                  "open('/tmp/x', 'w')", "(lambda: 1)()", "[1, 2][0]", "'a' * 3",
                                  "m.bit_length()", "eval('1')", "_hidden + 1"])
def test_expressions_refuse_anything_but_arithmetic(text):
    with pytest.raises(ExprError):
        parse(text)


def test_expressions_evaluate_arithmetic_and_allowed_functions():
    env = {"m": 1000, "TILE": 16, "itemsize": 2}
    assert evaluate(parse("cdiv(m, TILE)"), env) == 63
    assert evaluate(parse("ceil_div(m, TILE) * TILE >= m and TILE % 8 == 0"), env) is True
    assert evaluate(parse("max(1, min(m // TILE, 8)) + log2(TILE)"), env) == 12
    assert evaluate(parse("2 * TILE * TILE * itemsize <= 1024"), env) is True
    with pytest.raises(ExprError, match="division by zero"):
        evaluate(parse("m // (TILE - 16)"), env)
    with pytest.raises(ExprError, match="beyond 64"):
        evaluate(parse("10 ** 10 ** 10"), env)
    with pytest.raises(ExprError, match="does not parse"):
        parse("cdiv(m, TILE")


# --- spec errors name the field ------------------------------------------------------------------
@pytest.mark.parametrize("old,new,expect", [
    ('block = ["TILE", "TILE"]', 'block = ["TIL", "TILE"]', r"launch\.block\[0\]: .*unknown name TIL"),
    ('flops = "2 * m * n * k"', 'flops = "2 * m * n * TILE"', r"flops: .*unknown name TILE"),
    ('flops = "2 * m * n * k"', 'flops = "2 * m * (n"', r"flops: .*does not parse"),
    ('grid = ["cdiv(n, TILE)"', 'grid = ["n.real"', r"launch\.grid\[0\]: .*attribute access"),
    ('entry = "scaled_matmul"', 'entry = "scaled_matmul"\ncolour = "red"', r"colour: unknown field"),
    ('shared_mem_bytes =', 'threads = 3\nshared_mem_bytes =', r"launch\.threads: unknown field"),
    ("default = 16\n", "default = 64\n", r"knobs\.TILE: .*default 64 is not one of"),
    ('{ name = "A", kind = "input", shape = ["m", "k"] }', '{ name = "A", kind = "input" }',
     r"args\[0\]: .*needs shape"),
    ('expr = "alpha * (A @ B)"', 'expr = "alpha * (A @ Q)"', r"reference\.expr: .*unknown name Q"),
    ('expr = "alpha * (A @ B)"', 'expr = "A.__class__"', r"reference\.expr: .*attributes starting with '_'"),
    ('source = "scaled_matmul.cu"', 'source = "missing.cu"', r"source: no such file"),
    ('name = "scaled_matmul"', 'name = "bias_gelu"', r"name: .*built-in kernel"),
])
def test_bad_specs_name_the_field(tmp_path, old, new, expect):
    bad = variant(tmp_path, MATMUL, old, new)
    with pytest.raises(InputError) as err:
        load_kernel_file(bad)
    assert re.search(expect, err.value.message), err.value.message
    assert str(bad) in err.value.message


def test_bad_spec_on_the_cli_is_exit_2_with_json(tmp_path):
    bad = variant(tmp_path, SAXPY, 'flops = "2 * n"', 'flops = "2 * n +"')
    out = tui("bench", "--kernel-file", str(bad), "--backend", "sim", "--json", "--no-store")
    assert out.returncode == 2, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "invalid" and "flops" in doc["error"] and "does not parse" in doc["error"]
    not_toml = tui("bench", "--kernel-file", str(EXAMPLES / "saxpy.cu"), "--backend", "sim")
    assert not_toml.returncode == 2 and ".toml" in not_toml.stderr


# --- constraints and knobs -----------------------------------------------------------------------
def test_constraints_prune_against_the_profile_limits():
    spec = load_kernel_file(MATMUL)
    small = DeviceLimits((8, 9), 142, 12 * 1024, 100 * 1024, profile="small")
    assert spec.block_size_options(H200, "fp32") == ["16", "8", "32"]
    assert spec.block_size_options(small, "fp32") == ["16", "8"]  # 32 x 32 x 2 slabs need 16 KB
    problems = violations_of(spec, task(spec, block_size="32", schedule={"depth": 4}), small)
    assert [p.field for p in problems] == ["block_size", "block_size"]
    text = str(problems[0])
    assert "TILE = 32" in text and "shared_memory_per_block_bytes = 12288" in text
    assert not violations_of(spec, task(spec, block_size="32", schedule={"depth": 1}), small)
    bad = violations_of(spec, task(spec, block_size="12", schedule={"depht": 2}), H200)
    assert {p.field for p in bad} == {"block_size", "schedule.depht"}


def test_dimension_constraint_names_the_dimension():
    spec = load_kernel_file(SAXPY)
    problems = violations_of(spec, task(spec, shape={"n": 1001}), H200)
    assert [p.field for p in problems] == ["shape.n"] and "16-byte vectors" in str(problems[0])
    assert not violations_of(spec, task(spec, shape={"n": 1000}), H200)
    assert violations_of(spec, task(spec, shape={"n": 1004}, dtype="bf16"), H200)  # 8 per vector in 16 bits


def test_plan_shows_the_knobs_as_the_engine_knobs():
    from engine import TaskSpec, load_profiles, plan

    p = plan(TaskSpec(kernel_file=str(MATMUL), backend="sim"), load_profiles().get("h100"))
    assert p.ok and p.task.kernel == "scaled_matmul" and p.task.dtype.value == "fp32"
    assert p.block_size_options == ("16", "8", "32")
    assert [(k.name, k.values) for k in p.schedule_options] == [("depth", (1, 2, 4))]
    assert p.schedule == {"depth": 2} and p.flops == 2 * 2048**3
    assert p.info["knobs"] == {"TILE": 16, "DEPTH": 2}


def test_a_task_runs_the_kernel_it_names():
    """The file names its kernel when the task names none; a task naming another known kernel runs
    that one (the cockpit's form switching kernels); an unknown one is an error naming both."""
    from pydantic import ValidationError

    from engine import TaskSpec, resolve_task

    assert TaskSpec(kernel_file=str(SAXPY)).kernel == "saxpy"
    switched = TaskSpec(kernel="add_rmsnorm", kernel_file=str(SAXPY))
    assert switched.kernel == "add_rmsnorm" and switched.kernel_file is None
    with pytest.raises(ValidationError, match="defines 'saxpy'"):
        TaskSpec(kernel="no_such_kernel", kernel_file=str(SAXPY))
    with pytest.raises(InputError, match="^task: kernel='no_such_kernel': the kernel file .* defines 'saxpy'"):
        resolve_task(None, {}, {"kernel": "no_such_kernel", "kernel_file": str(SAXPY)})


# --- the simulated device, the tuner, the store --------------------------------------------------
def test_bench_on_the_simulated_device_is_labelled(tmp_path):
    out = tui("bench", "--kernel-file", str(SAXPY), "--backend", "sim", "--shape", "n=65536", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["simulated"] is True and doc["kernel"] == "saxpy" and doc["correct"] is True
    assert doc["flops"] == 2 * 65536 and doc["bytes"] == 3 * 65536 * 4
    assert doc["launch"]["info"]["knobs"] == {"BLOCK": 256, "ITEMS_PER_THREAD": 2}
    hist = tui("history", "--kernel", "saxpy", "--json")
    assert hist.returncode == 0 and "saxpy" in hist.stdout


def test_tune_on_the_simulated_device_finds_a_best():
    out = tui("tune", "--kernel-file", str(MATMUL), "--backend", "sim", "--shape", "m=512,n=512,k=512",
              "--budget", "20", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    res = doc["shapes"][0]
    assert res["simulated"] is True and res["best"] is not None
    assert res["best"]["block_size"] == "32" and res["best"]["schedule"] == {"depth": 4}
    assert res["timed"] == 9
    again = tui("bench", "--kernel-file", str(MATMUL), "--backend", "sim", "--shape", "m=512,n=512,k=512",
                "--json", "--no-store")
    assert json.loads(again.stdout)["knobs"]["block_size"] == "32"


def test_a_kernel_in_the_config_dir_is_found_by_name(tmp_path, monkeypatch):
    folder = Path(tmp_path / "config" / "kernels")
    folder.mkdir(parents=True)
    for f in ("saxpy.toml", "saxpy.cu"):
        shutil.copy(EXAMPLES / f, folder / f)
    (folder / "broken.toml").write_text('name = "broken"\nsauce = 1\n')
    out = tui("kernels", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    row = next(r for r in doc["kernels"] if r["name"] == "saxpy")
    assert row["source"] == str(folder / "saxpy.toml") and row["knobs"]["BLOCK"]["role"] == "block_size"
    assert any("broken.toml" in e and "sauce: unknown field" in e for e in doc["user_kernel_errors"])
    bench = tui("bench", "--kernel", "saxpy", "--shape", "n=4096", "--backend", "sim", "--json", "--no-store")
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["kernel"] == "saxpy"


def test_a_reference_file(tmp_path):
    from engine import TaskSpec
    from engine.runner import run_task

    spec = variant(tmp_path, SAXPY, 'expr = "a * x + y"', 'file = "ref.py"', "saxpy_file.toml")
    pid_file = tmp_path / "imported_by"
    (tmp_path / "ref.py").write_text(f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                                     "def reference(x, y, a, n):\n    return a * x + y\n")
    with pytest.raises(InputError, match=r"reference.file .*ref.py is Python code.*not trusted"):
        run_task(TaskSpec(kernel_file=str(spec), shape={"n": 4096}, backend="sim", peers=False))
    assert not pid_file.exists()  # refused before anything ran
    from engine.user_kernels import trust_reference

    trust_reference(spec)
    _, res = run_task(TaskSpec(kernel_file=str(spec), shape={"n": 4096}, backend="sim", peers=False))
    assert res.ok and res.simulated and res.correctness is not None and res.correctness.correct
    assert int(pid_file.read_text()) != os.getpid()  # imported by the engine process, never by the caller


# --- NVRTC (no GPU needed) -----------------------------------------------------------------------
nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC is not importable")


@pytest.mark.parametrize("path", [MATMUL, SAXPY], ids=["scaled_matmul", "saxpy"])
def test_the_examples_compile_with_nvrtc(path):
    from kernels.nvrtc_check import compile_cubin

    spec = load_kernel_file(path)
    for dtype in spec.dtypes:
        for bs in spec.block_size_options(H200, dtype):
            t = task(spec, dtype=dtype, block_size=bs)
            build = render_task(spec, t, H200)
            report = compile_cubin(build.source, H200.arch, build.options)
            assert report.ok, report.log
            assert not report.spills and spec.defn.entry in report.functions


def test_a_compile_error_shows_the_log_with_the_users_line(tmp_path):
    from kernels.nvrtc_check import compile_cubin

    spec_path = variant(tmp_path, SAXPY, 'source = "saxpy.cu"', 'source = "broken.cu"')
    lines = (EXAMPLES / "saxpy.cu").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if "Vec16 r;" in ln)
    lines[at] = lines[at].replace("Vec16 r;", "Vec16 r")  # a missing semicolon, 1-based line at + 1
    (tmp_path / "broken.cu").write_text("\n".join(lines) + "\n")
    spec = load_kernel_file(spec_path)
    build = render_task(spec, task(spec, shape={"n": 4096}), H200)
    report = compile_cubin(build.source, H200.arch, build.options)
    assert not report.ok
    assert re.search(rf"broken\.cu\({at + 1}|broken\.cu\({at + 2}\)", report.log), report.log
