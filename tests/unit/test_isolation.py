"""Run inside an untrusted checkout, the cockpit runs none of its code: a ``json.py`` and a
``multiprocessing/`` package in the current directory are imported by no process we start (the
engine process, multiprocessing's resource tracker, the CuPy probe)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HOSTILE = """import os
with open(os.path.join({dir!r}, "IMPORTED-" + {name!r} + "-" + str(os.getpid())), "w") as f:
    f.write("imported from the current directory")
"""


@pytest.fixture
def hostile_cwd(tmp_path: Path) -> Path:
    """A folder whose ``json`` and ``multiprocessing`` leave a marker file when imported."""
    d = tmp_path / "checkout"
    (d / "multiprocessing").mkdir(parents=True)
    (d / "json.py").write_text(HOSTILE.format(dir=str(d), name="json"))
    (d / "multiprocessing" / "__init__.py").write_text(HOSTILE.format(dir=str(d), name="multiprocessing"))
    return d


def _markers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("IMPORTED-"))


def _tui(tmp_path: Path) -> list[str]:
    """The `tui` console script, or a stand-in like it: a script outside the current directory,
    so that the CLI itself starts with a safe sys.path (as an installed command does)."""
    script = Path(sys.executable).with_name("tui")
    if script.exists():
        return [str(script)]
    stand_in = tmp_path / "bin" / "tui"
    stand_in.parent.mkdir(exist_ok=True)
    stand_in.write_text(f"import sys\nsys.path.insert(1, {str(ROOT)!r})\nfrom tui.main import main\nsys.exit(main())\n")
    return [sys.executable, str(stand_in)]


def test_the_hostile_folder_is_imported_by_a_naive_child(hostile_cwd):
    """The fixture works: a plain `python -c 'import json'` there leaves a marker."""
    subprocess.run([sys.executable, "-c", "import json"], cwd=hostile_cwd, check=False, timeout=60)
    assert any(m.startswith("IMPORTED-json-") for m in _markers(hostile_cwd))


def test_check_report_and_bench_import_nothing_from_the_current_directory(hostile_cwd, tmp_path):
    tui = _tui(tmp_path)
    env = {**os.environ, "SOL_SIM_DELAY": "0"}
    env.pop("PYTHONSAFEPATH", None)
    commands = {"check": ["check"], "report": ["report", "--format", "json"],
                "bench": ["bench", "--backend", "sim", "--json"]}
    procs = {name: subprocess.Popen([*tui, *argv], cwd=hostile_cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for name, argv in commands.items()}
    done = {name: (p.communicate(timeout=120), p.returncode) for name, p in procs.items()}
    assert _markers(hostile_cwd) == [], {n: err[-500:] for n, ((_, err), _) in done.items()}
    assert done["bench"][1] == 0 and '"status": "ok"' in done["bench"][0][0], done["bench"][0][1][-500:]
    assert done["report"][1] == 0, done["report"][0][1][-500:]
    assert done["check"][1] in (0, 1), done["check"][0][1][-500:]  # 1: checks failed (no GPU here)


def test_the_cuda_probe_imports_nothing_from_the_current_directory(hostile_cwd, monkeypatch):
    from engine.checks.cuda_probe import probe

    monkeypatch.chdir(hostile_cwd)
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    out = probe("sm_90", run_on_gpu=False, timeout_s=60)
    assert _markers(hostile_cwd) == [], out
    assert "error" not in out, out  # it ran and reported (CuPy missing or not)


def test_the_checks_run_no_program_of_the_current_directory(hostile_cwd, monkeypatch):
    """A PATH with a relative entry ('.' or an empty one) does not make `tui check` run the
    current directory's `dmesg` or `nvcc`."""
    from engine.checks.context import run_command, safe_which

    for prog in ("dmesg", "nvcc"):
        script = hostile_cwd / prog
        script.write_text(f"#!/bin/sh\ntouch '{hostile_cwd}/IMPORTED-{prog}-ran'\n")
        script.chmod(0o755)
    monkeypatch.chdir(hostile_cwd)
    monkeypatch.setenv("PATH", os.pathsep.join([".", "", os.environ.get("PATH", os.defpath)]))
    run_command(["dmesg"], 10)
    assert safe_which("nvcc") != "./nvcc" and safe_which("nvcc") != "nvcc"
    assert _markers(hostile_cwd) == []
