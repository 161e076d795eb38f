"""Names too long for a file system and FIFOs where files are expected: a clear exit 2 naming the field,
or the FIFO skipped with a warning; never a traceback, never a hang. Commands that could hang run in a
child process under a timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_fuzz_inputs import run_main

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kernels"
LONG = "a" * 300


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    cfg = tmp_path / "config"
    (cfg / "kernels").mkdir(parents=True)
    (cfg / "profiles").mkdir()
    monkeypatch.setenv("SOL_COCKPIT_CONFIG_DIR", str(cfg))
    monkeypatch.chdir(tmp_path)
    return cfg


def _refused(argv: list[str], *words: str) -> str:
    code, _, err = run_main(argv)
    assert code == 2 and err.startswith("error:") and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


def test_a_kernel_name_longer_than_a_file_name_is_exit_2(config, tmp_path):
    _refused(["bench", "--backend", "sim", "--no-store", "--kernel", LONG], "kernel")
    _refused(["bench", "--backend", "sim", "--no-store", "--kernel-file", f"{LONG}.toml"], "kernel_file",
             "File name too long")
    task = tmp_path / "task.toml"
    task.write_text(f'kernel = "{LONG}"\n')
    _refused(["bench", "--backend", "sim", "--no-store", "--task", str(task)], "kernel=")
    task.write_text(f'kernel_file = "{LONG}.toml"\n')
    _refused(["bench", "--backend", "sim", "--no-store", "--task", str(task)], str(task), "kernel_file")


def test_a_user_kernel_with_a_long_name_runs(config, tmp_path):
    shutil.copy(EXAMPLES / "saxpy.cu", tmp_path / "saxpy.cu")
    text = (EXAMPLES / "saxpy.toml").read_text().replace('name = "saxpy"', f'name = "{LONG}"')
    (tmp_path / "long.toml").write_text(text)
    code, _, err = run_main(["bench", "--backend", "sim", "--kernel-file", str(tmp_path / "long.toml"),
                             "--iterations", "2", "--warmup", "0", "--no-peers", "--store", str(tmp_path / "s.db")])
    assert code == 0, err


@pytest.mark.parametrize("text, field", [
    ("[shape]\nm = " + "9" * 5000 + "\nn = 1\nk = 1\n", "shape.m"),
    ("shape = {m = 1, n = " + "9" * 5000 + ", k = 1}\n", "shape.n"),
    ("[task]\nwarmup = -" + "9" * 5000 + "\n", "task.warmup"),
    ('kernel_file = "/dev/zero"\n', "kernel_file"),
    ('kernel_file = "missing.toml"\n', "kernel_file"),
    ('kernel_file = "fifo.toml"\n', "kernel_file"),
])
def test_refused_task_files_name_the_field(config, tmp_path, text, field):
    os.mkfifo(tmp_path / "fifo.toml")
    task = tmp_path / "task.toml"
    task.write_text(text)
    _refused(["bench", "--backend", "sim", "--no-store", "--task", str(task)], str(task), field)


def _tui(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from tui.main import main; sys.exit(main())", *argv],
                          capture_output=True, text=True, timeout=60, env=env)


def test_a_fifo_named_toml_in_the_config_folders_hangs_nothing(config, tmp_path):
    os.mkfifo(config / "profiles" / "evil.toml")
    os.mkfifo(config / "kernels" / "evil.toml")
    env = {**os.environ, "SOL_COCKPIT_CONFIG_DIR": str(config), "SOL_COCKPIT_DATA_DIR": str(tmp_path / "data"),
           "SOL_SIM_DELAY": "0", "PYTHONPATH": str(ROOT)}  # this checkout, wherever the package is installed from
    profiles = _tui("profiles", env=env)
    assert profiles.returncode == 0 and "evil.toml: a FIFO" in profiles.stdout + profiles.stderr
    kernels = _tui("kernels", env=env)
    assert kernels.returncode == 0, kernels.stderr
    bench = _tui("bench", "--backend", "sim", "--iterations", "2", "--warmup", "0", "--no-peers", "--no-store",
                 env=env)
    assert bench.returncode == 0, bench.stderr
    named = _tui("bench", "--backend", "sim", "--no-store", "--kernel", "evil", env=env)
    assert named.returncode == 2 and "Traceback" not in named.stderr
