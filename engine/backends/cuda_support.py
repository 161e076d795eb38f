"""Pieces of the CUDA backend that need no cupy: the kernel cache, the fault kernel source, poison
bit patterns. Kept apart so they are unit-testable on any machine."""

from __future__ import annotations

import hashlib
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

HOLD_SOURCE = r"""
// One thread that idles for `ns` nanoseconds of the GPU's global timer: launched ahead of a chunk
// of timed launches, it keeps the stream busy while the host queues them, so that they then run back
// to back and each event pair times the GPU's work, not the host's launch rate (nvbench's
// "blocking kernel", bounded by time instead of a host flag, so it cannot hang).
extern "C" __global__ void sol_hold_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(2000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""

HOLD_MAX_NS = 200_000_000
"""The longest hold (200 ms): a chunk whose launches take the host longer to queue runs partly
unheld, and the run says so (``validity["queue_hold"]``)."""


HOLD_MARGIN_S = 1e-3
"""Hold time beyond twice the host's queueing time (1 ms: one scheduler hiccup of the host while it
queues; the GPU idles through it either way, only the run's wall time grows)."""


def needs_hold(gpu_s_per_launch: float | None, host_s_per_launch: float) -> bool:
    """Whether timed launches must go behind the hold kernel. None for the GPU time means not probed
    (no warm-up): hold. A launch that keeps the GPU busier than the host takes to queue the next
    (GPU time >= 2x the host's) needs none: the queue stays ahead on its own, and a hold would only
    add idle time between chunks."""
    return gpu_s_per_launch is None or gpu_s_per_launch < 2.0 * host_s_per_launch


def hold_ns(gpu_s_per_launch: float | None, host_s_per_launch: float, launches: int) -> int:
    """How long to hold the GPU before ``launches`` timed launches (0: no hold, ``needs_hold``):
    twice the host's queueing time plus ``HOLD_MARGIN_S``, at most ``HOLD_MAX_NS``."""
    if not needs_hold(gpu_s_per_launch, host_s_per_launch):
        return 0
    return int(min(HOLD_MAX_NS, (2.0 * launches * max(host_s_per_launch, 1e-6) + HOLD_MARGIN_S) * 1e9))


def held_chunk(host_s_per_launch: float, iters: int) -> int:
    """The most launches one hold covers (``hold_ns`` below ``HOLD_MAX_NS``), at most ``iters``."""
    fit = (HOLD_MAX_NS / 1e9 - HOLD_MARGIN_S) / (2.0 * max(host_s_per_launch, 1e-6))
    return max(1, min(iters, int(fit)))


MAX_INPUT_SETS = 16


def input_sets(in_bytes: int, l2_bytes: int) -> int:
    """How many input sets a run rotates over: one where the inputs are at least the L2, else as
    many as fill 3x the L2 (at most ``MAX_INPUT_SETS``), so each launch reads its inputs from DRAM
    as in a real model, not from the previous launch's cache lines. Ours, the peers and the bench
    scripts' torch peers all rotate by this rule."""
    if in_bytes >= l2_bytes:
        return 1
    return min(MAX_INPUT_SETS, -(-3 * l2_bytes // max(in_bytes, 1)))


COMPILE_ERROR_LINE = '\n#error "SOL Cockpit injected compile error (task fault=compile_error)"\n'

POISON_BITS = {"bf16": 0x7FA5, "fp16": 0x7E5A, "fp32": 0x7FA5A5A5, "tf32": 0x7FA5A5A5}
"""NaN patterns with a payload no kernel produces: an element still holding one was never written."""

NAN_BITS = {"bf16": 0x7FC0, "fp16": 0x7E00, "fp32": 0x7FC00000, "tf32": 0x7FC00000}
"""Canonical quiet NaNs, written by the `nan` fault."""

def cache_key(source: str, options: list[str], nvrtc_version: tuple[int, int]) -> str:
    h = hashlib.sha256()
    h.update(source.encode())
    h.update("\0".join(options).encode())
    h.update(repr(nvrtc_version).encode())
    return h.hexdigest()[:32]


def kernel_cache_dir() -> Path:
    return cache_dir() / "kernels"


CACHE_CUBIN_MAX_BYTES = 64 * 2**20
"""The largest cubin read from the cache (ours are well under 1 MiB); a larger file is a miss."""
CACHE_LOG_MAX_BYTES = 4 * 2**20
"""The largest compile log read from the cache."""


def cache_load(key: str) -> tuple[bytes, str] | None:
    """The cached cubin and compile log for ``key``, or None (a miss). The cache folder is the
    user's (``SOL_COCKPIT_CACHE_DIR``), so its files are read as ``safe_files`` reads any file: a
    FIFO, a device or an oversized file there is a miss, never a hang."""
    from engine.errors import InputError
    from engine.safe_files import read_bytes, read_text

    d = kernel_cache_dir()
    try:
        return (read_bytes(d / f"{key}.cubin", "cached kernel", CACHE_CUBIN_MAX_BYTES),
                read_text(d / f"{key}.log", "cached compile log", CACHE_LOG_MAX_BYTES))
    except InputError:
        return None


def cache_store(key: str, cubin: bytes, log: str) -> None:
    """Best effort: an unwritable cache only costs a recompile next time. Written atomically and
    never through a link planted at the name (``safe_files.write_atomic``); the cubin last, so a
    cubin is never read without its log."""
    from engine.errors import InputError
    from engine.safe_files import write_atomic

    d = kernel_cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        write_atomic(d / f"{key}.log", log)
        write_atomic(d / f"{key}.cubin", cubin)
    except (OSError, InputError):
        pass
