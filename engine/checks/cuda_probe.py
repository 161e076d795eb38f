"""The CuPy/NVRTC probe, run in a short subprocess so the calling process never creates a CUDA
context (and a broken CUDA stack cannot crash the cockpit): versions, one NVRTC compile for the
given architecture and, when asked (a GPU answers NVML), one launch whose output is verified.

The probe runs with a safe import path (``PYTHONSAFEPATH``, and its first line drops the current
directory from sys.path for an interpreter older than 3.11): `tui check` run inside an untrusted
checkout must not import that checkout's ``json.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

PROBE_SOURCE = r'''
import sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
import json
arch, run = sys.argv[1], sys.argv[2] == "1"
out = {"arch": arch}
try:
    import cupy
    from cupy.cuda import nvrtc, runtime
except Exception as exc:
    out["import_error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out)); sys.exit(0)
out["cupy_version"] = cupy.__version__
try:
    v = runtime.runtimeGetVersion()
    out["runtime_version"] = f"{v // 1000}.{(v % 1000) // 10}"
except Exception as exc:
    out["runtime_error"] = f"{type(exc).__name__}: {exc}"
try:
    out["nvrtc_version"] = "%d.%d" % nvrtc.getVersion()
except Exception as exc:
    out["nvrtc_error"] = f"{type(exc).__name__}: {exc}"
SRC = r"""extern "C" __global__ void sol_probe(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}"""
try:
    prog = nvrtc.createProgram(SRC, "sol_probe.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=" + arch])
    except Exception as exc:
        log = ""
        try:
            log = nvrtc.getProgramLog(prog)
        except Exception:
            pass
        raise RuntimeError(f"{exc}\n{log}".strip()) from None
    out["cubin_bytes"] = len(nvrtc.getCUBIN(prog))
    out["compiled"] = True
except Exception as exc:
    out["compiled"] = False
    out["compile_error"] = f"{type(exc).__name__}: {exc}"
if run and out.get("compiled"):
    try:
        import numpy
        x = cupy.arange(1024, dtype=cupy.float32)
        y = cupy.zeros_like(x)
        k = cupy.RawKernel(SRC, "sol_probe")
        k((4,), (256,), (x, y, cupy.int32(1024)))
        ok = bool(numpy.allclose(cupy.asnumpy(y), 2 * numpy.arange(1024, dtype=numpy.float32) + 1))
        out["ran"], out["verified"] = True, ok
    except Exception as exc:
        out["ran"], out["verified"] = False, False
        out["run_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
'''


def probe(arch: str, run_on_gpu: bool, python: str = sys.executable, timeout_s: float = 120.0) -> dict[str, Any]:
    """Facts from the probe subprocess; ``error`` says why when it could not report at all."""
    try:
        cp = subprocess.run([python, "-c", PROBE_SOURCE, arch, "1" if run_on_gpu else "0"],
                            capture_output=True, text=True, timeout=timeout_s, check=False,
                            env={**os.environ, "PYTHONSAFEPATH": "1"})
    except subprocess.TimeoutExpired:
        return {"arch": arch, "error": f"the CuPy probe did not finish within {timeout_s:g} s"}
    except OSError as exc:
        return {"arch": arch, "error": f"could not start {python}: {exc}"}
    lines = [ln for ln in cp.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (cp.stderr or cp.stdout).strip().splitlines()[-3:]
        return {"arch": arch, "error": f"the CuPy probe exited with {cp.returncode}: " + " | ".join(tail)}
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"arch": arch, "error": "the CuPy probe printed something that is not JSON"}
