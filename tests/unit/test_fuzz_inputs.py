"""Property-based fuzzing of what the tool reads: task files, user profiles, the BLOCK_SIZE and
MEMORY_PIPELINING environment knobs and `tui bench` / `tui history` flags. Whatever comes in, the
answer is a task (or a listing) or exit 2 with a message naming the file, flag or field: never a
traceback, never a hang. Seeded (``derandomize``) and bounded, so the suite stays fast and a
failure reproduces."""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path

import pytest
import tomllib
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.errors import InputError
from engine.profiles import BUILTIN_DIR, PEAK_TFLOPS_MAX, load_profiles
from engine.task import TaskSpec, resolve_task
from tui.cli.main import main
from tui.cli.output import print_json

pytestmark = pytest.mark.timeout(120)


def fuzz(examples: int) -> settings:
    """A fixed seed and a bounded number of examples; no deadline (a loaded CI machine is slow, not
    wrong: hangs are caught by the test's timeout). The temp dirs each example uses are its own."""
    return settings(derandomize=True, database=None, max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])


def strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def run_main(argv: list[str]) -> tuple[int | str, str, str]:
    """main(argv) in-process: (exit code, or 'reached' when the task got as far as running; stdout;
    stderr). argparse's SystemExit is its exit code; any other exception fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | str = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
        except Reached:
            code = "reached"
    return code, out.getvalue(), err.getvalue()


class Reached(Exception):
    """Raised in place of running a valid task: the fuzz is about what is refused, and how."""


@pytest.fixture
def no_runs(monkeypatch):
    def fake_run(*args, **kwargs):
        raise Reached

    monkeypatch.setattr("tui.cli.bench.run_prepared", fake_run)


# --- TOML text, hostile values included --------------------------------------------------------------

TASK_KEYS = sorted(TaskSpec.model_fields)

scalars = st.one_of(
    st.integers(min_value=-(2**66), max_value=2**66).map(str),
    st.integers(min_value=0, max_value=100_000).map(str),
    st.integers(min_value=4000, max_value=6000).map(lambda n: "9" * n),
    st.sampled_from(["inf", "-inf", "nan", "+nan", "5e-324", "1e308", "-0.0", "1.5", "0.5", "3.0", "1e3"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["true", "false", "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z"]),
    st.sampled_from(['"128x128"', '"off"', '"1e3"', '""', '"m=1,n=2,k=3"', '"-5"', '"bf16"', '"sim"',
                     '"gemm_residual"', '"add_rmsnorm"', '"nan"', '"128x256x64"', '"consumers=pingpong"']),
    st.text(max_size=12).map(json.dumps),  # json escapes are TOML's; a lone surrogate is refused
)


def _compound(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    keys = st.sampled_from(["m", "n", "k", "consumers", "cluster", "x", "batch"])
    return st.one_of(
        st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(keys, children), max_size=3, unique_by=lambda kv: kv[0]).map(
            lambda kvs: "{" + ", ".join(f"{k} = {v}" for k, v in kvs) + "}"),
    )


values = st.one_of(
    st.recursive(scalars, _compound, max_leaves=8),
    st.integers(min_value=1, max_value=1200).map(lambda d: "[" * d + "]" * d),
)
keys = st.one_of(st.sampled_from([*TASK_KEYS, "task", "blok_size", "Kernel", "a"]),
                 st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True))


@st.composite
def toml_documents(draw) -> bytes:
    """A TOML document of random keys and values, sometimes under [task] or with a [shape] table,
    sometimes with a few random bytes spliced in (not UTF-8, or not TOML any more)."""
    lines = [f"{k} = {v}" for k, v in draw(st.lists(st.tuples(keys, values), max_size=5,
                                                      unique_by=lambda kv: kv[0]))]
    if draw(st.booleans()):
        header = draw(st.sampled_from(["[task]", "[shape]", "[schedule]", "[task.shape]"]))
        at = draw(st.integers(min_value=0, max_value=len(lines)))
        lines.insert(at, header)
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        at = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


def _single_task_key(data: bytes) -> str | None:
    """The one task field a parseable document sets (None: anything else)."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return next(iter(doc)) if len(doc) == 1 and next(iter(doc)) in TASK_KEYS else None


