"""The CUDA context guard against a real fault: a kernel that writes to an illegal address passes
its own test (the launch is asynchronous), and the guard stops the session right after it, naming
it and the illegal-address rule, before the next test runs into the broken context."""

from __future__ import annotations

import textwrap

import pytest

from tests.gpu.cuda_guard import run_guarded

pytestmark = pytest.mark.gpu


def test_guard_names_the_test_whose_kernel_faulted(tmp_path) -> None:
    (tmp_path / "test_fault.py").write_text(textwrap.dedent("""
        import cupy as cp
        import numpy as np

        def test_fine():
            assert int(cp.arange(4).sum()) == 6

        def test_faulting_kernel():
            k = cp.RawKernel(r'extern "C" __global__ void f(int* p) { p[threadIdx.x] = 1; }', "f")
            k((1,), (32,), (np.uint64(16),))  # address 16: an illegal address, found at the next sync

        def test_after_fault():
            assert int(cp.arange(4).sum()) == 6
    """))
    rc, out = run_guarded(tmp_path / "test_fault.py")
    assert rc == 1, out
    assert "CUDA context broken after test_fault.py::test_faulting_kernel" in out, out
    assert "Illegal memory access" in out, out
    assert "2 passed" in out and "after_fault" not in out, out
