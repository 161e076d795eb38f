"""Task model and its sources: defaults < TOML file < env < flags, with errors naming the field."""

import pytest

from engine.errors import InputError
from engine.task import DType, TaskSpec, parse_pipelining, resolve_task, save_task


def test_default_task_is_the_seed_case():
    t = TaskSpec()
    assert t.kernel == "gemm_residual"
    assert t.shape == {"m": 8192, "n": 2560, "k": 2560}
    assert t.dtype is DType.bf16 and t.fusion and t.warmup == 10 and t.iterations == 100


def test_precedence(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('dtype = "fp16"\nblock_size = "64x64"\nmemory_pipelining = 2\nwarmup = 3\n')
    env = {"BLOCK_SIZE": "128x128", "MEMORY_PIPELINING": "3"}
    t = resolve_task(f, env, {"memory_pipelining": "off", "warmup": None})
    assert t.dtype is DType.fp16           # file
    assert str(t.block_size) == "128x128"       # env beats file
    assert t.memory_pipelining == 0        # flag beats env
    assert t.warmup == 3                   # unset flag leaves the file's value


def test_seeds_task_table_form(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('[task]\nkernel = "gemm_residual"\n[task.shape]\nbatch = 16\nseq = 512\nhidden = 2560\n')
    t = resolve_task(f, {}, {})
    assert t.shape == {"batch": 16, "seq": 512, "hidden": 2560}


def test_malformed_toml_names_file_and_line(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('kernel = "gemm_residual"\ndtype = bf16\n')
    with pytest.raises(InputError) as e:
        resolve_task(f, {}, {})
    assert str(f) in e.value.message and "line 2" in e.value.message
    assert e.value.exit_code == 2


def test_unknown_field_and_bad_value_are_named(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text('blok_size = "128x128"\n')
    with pytest.raises(InputError, match="blok_size: unknown field"):
        resolve_task(f, {}, {})
    f.write_text('warmup = -1\n')
    with pytest.raises(InputError, match="warmup=-1"):
        resolve_task(f, {}, {})


def test_env_knob_errors_name_the_variable():
    with pytest.raises(InputError, match="environment MEMORY_PIPELINING"):
        resolve_task(None, {"MEMORY_PIPELINING": "fast"}, {})


@pytest.mark.parametrize("value,expected", [("off", 0), (0, 0), ("3", 3), (4, 4)])
def test_pipelining_values(value, expected):
    assert parse_pipelining(value) == expected


@pytest.mark.parametrize("value", [1, -2, "lots", True])
def test_pipelining_rejects(value):
    with pytest.raises(ValueError):
        parse_pipelining(value)


def test_shape_text_forms():
    assert TaskSpec(shape="m=1,n=8,k=16").shape == {"m": 1, "n": 8, "k": 16}
    assert TaskSpec(shape="586,2560,2560").shape == {"_0": 586, "_1": 2560, "_2": 2560}
    with pytest.raises(ValueError):
        TaskSpec(shape="m=0,n=8,k=8")


def test_save_and_load_roundtrip(tmp_path):
    t = TaskSpec(dtype="fp16", block_size="128x128", memory_pipelining=3, fusion=False, shape="m=586,n=2560,k=2560")
    path = tmp_path / "sub" / "task.toml"
    save_task(t, path)
    assert resolve_task(path, {}, {}) == t


@pytest.mark.parametrize("text,needle", [('energy_s = "lots"\n', "energy_s"), ("energy_s = 0.2\n", "at least 0.5 s"),
                                         ("energy_s = 600\n", "energy_s")])
def test_task_file_energy_seconds_malformed_is_named(tmp_path, text, needle):
    f = tmp_path / "t.toml"
    f.write_text(text)
    with pytest.raises(InputError, match=needle) as e:
        resolve_task(f, {}, {})
    assert e.value.exit_code == 2 and f.read_text() == text  # the file is left as it was

def test_format_pipelining_is_the_inverse_of_parse():
    from engine.task import format_pipelining, parse_pipelining

    for stages in (0, 2, 5, 11):
        assert parse_pipelining(format_pipelining(stages)) == stages
    assert format_pipelining(0) == "off" and format_pipelining(3) == "3"


def test_a_kernel_named_without_a_shape_takes_its_own_default_shape(tmp_path):
    """`tui bench --kernel add_rmsnorm` ran at the GEMM's seed shape and failed on its k."""
    assert resolve_task(None, {}, {"kernel": "add_rmsnorm"}).shape == {"m": 32768, "n": 4096}
    assert resolve_task(None, {}, {"kernel": "bias_gelu", "shape": "m=64,n=128"}).shape == {"m": 64, "n": 128}
    assert resolve_task(None, {}, {}).shape == {"m": 8192, "n": 2560, "k": 2560}
    f = tmp_path / "t.toml"
    f.write_text('[task]\nkernel = "add_rmsnorm"\nshape = {m = 7, n = 8}\n')
    assert resolve_task(f, {}, {}).shape == {"m": 7, "n": 8}           # the file's shape wins
    f.write_text('[task]\nkernel = "bias_gelu"\n')
    assert resolve_task(f, {}, {}).shape == {"m": 8192, "n": 10240}
    assert resolve_task(None, {}, {"kernel": "nosuch"}).kernel == "nosuch"   # prepare() names it
    assert TaskSpec(kernel="add_rmsnorm").shape == {"m": 32768, "n": 4096}   # the model itself


def test_a_saved_task_does_not_carry_the_sessions_backend(tmp_path):
    """A task saved in a simulated session would otherwise run simulated on a GPU box."""
    from engine.task import TaskSpec, resolve_task, save_task

    path = tmp_path / "t.toml"
    save_task(TaskSpec(backend="sim", block_size="128x128"), path)
    assert "backend" not in path.read_text()
    assert resolve_task(path, env={}).backend.value == "auto"
