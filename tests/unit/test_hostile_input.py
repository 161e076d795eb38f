"""Hostile and mistaken input: every file, flag and value the tool reads either works or ends in
exit 2 with a message naming the file or flag and the field; never a traceback, never silence."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.errors import InputError
from engine.profiles import BUILTIN_DIR, load_profiles
from engine.task import FILE_TYPES, TaskSpec, resolve_task
from tui.cli.main import main
from tui.cli.output import print_json

SIM = ["--backend", "sim", "--iterations", "3", "--warmup", "1", "--no-peers", "--no-store"]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """main(argv) in-process; argparse's SystemExit becomes its exit code."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def strict_json(text: str) -> object:
    """json.loads that refuses Infinity and NaN, as every reader but Python's does."""
    def refuse(name: str) -> object:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def user_profile(tmp_path: Path, text: str | bytes, stem: str = "mine") -> Path:
    """Write a user profile into the config dir the root conftest points SOL_COCKPIT_CONFIG_DIR at."""
    udir = tmp_path / "config" / "profiles"
    udir.mkdir(parents=True, exist_ok=True)
    path = udir / f"{stem}.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def h100_profile_text(name: str = "mine", **replace: str) -> str:
    """The built-in H100 profile as a user profile named ``name``, with ``replace``'s lines swapped in
    (key -> the TOML text of its value)."""
    lines = []
    for line in (BUILTIN_DIR / "h100-sxm.toml").read_text(encoding="utf-8").splitlines():
        key = line.split("=", 1)[0].strip()
        if key == "name":
            line = f'name = "{name}"'
        elif key in ("aliases", "nvml_name_patterns"):
            line = f"{key} = []"
        elif key in replace:
            line = f"{key} = {replace.pop(key)}"
        lines.append(line)
    assert not replace, f"keys not in the profile: {replace}"
    return "\n".join(lines) + "\n"


# --- 1. bytes that are not UTF-8; a bad user profile is reported and skipped ----------------------

def test_task_file_that_is_not_utf8_names_the_file_and_byte_offset(tmp_path, capsys):
    f = tmp_path / "t.toml"
    f.write_bytes(b'kernel = "gemm\xff"\n')
    with pytest.raises(InputError) as e:
        resolve_task(f, {}, {})
    assert str(f) in e.value.message and "not UTF-8" in e.value.message and "byte offset 14" in e.value.message
    code, _, err = run_cli(capsys, "bench", *SIM, "--task", str(f))
    assert code == 2 and "byte offset 14" in err


def test_a_utf8_byte_order_mark_is_not_an_error(tmp_path):
    f = tmp_path / "t.toml"
    f.write_bytes(b'\xef\xbb\xbfdtype = "fp16"\n')
    assert resolve_task(f, {}, {}).dtype.value == "fp16"


def _bad_profiles() -> dict[str, str | bytes]:
    return {
        "not_utf8": b'name = "mine"\nnotes = "\xff\xfe"\n',
        "5000_digit_integer": h100_profile_text(registers_per_sm="9" * 5000),
        "nested_1000_deep": h100_profile_text() + "x = " + "[" * 1000 + "]" * 1000 + "\n",
        "infinite_peak": h100_profile_text().replace("bf16 = 989.4", "bf16 = inf"),
        "nan_peak": h100_profile_text().replace("fp16 = 989.4", "fp16 = nan"),
        "denormal_peak": h100_profile_text().replace("fp32 = 66.9", "fp32 = 5e-324"),
        "absurd_peak": h100_profile_text().replace("bf16 = 989.4", "bf16 = 1e7"),
        "boolean_sm_count": h100_profile_text(sm_count="true"),
        "quoted_memory_gb": h100_profile_text(memory_gb='"80"'),
        "block_above_sm": h100_profile_text(shared_memory_per_block_bytes="300000"),
    }


