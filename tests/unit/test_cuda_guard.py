"""The GPU suite's CUDA context guard (tests/gpu/cuda_guard.py), with a fake CuPy: it stays out of a
process where CUDA never started, finds a broken context, names the test and the rule, and stops
the session before the next test runs."""

from __future__ import annotations

import sys
import textwrap
from types import SimpleNamespace

from tests.gpu import cuda_guard

ILLEGAL = "cudaErrorIllegalAddress: an illegal memory access was encountered"


def _fake_cupy(error: str | None):
    def sync():
        if error:
            raise RuntimeError(error)

    return SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(deviceSynchronize=sync)))


def test_context_error_only_where_cupy_started_and_failed(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert cuda_guard.context_error() is None
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(None))
    assert cuda_guard.context_error() is None
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(ILLEGAL))
    assert cuda_guard.context_error() == f"RuntimeError: {ILLEGAL}"


def test_stop_message_names_the_test_the_error_and_the_rule() -> None:
    msg = cuda_guard.stop_message("tests/gpu/test_x.py::test_y[bf16]", f"RuntimeError: {ILLEGAL}")
    assert "after tests/gpu/test_x.py::test_y[bf16]" in msg
    assert ILLEGAL in msg
    assert "Illegal memory access" in msg
    assert "--deselect 'tests/gpu/test_x.py::test_y[bf16]'" in msg


def test_guard_stops_the_session_after_the_test_that_broke_the_context(tmp_path) -> None:
    (tmp_path / "test_seq.py").write_text(textwrap.dedent(f"""
        import sys
        from types import SimpleNamespace

        broken = []

        def sync():
            if broken:
                raise RuntimeError({ILLEGAL!r})

        sys.modules["cupy"] = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(deviceSynchronize=sync)))

        def test_fine():
            pass

        def test_breaks_context():
            broken.append(1)  # as an asynchronous kernel fault would: the test itself passes

        def test_never_runs():
            raise AssertionError("the guard should have stopped the session")
    """))
    rc, out = cuda_guard.run_guarded(tmp_path / "test_seq.py")
    assert rc == 1, out
    assert "CUDA context broken after test_seq.py::test_breaks_context" in out, out
    assert "Illegal memory access" in out, out
    assert "2 passed" in out and "never_runs" not in out, out