@fuzz(400)
@given(data=toml_documents())
def test_task_files(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "task.toml"
        path.write_bytes(data)
        try:
            task = resolve_task(path, {}, {})
        except InputError as exc:
            event("refused: " + ("TOML" if "TOML" in exc.message or "UTF-8" in exc.message else "a value"))
            assert exc.exit_code == 2
            assert str(path) in exc.message and len(exc.message) < 4000
            field = _single_task_key(data)
            if field is not None:
                assert field in exc.message
        else:
            event("a task")
            assert isinstance(task, TaskSpec)
            json.dumps(task.model_dump(mode="json"), allow_nan=False)


@fuzz(60)
@given(data=toml_documents())
def test_task_files_through_bench(no_runs, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "task.toml"
        path.write_bytes(data)
        code, _, err = run_main(["bench", "--backend", "sim", "--no-store", "--task", str(path)])
    event(f"exit {code}")
    assert code in (2, "reached"), err
    if code == 2:
        assert err.startswith("error:") and "Traceback" not in err


# --- user profiles --------------------------------------------------------------------------------

BASE_PROFILE = (BUILTIN_DIR / "h100-sxm.toml").read_text(encoding="utf-8")
PROFILE_KEYS = [line.split("=", 1)[0].strip() for line in BASE_PROFILE.splitlines()
                if "=" in line and not line.startswith("#")]


plausible_number = st.one_of(st.integers(min_value=1, max_value=10**7).map(str),
                             st.floats(min_value=1e-4, max_value=1e7).map(repr))
plausible_text = st.one_of(st.sampled_from(['"9.0"', '"8.6"', '"12.0"', '"mine"', '"[/bold]"', '"[red]x"']),
                           st.text(max_size=8).map(json.dumps))
"""Values of the kind a profile field holds, so that many fuzzed profiles load and their extremes
reach the JSON output."""


@st.composite
def profile_documents(draw) -> bytes:
    """The H100 profile as a user profile 'mine' with one to three lines replaced by random values,
    sometimes a line dropped or added, sometimes random bytes spliced in."""
    lines = []
    for line in BASE_PROFILE.splitlines():
        key = line.split("=", 1)[0].strip()
        lines.append({"name": 'name = "mine"', "aliases": "aliases = []",
                      "nvml_name_patterns": "nvml_name_patterns = []"}.get(key, line))
    for key in draw(st.lists(st.sampled_from(PROFILE_KEYS), max_size=3, unique=True)):
        i = next(i for i, line in enumerate(lines) if line.split("=", 1)[0].strip() == key)
        action = draw(st.sampled_from(["plausible", "plausible", "hostile", "drop"]))
        text_field = lines[i].split("=", 1)[1].strip().startswith('"')
        value = draw((plausible_text if text_field else plausible_number) if action == "plausible" else values)
        lines[i] = f"{key} = {value}" if action != "drop" else ""
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        lines.insert(1, f"{draw(keys)} = {draw(values)}")
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        at = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


@fuzz(150)
@given(data=profile_documents())
def test_user_profiles(monkeypatch, data):
    with tempfile.TemporaryDirectory() as tmp:
        monkeypatch.setenv("SOL_COCKPIT_CONFIG_DIR", tmp)
        (Path(tmp) / "profiles").mkdir()
        path = Path(tmp) / "profiles" / "mine.toml"
        path.write_bytes(data)
        ps = load_profiles()
        event("skipped" if ps.errors else "loaded")
        assert "h100-sxm" in ps.profiles
        if ps.errors:
            assert len(ps.errors) == 1 and str(path) in ps.errors[0]
        for prof in ps.profiles.values():
            for peak in prof.peak_tflops.model_dump().values():
                assert peak is None or (math.isfinite(peak) and 0 < peak < PEAK_TFLOPS_MAX)
            assert math.isfinite(prof.memory_bandwidth_gbps) and prof.memory_bandwidth_gbps > 0
        code, out, err = run_main(["profiles", "--json"])
        assert code == 0, err
        strict_json(out)
        code, out, err = run_main(["profiles"])  # a table: a profile's text is not rich markup
        assert code == 0, err


# --- the environment knobs ------------------------------------------------------------------------

knob_text = st.one_of(
    st.text(max_size=24),
    st.sampled_from(["128x128", "128x256x64", "256", "off", "0", "1", "2", "3", "-2", "true", "128*128",
                     "128,128", "inf", "nan", "1e3", "9" * 5000, "0x80", "128x", "x128", "[128, 128]"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


@fuzz(300)
@given(block=knob_text, stages=knob_text)
def test_environment_knobs(block, stages):
    env = {"BLOCK_SIZE": block, "MEMORY_PIPELINING": stages}
    try:
        task = resolve_task(None, env, {})
    except InputError as exc:
        event("refused")
        assert exc.exit_code == 2 and "environment " in exc.message and len(exc.message) < 2000
        assert "environment BLOCK_SIZE" in exc.message or "environment MEMORY_PIPELINING" in exc.message
    else:
        assert task.memory_pipelining is None or task.memory_pipelining == 0 or task.memory_pipelining >= 2


# --- command-line flags -------------------------------------------------------------------------------

FLAGS = {
    "--shape": (["shape", "dimension"], st.sampled_from(["m=64,n=128,k=256", "256,2560,2560", "16x512x2560",
                                                         "m=8192,n=65536,k=2560", "m=1,n=8,k=16"])),
    "--block-size": (["block_size"], st.sampled_from(["128x128", "128x256", "64x64", "256x128", "128x256x64"])),
    "--pipelining": (["memory_pipelining"], st.sampled_from(["off", "2", "3", "4", "5"])),
    "--warmup": (["warmup"], st.integers(min_value=0, max_value=20).map(str)),
    "--iterations": (["iterations"], st.integers(min_value=1, max_value=20).map(str)),
    "--timeout": (["timeout"], st.sampled_from(["1", "30", "300.5", "86400"])),
    "--seed": (["seed"], st.integers(min_value=0, max_value=2**63 - 1).map(str)),
    "--device": (["device"], st.integers(min_value=0, max_value=63).map(str)),
    "--energy": (["energy"], st.sampled_from(["0", "0.5", "5"])),
    "--rest": (["rest"], st.sampled_from(["0", "1.5", "60"])),
    "--schedule": (["schedule"], st.sampled_from(["consumers=pingpong", "consumers=cooperative", "cluster=1", ""])),
    "--kernel": (["kernel"], st.sampled_from(["gemm_residual", "add_rmsnorm", "bias_gelu"])),
    "--dtype": (["dtype"], st.sampled_from(["bf16", "fp16", "fp32", "tf32"])),
    "--profile": (["profile"], st.sampled_from(["h100", "h200", "a100", "l40s", "rtx-4090"])),
}
"""Each task flag: the words an error about it names (besides the flag itself), and values that are
meant to work (the fuzz mixes them with hostile ones)."""

flag_values = st.one_of(
    knob_text,
    st.sampled_from(["m=1,n=2,k=3", "m=0,n=8,k=8", "1x2x3", "consumers=pingpong", "cluster=99", "a=", "nope",
                     "", " ", "0.5", "86401", "-1", "1e400", "batch=16,seq=512,hidden=2560", "inf", "nan"]),
)


@st.composite
def bench_flags(draw) -> list[tuple[str, str]]:
    chosen = draw(st.lists(st.sampled_from(sorted(FLAGS)), min_size=1, max_size=4, unique=True))
    return [(f, draw(st.one_of(FLAGS[f][1], FLAGS[f][1], flag_values))) for f in chosen]


@fuzz(250)
@given(flags=bench_flags())
def test_bench_flags(no_runs, flags):
    argv = ["bench", "--backend", "sim", "--no-store"]
    for flag, value in flags:
        argv += [flag, value] if not value.startswith("-") else [f"{flag}={value}"]
    code, _, err = run_main(argv)
    event(f"exit {code}")
    assert code in (2, "reached"), err
    if code == 2:
        assert "error" in err and "Traceback" not in err and len(err) < 6000
        if len(flags) == 1:
            flag = flags[0][0]
            assert any(w in err.lower() for w in [flag, *FLAGS[flag][0]]) or "BLOCK_SIZE" in err, err


@fuzz(100)
@given(limit=st.one_of(flag_values, st.integers(min_value=-(2**80), max_value=2**80).map(str)))
def test_history_limit(limit):
    code, out, err = run_main(["history", "--json", f"--limit={limit}"])
    assert code in (0, 2)
    if code == 2:
        assert "--limit" in err
    else:
        assert strict_json(out)["runs"] == []


# --- what the tool writes ---------------------------------------------------------------------------

json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=4), children, max_size=4)),
    max_leaves=12,
)


@fuzz(200)
@given(obj=json_like)
def test_print_json_is_always_strict_json(obj):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        print_json(obj)
    strict_json(out.getvalue())


@fuzz(200)
@given(kernel=st.sampled_from(["gemm_residual", "add_rmsnorm", "bias_gelu"]),
       dims=st.lists(st.integers(min_value=1, max_value=2**31 - 1), min_size=3, max_size=3))
def test_sim_slice_stays_within_its_memory_budget(kernel, dims):
    from engine.backends.sim import SIM_MAX_BYTES, host_bytes, sim_slice
    from kernels import get_spec

    spec = get_spec(kernel)
    shape = dict(zip(spec.dims, dims, strict=False))
    task = TaskSpec(kernel=kernel, shape=shape)
    small = sim_slice(spec, task, shape)
    assert host_bytes(spec, task, small) <= SIM_MAX_BYTES
    assert all(1 <= small[d] <= shape[d] for d in spec.dims)


@fuzz(60)
@given(data=st.one_of(st.binary(max_size=3000),
                      st.text(max_size=2000).map(lambda t: t.encode("utf-8", "surrogatepass")),
                      st.text(max_size=500).map(lambda t: t.encode("utf-16")),
                      st.lists(st.sampled_from(["cudaFuncSetAttribute ", "Xid (", "CUDA error: ", "NaN ",
                                                "out of memory", "(", ")", "\n", "SOL=", "LnkSta "]),
                               max_size=400).map(lambda xs: "".join(xs).encode())))
def test_diagnose_input(data, tmp_path_factory):
    """Any bytes given to tui diagnose: exit 0 (matched) or 1 (nothing), no traceback, no hang."""
    path = tmp_path_factory.mktemp("diag") / "log.txt"
    path.write_bytes(data)
    code, out, err = run_main(["diagnose", str(path), "--json"])
    assert code in (0, 1), err
    strict_json(out)