@pytest.mark.parametrize("case", sorted(_bad_profiles()))
def test_bad_user_profile_is_reported_and_skipped(tmp_path, case):
    path = user_profile(tmp_path, _bad_profiles()[case])
    ps = load_profiles()
    assert "mine" not in ps.profiles and "h100-sxm" in ps.profiles
    assert len(ps.errors) == 1 and str(path) in ps.errors[0]
    with pytest.raises(InputError, match="'mine' was skipped"):
        ps.get("mine")


@pytest.mark.parametrize("field,value", [("bf16", "inf"), ("fp32", "5e-324"), ("fp16", "nan")])
def test_skipped_profile_asked_for_by_name_says_which_field(tmp_path, field, value):
    text = h100_profile_text()
    old = next(line for line in text.splitlines() if line.startswith(f"{field} ="))
    user_profile(tmp_path, text.replace(old, f"{field} = {value}"))
    with pytest.raises(InputError, match=f"peak_tflops.{field}"):
        load_profiles().get("mine")


def test_a_bad_user_profile_breaks_no_command(tmp_path, capsys):
    user_profile(tmp_path, b'name = "mine"\nnotes = "\xff"\n')
    code, out, err = run_cli(capsys, "profiles")
    assert code == 0 and "skipped user profile" in err and "mine.toml" in err
    code, out, _ = run_cli(capsys, "profiles", "--json")
    assert code == 0 and any("mine.toml" in e for e in strict_json(out)["errors"])
    code, out, _ = run_cli(capsys, "kernels", "--json")
    assert code == 0 and strict_json(out)["profile"] == "h100-sxm"
    code, _, _ = run_cli(capsys, "bench", *SIM)
    assert code == 0


def test_profile_text_is_shown_as_text_not_rich_markup(tmp_path, capsys):
    user_profile(tmp_path, h100_profile_text(display_name='"[/b]"'))
    user_profile(tmp_path, 'sm_count = "[/x]"\n', stem="broken")
    code, out, err = run_cli(capsys, "profiles")
    assert code == 0 and "[/b]" in out and "[/x]" in err
    code, out, _ = run_cli(capsys, "profiles", "mine")
    assert code == 0 and "[/b]" in out


def test_the_cockpit_starts_with_a_bad_user_profile(tmp_path):
    from engine.telemetry import SimulatedSource, simulated_sampler
    from tui.app import make_app

    user_profile(tmp_path, "x = " + "[" * 1000 + "]" * 1000 + "\n")
    app = make_app(backend="sim", telemetry=simulated_sampler(SimulatedSource(), history_s=60),
                   start_telemetry=False, checks_on_start=False)
    assert "h100-sxm" in app.profiles.profiles
    assert any("mine.toml" in p and "nested" in p for p in app.startup_problems)


# --- 6. values that gave tracebacks are exit 2 ----------------------------------------------------

