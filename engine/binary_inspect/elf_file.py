"""A host binary as an ELF file: what it is, what it needs, and the device code it carries.

Read from the file alone (nothing is loaded or run), so a binary for another machine, a stripped
one or one whose libraries are missing can still be inspected; every header is checked against the
file before it is followed (``elf_headers``), so a crafted file cannot make it loop or read past its
end. Bad input (a missing file, a folder, a FIFO or device, a text file, a truncated ELF) is an
InputError naming the path and what was wrong.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from engine.binary_inspect.elf_headers import (
    PT_INTERP,
    PT_LOAD,
    SHF_EXECINSTR,
    SHT_PROGBITS,
    ElfError,
    ElfHeaders,
    parse,
)
from engine.binary_inspect.fatbin import Buffer, CodeImage, FatbinScan, parse_cuobjdump_list, scan
from engine.errors import InputError
from engine.programs import find_program
from engine.text_safety import visible

STATIC_CUDART_MARKS = (b"cudaErrorCudartUnloading", b"libcudart_static_")
"""Text that only a statically linked CUDA runtime puts in a binary (its error-name table, its
symbols): a dynamically linked one calls libcudart for those."""
CUOBJDUMP_TIMEOUT_S = 30.0

_CUDA_LIB = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|cudnn|nvrtc|nvJitLink|cufft|curand|cusparse|"
                       r"cusolver|nccl|nvinfer|cutensor|npp\w*|nvjpeg|torch_cuda|c10_cuda)\b")
"""Libraries whose presence in DT_NEEDED makes a binary without kernels of its own a CUDA program."""


@dataclass
class ElfInfo:
    """The facts one ELF file states about itself."""

    path: Path
    kind: Literal["executable", "shared library", "object"]
    machine: str
    """The ELF machine, e.g. EM_X86_64."""
    needed: list[str] = field(default_factory=list)
    """DT_NEEDED: the libraries it names, in order."""
    runpath: list[str] = field(default_factory=list)
    """DT_RUNPATH or DT_RPATH folders, as written ($ORIGIN unexpanded)."""
    fatbin: FatbinScan | None = None
    """Its device code (None: no fat binary section and none found in the file)."""
    code_source: str = "none"
    """Where the code list came from: 'fatbin headers', 'cuobjdump', or 'none'."""
    static_cudart: bool = False
    """A CUDA runtime is linked into the binary itself."""
    scan_note: str | None = None
    """Set when the container scan stopped at ``MAX_SCAN_BYTES``: what was searched."""

    @property
    def images(self) -> list[CodeImage]:
        return self.fatbin.images if self.fatbin else []

    def cuda_libraries(self) -> list[str]:
        return [n for n in self.needed if _CUDA_LIB.match(n)]


_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "arm64": "EM_AARCH64", "ppc64le": "EM_PPC64"}


def host_machine() -> str | None:
    """This machine's ELF machine name (EM_X86_64 ...), or None when unknown."""
    return _MACHINES.get(os.uname().machine.lower())


MAX_SCAN_BYTES = 2**30
"""Bytes searched for fat binary containers at most: the data sections of the largest CUDA libraries
(cuBLASLt, cuDNN) hold a few hundred MiB; a larger claim is scanned to here, and the report says so."""


def _open_checked(path: Path) -> tuple[int, int]:
    """(file descriptor, size) of ``path`` opened for reading, after the checks that make bad input
    a clear error: ``stat`` before ``open`` (a FIFO or a device is refused without opening it, a file
    that reports no size, such as /proc/self/mem, is refused as empty), opened without blocking."""
    name = visible(path, one_line=True)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"path={name}: no such file",
                         fix="give the path of an executable or shared library (.so)") from None
    except OSError as exc:
        raise InputError(f"path={name}: cannot read it: {exc.strerror or exc}",
                         fix="check the path and its permissions") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"path={name}: is a folder, not a binary",
                         fix="give the path of an executable or shared library inside it")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"path={name}: not a regular file", fix="give the path of an executable or shared library")
    if st.st_size == 0:
        raise InputError(f"path={name}: an empty file (an ELF executable or shared library was expected)",
                         fix="give the compiled program or .so, not a source file, script or archive")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"path={name}: cannot read it: {exc.strerror or exc}",
                         fix="check the file's permissions (it must be readable)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"path={name}: not a regular file", fix="give the path of an executable or shared library")
        head = os.pread(fd, 4, 0)
    except OSError as exc:
        os.close(fd)
        raise InputError(f"path={name}: cannot read it: {exc.strerror or exc}",
                         fix="check the file (a device or a special file cannot be inspected)") from None
    except BaseException:
        os.close(fd)
        raise
    if head != b"\x7fELF":
        os.close(fd)
        what = "an empty file" if not head else ("a script" if head[:2] == b"#!" else "not an ELF file")
        raise InputError(f"path={name}: {what} (an ELF executable or shared library was expected; "
                         f"it starts with {head!r})",
                         fix="give the compiled program or .so, not a source file, script or archive")
    return fd, st.st_size


