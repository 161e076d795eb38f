"""A guard for the GPU suite, which runs in one pytest process: a sticky CUDA error (an illegal
address, an unspecified launch failure, a device-side assert) poisons that process's context, so
every later test would fail with the same error and hide which test caused it.

After each test, where CuPy has already initialised CUDA in this process, the guard synchronizes the
device. If that fails, it stops the session and names the test that left the context broken, the
error, the troubleshooting rule that explains it, and how to run the remaining tests in a fresh
process. Loaded by ``tests/gpu/conftest.py``; ``-p tests.gpu.cuda_guard`` loads it elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def context_error() -> str | None:
    """The error a device synchronize raises in this process, or None: no error, or CUDA never
    initialised here (CuPy not imported; the guard never initialises it itself)."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return None
    try:
        cp.cuda.runtime.deviceSynchronize()
    except Exception as exc:  # CUDARuntimeError, CUDADriverError: the text names the CUDA error
        return f"{type(exc).__name__}: {exc}"
    return None


def stop_message(nodeid: str, error: str) -> str:
    """What the session prints when it stops: the test, the error, the rule that explains it."""
    from engine import troubleshoot

    matches = troubleshoot.match_text(error)
    rule = f"\n  rule: {matches[0].title}: {matches[0].fix}" if matches else ""
    return (f"CUDA context broken after {nodeid}:\n  {error}{rule}\n"
            "  Every later CUDA call in this pytest process would fail the same way, so the session "
            "stops here. Run the remaining GPU tests in a fresh process, e.g. "
            f"python3 -m pytest -m gpu tests/gpu --deselect '{nodeid}'")


@pytest.fixture(autouse=True)
def _cuda_context_guard(request):
    yield
    error = context_error()
    if error is not None:
        pytest.exit(stop_message(request.node.nodeid, error), returncode=1)


def run_guarded(test_file: Path) -> tuple[int, str]:
    """Run ``test_file`` in a fresh pytest process with this guard loaded (the repository on the
    path, no cache): its exit code and output, for the guard's own tests."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "tests.gpu.cuda_guard", str(test_file)],
                          cwd=test_file.parent, env=env, capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout + proc.stderr
