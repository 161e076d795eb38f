"""Pieces of the CUDA backend that need no cupy: NVRTC log parsing, the kernel cache, the fault
kernel source, poison bit patterns. Kept apart so they are unit-testable on any machine."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from engine.paths import cache_dir

FAULT_SOURCE = r"""
// Deliberate faults (task field `fault`), so that the engine's isolation is testable on a GPU.
extern "C" __global__ void sol_fault_kernel(int* flag, int mode) {
    if (mode == 1) {
        asm volatile("trap;");                      // -> unspecified launch failure
    } else if (mode == 2) {
        *(volatile float*)(16ull) = 1.0f;           // -> illegal memory access
    } else if (mode == 3) {
        volatile int* f = flag;                     // flag is zero and nothing sets it: hang
        while (f[0] == 0) { }
    }
}
"""

FAULT_MODES = {"launch_failure": 1, "illegal_address": 2, "hang": 3}

COMPILE_ERROR_LINE = '\n#error "SOL Cockpit injected compile error (task fault=compile_error)"\n'

POISON_BITS = {"bf16": 0x7FA5, "fp16": 0x7E5A, "fp32": 0x7FA5A5A5}
"""NaN patterns with a payload no kernel produces: an element still holding one was never written."""

_FUNC_PROPS = re.compile(
    r"Function properties for (\S+)\s*\n\S*\s*\.?\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
    r"(\d+) bytes spill loads")


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """Per function: registers, stack frame and spill bytes from an NVRTC `-Xptxas=-v` log."""
    out: dict[str, dict[str, int]] = {}
    for m in _FUNC_PROPS.finditer(log):
        out.setdefault(m.group(1), {}).update(
            stack_frame_bytes=int(m.group(2)), spill_store_bytes=int(m.group(3)),
            spill_load_bytes=int(m.group(4)))
    for block in log.split("ptxas info    : Compiling entry function")[1:]:
        name_m = re.match(r" '(\S+)'", block)
        regs_m = re.search(r"Used (\d+) registers", block)
        if name_m and regs_m:
            out.setdefault(name_m.group(1), {})["registers"] = int(regs_m.group(1))
    return out


def cache_key(source: str, options: list[str], nvrtc_version: tuple[int, int]) -> str:
    h = hashlib.sha256()
    h.update(source.encode())
    h.update("\0".join(options).encode())
    h.update(repr(nvrtc_version).encode())
    return h.hexdigest()[:32]


def kernel_cache_dir() -> Path:
    return cache_dir() / "kernels"


def cache_load(key: str) -> tuple[bytes, str] | None:
    d = kernel_cache_dir()
    cubin, log = d / f"{key}.cubin", d / f"{key}.log"
    try:
        return cubin.read_bytes(), log.read_text(encoding="utf-8")
    except OSError:
        return None


def cache_store(key: str, cubin: bytes, log: str) -> None:
    """Best effort: an unwritable cache only costs a recompile next time."""
    d = kernel_cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"{key}.cubin.tmp"
        tmp.write_bytes(cubin)
        (d / f"{key}.log").write_text(log, encoding="utf-8")
        tmp.replace(d / f"{key}.cubin")
    except OSError:
        pass