def _kind(h: ElfHeaders) -> Literal["executable", "shared library", "object"]:
    if h.e_type == "ET_EXEC":
        return "executable"
    if h.e_type == "ET_REL":
        return "object"
    if any(p_type == PT_INTERP for p_type, _, _ in h.segments):
        return "executable"  # a position-independent executable
    return "shared library"


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def scan_ranges(h: ElfHeaders, size: int) -> tuple[list[tuple[int, int]], bool]:
    """Where containers may be, each byte once: the file's data sections (nvcc's ``.nv_fatbin``,
    and the ``.data`` where cuFFT keeps its containers; not code, not debug information), else its
    loaded segments (a file stripped of its section table), else the whole file; at most
    ``MAX_SCAN_BYTES`` of them. The flag says whether that limit cut the ranges."""
    data_sections = [(s.offset, s.offset + s.size) for s in h.sections
                     if s.has_bytes and s.type == SHT_PROGBITS and not s.flags & SHF_EXECINSTR
                     and not s.name.startswith((".debug", ".zdebug"))]
    if h.sections:
        ranges = _merged(data_sections)
    elif any(p_type == PT_LOAD for p_type, _, _ in h.segments):
        ranges = _merged([(off, off + n) for p_type, off, n in h.segments if p_type == PT_LOAD])
    else:
        ranges = [(0, size)]
    out, left = [], MAX_SCAN_BYTES
    for a, b in ranges:
        take = min(b - a, left)
        if take > 0:
            out.append((a, a + take))
        left -= take
    return out, left < 0 or sum(b - a for a, b in ranges) > MAX_SCAN_BYTES


def _scan_fatbins(data: Buffer, ranges: list[tuple[int, int]]) -> FatbinScan | None:
    """The containers in ``ranges`` of the file: nvcc's go in ``.nv_fatbin``, but libraries also keep
    them in data sections (cuFFT's are in ``.data``) and a stripped file may have no section table."""
    images: list[CodeImage] = []
    containers = damaged = 0
    toolkit = None
    for a, b in ranges:
        part = scan(data, a, b, first_container=containers)
        images += part.images
        containers += part.containers
        damaged += part.damaged
        toolkit = toolkit or part.toolkit
    found = FatbinScan(images=images, containers=containers, toolkit=toolkit, damaged=damaged)
    return found if found.containers or found.damaged else None


STATIC_SCAN_BYTES = 256 * 2**20
"""Bytes searched for a static CUDA runtime's marks when the file has no .rodata (they sit in its
read-only data, which comes early)."""


def _static_cudart(h: ElfHeaders, data: mmap.mmap, needed: list[str], ranges: list[tuple[int, int]]) -> bool:
    if any(n.startswith("libcudart.so") for n in needed):
        return False
    rodata = h.section(".rodata")
    if rodata is not None and rodata.has_bytes:
        where = [(rodata.offset, rodata.offset + rodata.size)]
    else:
        where, left = [], STATIC_SCAN_BYTES
        for a, b in ranges:
            if left > 0:
                where.append((a, min(b, a + left)))
                left -= b - a
    return any(data.find(mark, a, b) >= 0 for a, b in where for mark in STATIC_CUDART_MARKS)


def cuobjdump_path() -> str | None:
    found = find_program("cuobjdump")
    if found:
        return found
    local = Path("/usr/local/cuda/bin/cuobjdump")
    return str(local) if local.is_file() else None


def _cuobjdump_images(path: Path) -> list[CodeImage] | None:
    """The code list from cuobjdump, for containers whose headers this reader does not know. The
    file is passed by its absolute path: a name such as ``--version`` is never read as an option."""
    tool = cuobjdump_path()
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, "--list-elf", "--list-ptx", os.path.abspath(path)], capture_output=True,
                             text=True, timeout=CUOBJDUMP_TIMEOUT_S, errors="replace", stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_cuobjdump_list(out.stdout) or None


def read_elf(path: Path) -> ElfInfo:
    """Read ``path``; InputError when it is not a readable ELF file. Every header is checked before it
    is followed (``elf_headers``) and the container scan is linear (``fatbin.scan``)."""
    fd, size = _open_checked(path)
    try:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            h = parse(data)
            ranges, cut = scan_ranges(h, size)
            fat = _scan_fatbins(data, ranges)
            static = _static_cudart(h, data, h.needed, ranges)
    except (ElfError, ValueError, OSError, struct.error) as exc:
        raise InputError(f"path={visible(path, one_line=True)}: a damaged or truncated ELF file "
                         f"({visible(exc, one_line=True)})",
                         fix="rebuild or copy the binary again; check it with `readelf -h`") from None
    finally:
        os.close(fd)
    info = ElfInfo(path=path, kind=_kind(h), machine=h.machine, needed=[visible(n, one_line=True) for n in h.needed],
                   runpath=[visible(p, one_line=True) for p in h.runpath], fatbin=fat, static_cudart=static,
                   scan_note=f"searched the first {MAX_SCAN_BYTES // 2**20} MiB of its data for device code"
                             if cut else None)
    if info.fatbin and info.fatbin.images:
        info.code_source = "fatbin headers"
    elif info.fatbin is not None and info.fatbin.damaged and (listed := _cuobjdump_images(path)):
        info.fatbin = FatbinScan(images=listed, containers=1, toolkit=info.fatbin.toolkit)
        info.code_source = "cuobjdump"
    return info
