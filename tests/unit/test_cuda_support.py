"""CUDA-backend helpers that need no GPU: ptxas report parsing (kernels.nvrtc_check, which the backend
compiles through), the kernel cache."""

import pytest

from engine.backends.cuda_support import cache_key, cache_load, cache_store
from kernels.nvrtc_check import parse_ptxas_log

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_residual_mma' for 'sm_90a'
ptxas info    : Function properties for gemm_residual_mma
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 241 registers, used 1 barriers
ptxas info    : Compiling entry function 'sol_fault_kernel' for 'sm_90a'
ptxas info    : Function properties for sol_fault_kernel
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""


def test_parse_ptxas_log():
    r = parse_ptxas_log(LOG)
    g = r["gemm_residual_mma"]
    assert (g.stack_frame_bytes, g.spill_store_bytes, g.spill_load_bytes, g.registers) == (0, 0, 0, 241)
    assert r["sol_fault_kernel"].spill_store_bytes == 4 and r["sol_fault_kernel"].registers == 12


def test_cache_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("SOL_COCKPIT_CACHE_DIR", str(tmp_path))
    k = cache_key("src", ["--gpu-architecture=sm_90a"], (13, 0))
    assert k != cache_key("src", ["--gpu-architecture=sm_80"], (13, 0))
    assert cache_load(k) is None
    cache_store(k, b"\x7fELF", "log")
    assert cache_load(k) == (b"\x7fELF", "log")


@pytest.mark.timeout(30)
def test_cache_files_that_are_not_regular_are_a_miss_at_once(tmp_path, monkeypatch):
    """A FIFO planted at a cache name (the folder is the user's) is a miss, not a hang; a link
    planted at the name is not written through."""
    import os
    import time

    monkeypatch.setenv("SOL_COCKPIT_CACHE_DIR", str(tmp_path))
    k = cache_key("src", [], (13, 0))
    d = tmp_path / "kernels"
    d.mkdir()
    os.mkfifo(d / f"{k}.cubin")
    (d / f"{k}.log").write_text("log")
    t = time.monotonic()
    assert cache_load(k) is None and time.monotonic() - t < 1.0
    os.unlink(d / f"{k}.cubin")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (d / f"{k}.cubin.tmp").symlink_to(victim)
    cache_store(k, b"\x7fELF", "log")
    assert victim.read_bytes() == b"keep" and cache_load(k) == (b"\x7fELF", "log")


def test_hold_only_where_the_host_cannot_keep_ahead():
    from engine.backends.cuda_support import HOLD_MAX_NS, hold_ns

    # a 150 us GEMM queued in 10 us per launch keeps the queue ahead on its own: no hold
    assert hold_ns(150e-6, 10e-6, 100) == 0
    # a 15 us kernel the host queues in 10 us (or a probe that read the host's rate): hold twice the
    # host's queueing time of the chunk plus 1 ms
    assert hold_ns(15e-6, 10e-6, 100) == int((2 * 100 * 10e-6 + 1e-3) * 1e9)
    assert hold_ns(None, 20e-6, 5) > 0  # not probed (no warm-up): hold
    assert hold_ns(1e-6, 1.0, 10**6) == HOLD_MAX_NS  # bounded: it can never hang the stream
    assert hold_ns(None, 0.0, 1) == int((2 * 1e-6 + 1e-3) * 1e9)  # a floor on the host time


def test_needs_hold_and_the_chunk_one_hold_covers():
    from engine.backends.cuda_support import HOLD_MAX_NS, held_chunk, hold_ns, needs_hold

    assert not needs_hold(150e-6, 10e-6) and needs_hold(15e-6, 10e-6) and needs_hold(None, 10e-6)
    n = held_chunk(20e-6, 10**6)  # ~5000 launches at 20 us of host time each
    # the hold n launches need fits under the cap; one launch more would not
    assert 4900 < n < 5000 and 2 * n * 20e-6 + 1e-3 <= HOLD_MAX_NS / 1e9 < 2 * (n + 1) * 20e-6 + 1e-3
    assert hold_ns(1e-6, 20e-6, n) <= HOLD_MAX_NS
    assert held_chunk(20e-6, 100) == 100 and held_chunk(10.0, 100) == 1


def test_support_kernels_compile_for_every_profile_arch():
    """The fault and hold kernels go into every module the backend loads (compile_inputs), so they
    must compile for each profile's target, and the hold kernel must really wait on the global timer."""
    import pytest

    pytest.importorskip("cupy")
    from engine.backends.cuda_support import FAULT_SOURCE, HOLD_SOURCE
    from kernels.nvrtc_check import compile_cubin

    for arch in ("sm_80", "sm_89", "sm_90a"):
        rep = compile_cubin(FAULT_SOURCE + HOLD_SOURCE, arch)
        assert rep.ok, rep.log
        r = parse_ptxas_log(rep.log)
        assert {"sol_fault_kernel", "sol_hold_kernel"} <= set(r)
        assert r["sol_hold_kernel"].spill_store_bytes == 0
    assert "%globaltimer" in HOLD_SOURCE and "__nanosleep" in HOLD_SOURCE


def test_input_sets_fill_three_l2s_at_most_sixteen():
    """The rotation rule the engine, its peers and the bench scripts share (one place): the seed
    GEMM's 65 MiB of inputs exceed a 50 MiB L2 (one set); M = 256's 15.0 MiB need 10 sets to fill
    3 x 50 MiB; tiny inputs stop at 16; an empty input never divides by zero."""
    from engine.backends.cuda_support import MAX_INPUT_SETS, input_sets

    mib = 2**20
    l2 = 50 * mib
    assert input_sets(65 * mib, l2) == 1
    assert input_sets(l2, l2) == 1
    assert input_sets(int(15.0 * mib), l2) == 10
    assert input_sets(l2 - 1, l2) == 4  # just under the L2: ceil(3 x L2 / in) = 4
    assert input_sets(1024, l2) == MAX_INPUT_SETS == 16
    assert input_sets(0, l2) == 16
