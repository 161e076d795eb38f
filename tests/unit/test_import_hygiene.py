"""The engine is headless: importing it (and its CLI) must not load textual, cupy or pynvml."""

import subprocess
import sys

import pytest

CODE = """
import sys
import engine, engine.task, engine.profiles, engine.sol, engine.runner, engine.store, engine.cli.main
import engine.backends.select, engine.backends.sim, kernels
engine.cli.main.build_parser()
bad = [m for m in ("textual", "cupy", "pynvml") if m in sys.modules]
print(",".join(bad))
"""


def test_engine_import_loads_no_ui_no_cuda():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine import pulled in: {out.stdout.strip()}"


@pytest.mark.parametrize("module", ["engine.backends.cuda"])
def test_only_the_cuda_backend_imports_cupy(module):
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    offenders = []
    for path in list((root / "engine").rglob("*.py")) + list((root / "tui").rglob("*.py")) + list((root / "kernels").rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(root).as_posix()
        if ("import cupy" in text or "from cupy" in text) and rel not in (
            "engine/backends/cuda.py", "engine/backends/tensormap.py", "kernels/nvrtc_check.py"):
            offenders.append(rel)
    assert offenders == []


def test_only_nvml_module_imports_pynvml():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    offenders = [p.relative_to(root).as_posix() for p in list((root / "engine").rglob("*.py")) + list((root / "tui").rglob("*.py"))
                 if "import pynvml" in p.read_text() and p.name != "nvml.py"]
    assert offenders == []
