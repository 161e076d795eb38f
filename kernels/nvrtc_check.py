"""Compile a kernel build through NVRTC to a cubin and read ptxas' resource report: no GPU needed.

CuPy's NVRTC bindings compile for any architecture on a CPU-only machine, so CI can check that every
knob combination compiles and that no function spills registers. CuPy is imported inside the
functions only, so importing this module never pulls it in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_FUNC_RE = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_SPILL_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


@dataclass
class FunctionReport:
    """ptxas' figures for one entry function."""

    name: str
    registers: int = 0
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    static_smem_bytes: int = 0


@dataclass
class CompileReport:
    """The outcome of one NVRTC compile: success, the log, and per-function resources."""

    ok: bool
    arch: str
    log: str
    functions: dict[str, FunctionReport] = field(default_factory=dict)
    cubin: bytes = field(default=b"", repr=False)
    """The compiled image (empty on failure): loadable with cupy.RawModule(path=...) or cuModuleLoadData."""

    @property
    def cubin_bytes(self) -> int:
        return len(self.cubin)

    @property
    def spills(self) -> bool:
        return any(f.spill_store_bytes or f.spill_load_bytes for f in self.functions.values())


def parse_ptxas_log(log: str) -> dict[str, FunctionReport]:
    """Per-function registers, stack frame, spills and static shared memory from an -Xptxas=-v log."""
    reports: dict[str, FunctionReport] = {}
    current: FunctionReport | None = None
    for line in log.splitlines():
        m = _FUNC_RE.search(line)
        if m:
            current = reports.setdefault(m.group(1), FunctionReport(m.group(1)))
            continue
        if current is None:
            continue
        m = _SPILL_RE.search(line)
        if m:
            current.stack_frame_bytes, current.spill_store_bytes, current.spill_load_bytes = map(
                int, m.groups())
        m = _REGS_RE.search(line)
        if m:
            current.registers = int(m.group(1))
            s = _SMEM_RE.search(line)
            current.static_smem_bytes = int(s.group(1)) if s else 0
    return reports


def complete_elf(cubin: bytes) -> bytes:
    """The cubin padded to the end of its ELF program- and section-header tables. CuPy's getCUBIN
    drops the last byte (it treats the image as a C string), and NVRTC's image may end before its
    section table's declared end; cuobjdump wants the whole extent. Non-ELF data is returned as is."""
    if cubin[:4] != b"\x7fELF":
        return cubin

    def u(off: int, n: int) -> int:
        return int.from_bytes(cubin[off:off + n], "little")

    end = max(u(0x20, 8) + u(0x36, 2) * u(0x38, 2), u(0x28, 8) + u(0x3A, 2) * u(0x3C, 2))
    return cubin + b"\0" * max(0, end - len(cubin))


def compile_cubin(source: str, arch: str, options: tuple[str, ...] = (), name: str = "kernel.cu",
                  verbose: bool = True, headers: Mapping[str, str] | None = None) -> CompileReport:
    """Compile ``source`` for ``arch`` (e.g. 'sm_90a') with NVRTC; never raises on a compile error.
    ``headers``: files NVRTC finds by name (an ``#include "name"``) without reading the disk, e.g. a
    generated one; ``--include-path=`` options find the rest."""
    from cupy_backends.cuda.libs import nvrtc

    opts = [f"--gpu-architecture={arch}", *options]
    if verbose and "-Xptxas=-v" not in opts:
        opts.append("-Xptxas=-v")
    headers = headers or {}
    prog = nvrtc.createProgram(source, name, [h.encode() for h in headers.values()], [n.encode() for n in headers])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
            ok = True
        except nvrtc.NVRTCError:
            ok = False
        log = nvrtc.getProgramLog(prog)
        cubin = complete_elf(nvrtc.getCUBIN(prog)) if ok else b""
    finally:
        nvrtc.destroyProgram(prog)
    return CompileReport(ok=ok, arch=arch, log=log, functions=parse_ptxas_log(log), cubin=cubin)
