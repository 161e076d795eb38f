"""A user kernel's reference is a closed language (or a trusted file): a shared spec runs nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import InputError
from engine.user_kernels import load_kernel_file
from kernels.reference_expr import ReferenceError_, check, evaluate

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "kernels" / "saxpy.toml"
NAMES = {"x", "y", "a", "n"}


def value(expr: str, **env):
    env = {"x": np.arange(4.0), "y": np.ones(4), "a": 2.0, "n": 4, **env}
    return evaluate(expr, check(expr, set(env)), np, env)


@pytest.mark.parametrize("expr,want", [
    ("a * x + y", [1, 3, 5, 7]),
    ("np.tanh(x) * 0 + np.maximum(x, 2)", [2, 2, 2, 3]),
    ("np.where(x > 1, x, 0)", [0, 0, 2, 3]),
    ("np.einsum('i,i->i', x, y)", [0, 1, 2, 3]),
    ("(x[:, None] * y[None, :]).sum(axis=1)", [0, 4, 8, 12]),
    ("x.reshape(2, 2).T.ravel()", [0, 2, 1, 3]),
    ("x.astype('float32') ** 2", [0, 1, 4, 9]),
    ("x[::-1] if n > 2 else x", [3, 2, 1, 0]),
    ("np.clip(x, a_min=1, a_max=2)", [1, 1, 2, 2]),
])
def test_the_language_computes_references(expr, want):
    assert np.allclose(value(expr), want)


def test_a_dict_names_several_outputs():
    out = value("{'out': a * x, 'norm': np.sqrt((x * x).sum())}")
    assert set(out) == {"out", "norm"} and np.isclose(out["norm"], np.sqrt(14))


@pytest.mark.parametrize("expr,why", [
    ("np.save('/tmp/marker', x)", r"np\.save is not in the reference language"),
    ("np.load('/etc/passwd')", r"np\.load is not in"),
    ("np.fromfile('/etc/passwd')", r"np\.fromfile is not in"),
    ("np.ctypeslib.as_array(x)", r"np\.ctypeslib is not in"),
    ("x.ctypes.data", r"an array\.ctypes is not in"),
    ("x.tofile('/tmp/marker')", r"an array\.tofile is not in"),
    ("x.T.base", r"an array\.base is not in"),
    ("open('/tmp/marker', 'w')", r"unknown name open"),
    ("__import__('os')", r"names starting with '_'"),
    ("x.__class__.__mro__", r"attributes starting with '_'"),
    ("np.lib.npyio", r"np\.lib is not in"),
    ("np.vectorize(print)(x)", r"np\.vectorize is not in"),
    ("np", r"np is only usable as np\.NAME"),
    ("np.asarray(np)", r"np is only usable"),
    ("(lambda: 1)()", r"lambdas"),
    ("[v for v in x]", r"comprehensions"),
    ("np.add(*x)", r"star arguments"),
    ("np.add(**{'a': 1})", r"\*\* arguments"),
    ("f'{x}'", r"f-strings"),
    ("b'ab'", r"bytes literals"),
    ("'" + "a" * 100 + "'", r"strings longer than"),
    ("x and y", r"and / or"),
    ("print(x)", r"unknown name print"),
    ("x.sum.__self__", r"attributes starting with '_'"),
    ("(x.sum())(x)", r"calling x.sum\(\) is not allowed"),
    ("z + x", r"unknown name z"),
])
def test_what_could_reach_files_or_native_code_is_refused_before_anything_runs(expr, why):
    with pytest.raises(ReferenceError_, match=why):
        check(expr, NAMES)


@pytest.mark.parametrize("expr", ["10**10**10", "n << 100", "n >> -1", "1 << -1", "'a' * 100000000",
                                  "(n,) * 100000000", "(0 - n) ** 0.5", "n // 0", "a / 0",
                                  "123456789012345678901234567890 * 123456789012345678901234567890"])
def test_python_number_arithmetic_is_bounded(expr):
    with pytest.raises(ReferenceError_):
        value(expr)


def test_a_spec_whose_reference_tries_code_is_refused_naming_the_field(tmp_path):
    for bad in ("np.save('m', x) or a * x + y", "x.ctypes", "__import__('os')"):
        spec = tmp_path / "saxpy.toml"
        (tmp_path / "saxpy.cu").write_text((SAXPY.with_suffix(".cu")).read_text())
        spec.write_text(SAXPY.read_text().replace('expr = "a * x + y"', f"expr = {json.dumps(bad)}"))
        with pytest.raises(InputError, match=r"saxpy\.toml: reference\.expr: "):
            load_kernel_file(spec)


def _tui(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.main", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT)


def test_kernels_and_bench_never_run_an_untrusted_reference_file(tmp_path):
    config = tmp_path / "config"
    folder = config / "kernels"
    folder.mkdir(parents=True)
    marker = tmp_path / "MARKER"
    (folder / "saxpy.cu").write_text(SAXPY.with_suffix(".cu").read_text())
    (folder / "saxpy.toml").write_text(SAXPY.read_text().replace('expr = "a * x + y"', 'file = "ref.py"'))
    (folder / "ref.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                   "def reference(x, y, a, n):\n    return a * x + y\n")
    env = {**os.environ, "SOL_COCKPIT_CONFIG_DIR": str(config), "SOL_COCKPIT_DATA_DIR": str(tmp_path / "data"),
           "SOL_COCKPIT_CACHE_DIR": str(tmp_path / "cache")}
    listed = _tui("kernels", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout)["kernels"] if r["name"] == "saxpy")
    assert row["reference"].startswith(f"runs Python from {folder / 'ref.py'} (not trusted")
    bench = _tui("bench", "--kernel", "saxpy", "--shape", "n=4096", "--backend", "sim", "--no-store", env=env)
    assert bench.returncode == 2 and "is Python code" in bench.stderr and "--trust-reference" in bench.stderr
    assert not marker.exists()
    trusted = _tui("bench", "--kernel", "saxpy", "--shape", "n=4096", "--backend", "sim", "--no-store",
                   "--trust-reference", "--json", env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert marker.read_text() == "ran" and json.loads(trusted.stdout)["correct"]
    marker.unlink()
    (folder / "ref.py").write_text((folder / "ref.py").read_text() + "# changed after it was trusted\n")
    again = _tui("bench", "--kernel", "saxpy", "--shape", "n=4096", "--backend", "sim", "--no-store", env=env)
    assert again.returncode == 2 and "not trusted" in again.stderr and not marker.exists()


_ATOMS = st.sampled_from(["x", "y", "a", "n", "np", "1", "0", "-1", "2.5", "10**10", "'ij'", "None", "...", "x.T",
                          "np.save", "x.ctypes", "__import__", "open", "np.exp", "x.sum", "()", "[]"])
_OPS = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "@", "<<", ">>", "&", "|", "^", "<", "==", " if n else "])


@st.composite
def _expressions(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(_ATOMS)
    kind = draw(st.sampled_from(["binop", "call", "subscript", "attr", "unary"]))
    a, b = draw(_expressions(depth - 1)), draw(_expressions(depth - 1))
    if kind == "binop":
        return f"({a} {draw(_OPS)} {b})"
    if kind == "call":
        return f"{a}({b})"
    if kind == "subscript":
        return f"{a}[{b}]"
    if kind == "attr":
        return f"{a}.{draw(st.sampled_from(['T', 'sum', 'real', 'reshape', 'tofile', 'base', '_x', 'shape']))}"
    return f"{draw(st.sampled_from(['-', '~', 'not ']))}{a}"


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions())
def test_fuzzed_expressions_are_refused_or_evaluated_never_anything_else(expr):
    try:
        tree = check(expr, NAMES)
    except ReferenceError_:
        return
    env = {"x": np.arange(4.0), "y": np.ones(4), "a": 2.0, "n": 4}
    try:
        evaluate(expr, tree, np, env)
    except (ReferenceError_, ValueError, TypeError, IndexError, AttributeError, ArithmeticError):
        pass  # an array error, which verification reports as the reference's failure
