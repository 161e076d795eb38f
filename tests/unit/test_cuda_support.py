"""CUDA-backend helpers that need no GPU: ptxas report parsing (kernels.nvrtc_check, which the backend
compiles through), the kernel cache."""

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