@pytest.mark.parametrize("text,needle", [
    ("block_size = [inf, 128]", "block_size"),
    ("block_size = [[1]]", "block_size"),
    ("block_size = [{}]", "block_size"),
    ("block_size = [true, 128]", "block_size"),
    ("warmup = " + "9" * 5000, "5000 digits"),
    ("[shape]\nm = " + "1" * 5000, "5000 digits"),
    ("seed = 18446744073709551616", "64-bit"),
    ("a = " + "[" * 1000 + "]" * 1000, "nested"),
    ("a = " + "[" * 100 + "]" * 100, "nested"),
    ("schedule = " + "{a = " * 40 + "1" + "}" * 40, "nested"),
    ("timeout_s = inf", "timeout_s"),
    ("energy_s = nan", "energy_s"),
])
def test_task_file_values_that_crashed_are_exit_2(tmp_path, capsys, text, needle):
    f = tmp_path / "t.toml"
    f.write_text(text + "\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "bench", *SIM, "--task", str(f))
    assert code == 2, err
    assert str(f) in err and needle in err and len(err) < 2000


@pytest.mark.parametrize("limit", ["99999999999999999999", "0", "-1", "9" * 5000, "1e3", ""])
def test_history_limit_out_of_range_is_exit_2_naming_the_flag(capsys, limit):
    code, _, err = run_cli(capsys, "history", "--limit", limit)
    assert code == 2 and "--limit" in err and "1 to 1000000" in err and len(err) < 1000


@pytest.mark.parametrize("flag", ["--kernel", "--profile"])
def test_history_empty_filter_is_refused_naming_the_flag(capsys, flag):
    code, _, err = run_cli(capsys, "history", flag, " ")
    assert code == 2 and flag in err and "empty" in err


def test_history_table_shows_a_store_path_as_text_not_rich_markup(tmp_path, capsys):
    store = tmp_path / "[/x]" / "runs.sqlite"
    store.parent.mkdir(parents=True)
    code, out, _ = run_cli(capsys, "history", "--store", str(store))
    assert code == 0 and "[/x]" in out


def test_history_limit_in_range_still_works(capsys):
    code, out, _ = run_cli(capsys, "history", "--limit", "1000000", "--json")
    assert code == 0 and strict_json(out)["runs"] == []


def test_no_tile_fits_is_exit_2_naming_the_limit(tmp_path, capsys):
    user_profile(tmp_path, h100_profile_text(shared_memory_per_block_bytes="1000"))
    try:
        code = main(["bench", *SIM, "--profile", "mine"])
    finally:
        _, err = capsys.readouterr()
    assert code == 2 and "1000 bytes" in err


# --- 7. silent acceptance -------------------------------------------------------------------------

def test_task_table_beside_top_level_keys_is_refused_naming_them(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('iterations = 3\ndtype = "fp16"\n[task]\nkernel = "gemm_residual"\n', encoding="utf-8")
    with pytest.raises(InputError) as e:
        resolve_task(f, {}, {})
    assert "[task]" in e.value.message and "'iterations'" in e.value.message and "'dtype'" in e.value.message
    assert e.value.exit_code == 2


def test_task_key_that_is_not_a_table_is_refused(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text("task = 3\n", encoding="utf-8")
    with pytest.raises(InputError, match="task: expected a table"):
        resolve_task(f, {}, {})


@pytest.mark.parametrize("text,field", [
    ("iterations = true", "iterations"),
    ('fusion = "off"', "fusion"),
    ('timeout_s = "1e3"', "timeout_s"),
    ("warmup = 1.5", "warmup"),
    ("verify = 1", "verify"),
    ("peers = 0", "peers"),
    ("kernel = 3", "kernel"),
    ("dtype = true", "dtype"),
    ('seed = "1"', "seed"),
    ("energy_s = true", "energy_s"),
    ("device = 0.0", "device"),
    ("memory_pipelining = true", "memory_pipelining"),
    ("memory_pipelining = 2.0", "memory_pipelining"),
    ("shape = [1, 2, 3]", "shape"),
    ("backend = 1979-05-27", "backend"),
])
def test_task_file_types_are_strict(tmp_path, text, field):
    f = tmp_path / "t.toml"
    f.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        resolve_task(f, {}, {})
    assert f"{field}=" in e.value.message and str(f) in e.value.message


def test_every_task_field_has_its_file_types():
    assert set(FILE_TYPES) == set(TaskSpec.model_fields)


def test_documented_text_forms_still_work(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('memory_pipelining = "off"\ntimeout_s = 100\nshape = "m=64,n=128,k=256"\nblock_size = [128, 128]\n'
                 'energy_s = 0\nschedule = {consumers = "pingpong", cluster = 2}\n', encoding="utf-8")
    t = resolve_task(f, {}, {})
    assert t.memory_pipelining == 0 and t.timeout_s == 100.0 and t.shape == {"m": 64, "n": 128, "k": 256}
    assert str(t.block_size) == "128x128" and t.schedule == {"consumers": "pingpong", "cluster": 2}
    # flags and environment variables arrive as text, and the cockpit's form sends text too
    t = resolve_task(None, {"BLOCK_SIZE": "128x128", "MEMORY_PIPELINING": "off"},
                     {"memory_pipelining": "off", "shape": "m=1,n=2,k=3", "schedule": "consumers=pingpong"})
    assert (str(t.block_size), t.memory_pipelining, t.shape) == ("128x128", 0, {"m": 1, "n": 2, "k": 3})
    assert TaskSpec.model_validate({"warmup": "10", "energy_s": "0", "fusion": True}).warmup == 10


def test_empty_block_size_flag_is_refused(capsys):
    code, _, err = run_cli(capsys, "bench", *SIM, "--block-size", " ")
    assert code == 2 and "block_size" in err and "empty" in err


def test_empty_profile_name_is_refused():
    with pytest.raises(InputError, match="empty"):
        load_profiles().get(" ")


def test_empty_profile_flag_is_refused_naming_it(capsys):
    code, _, err = run_cli(capsys, "bench", *SIM, "--profile", "")
    assert code == 2 and "--profile" in err


# --- 8. strict JSON ---------------------------------------------------------------------------------

def test_print_json_never_prints_infinity_or_nan(capsys):
    print_json({"a": math.inf, "b": [math.nan, 1.5], "c": {"d": -math.inf}, "e": "inf"})
    out, err = capsys.readouterr()
    assert strict_json(out) == {"a": None, "b": [None, 1.5], "c": {"d": None}, "e": "inf"}
    assert "a" in err and "b[0]" in err and "c.d" in err and "null" in err


def test_profiles_json_is_strict_json(capsys):
    code, out, _ = run_cli(capsys, "profiles", "--json")
    assert code == 0 and strict_json(out)["profiles"]


# --- 10. the simulated device sizes its CPU slice by what it needs --------------------------------

def test_sim_slice_of_a_wide_gemm_fits_its_memory_budget():
    from engine.backends.sim import SIM_MAX_BYTES, SIM_ROWS, host_bytes, sim_slice
    from kernels import get_spec

    spec = get_spec("gemm_residual")
    for shape in ({"m": 8192, "n": 65536, "k": 2560}, {"m": 8192, "n": 65536, "k": 32760},
                  {"m": 1, "n": 2**31 - 1, "k": 1}):
        task = TaskSpec(shape=shape)
        small = sim_slice(spec, task, shape)
        assert small["m"] == min(shape["m"], SIM_ROWS)
        assert host_bytes(spec, task, small) <= SIM_MAX_BYTES
    seed = TaskSpec().shape
    assert sim_slice(spec, TaskSpec(), seed) == {**seed, "m": SIM_ROWS}  # the seed case is computed whole


SIM_UNDER_RLIMIT = textwrap.dedent("""
    import os, resource
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
    os.environ["SOL_SIM_DELAY"] = "0"
    from engine.backends.base import Emitter, RunContext
    from engine.backends.stages import run_on
    from engine.planner import plan
    from engine.profiles import load_profiles
    from engine.task import TaskSpec
    from kernels import get_spec
    task = TaskSpec(shape={"m": 8192, "n": 65536, "k": 32760}, backend="sim", iterations=3, warmup=1,
                    peers=False)
    prof = load_profiles().get("h100")
    p = plan(task, prof)
    assert p.ok, p.error_text()
    ctx = RunContext(task=p.task, profile=prof, spec=get_spec(p.task.kernel), emit=Emitter(send=lambda e: None))
    res = run_on("sim", ctx)
    print(res.status.value, res.correctness.correct, res.correctness.note)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is Linux's")
def test_sim_runs_a_valid_shape_whose_full_rows_need_more_than_8_gb(tmp_path):
    """n x k = 65536 x 32760 weights are 8.6 GB in fp32 even for SIM_ROWS rows; under a 3 GiB
    address-space limit the run must still finish, verified, on a slice it says it computed."""
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
           "SOL_COCKPIT_CONFIG_DIR": str(tmp_path / "config"), "SOL_COCKPIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", SIM_UNDER_RLIMIT], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("ok True") and "GB of host memory" in proc.stdout
