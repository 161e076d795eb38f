"""A host binary as an ELF file: what it is, what it needs, and the device code it carries.

Read with pyelftools from the file alone (nothing is loaded or run), so a binary for another
machine, a stripped one or one whose libraries are missing can still be inspected. Bad input (a
missing file, a folder, a text file, a truncated ELF) is an InputError naming the path and what
was wrong.
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from engine.binary_inspect.fatbin import Buffer, CodeImage, FatbinScan, parse_cuobjdump_list, scan
from engine.errors import InputError

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

    @property
    def images(self) -> list[CodeImage]:
        return self.fatbin.images if self.fatbin else []

    def cuda_libraries(self) -> list[str]:
        return [n for n in self.needed if _CUDA_LIB.match(n)]


_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "arm64": "EM_AARCH64", "ppc64le": "EM_PPC64"}


def host_machine() -> str | None:
    """This machine's ELF machine name (EM_X86_64 ...), or None when unknown."""
    return _MACHINES.get(os.uname().machine.lower())


def _open_checked(path: Path):
    """The file opened for reading, after the checks that make bad input a clear error."""
    name = str(path)
    try:
        st = path.stat()
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
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"path={name}: cannot read it: {exc.strerror or exc}",
                         fix="check the file's permissions (it must be readable)") from None
    head = fh.read(4)
    if head != b"\x7fELF":
        fh.close()
        what = "an empty file" if not head else ("a script" if head[:2] == b"#!" else "not an ELF file")
        raise InputError(f"path={name}: {what} (an ELF executable or shared library was expected; "
                         f"it starts with {head!r})",
                         fix="give the compiled program or .so, not a source file, script or archive")
    fh.seek(0)
    return fh


def _kind(elf) -> Literal["executable", "shared library", "object"]:
    etype = elf["e_type"]
    if etype == "ET_EXEC":
        return "executable"
    if etype == "ET_REL":
        return "object"
    if any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments()):
        return "executable"  # a position-independent executable
    return "shared library"


def _dynamic(elf) -> tuple[list[str], list[str]]:
    needed: list[str] = []
    runpath: list[str] = []
    dyn = elf.get_section_by_name(".dynamic")
    if dyn is None or not hasattr(dyn, "iter_tags"):
        return needed, runpath
    for tag in dyn.iter_tags():
        t = tag.entry.d_tag
        if t == "DT_NEEDED":
            needed.append(tag.needed)
        elif t == "DT_RUNPATH":
            runpath.extend(p for p in tag.runpath.split(":") if p)
        elif t == "DT_RPATH":
            runpath.extend(p for p in tag.rpath.split(":") if p)
    return needed, runpath


def _section_range(elf, name: str) -> tuple[int, int] | None:
    sec = elf.get_section_by_name(name)
    if sec is None or sec["sh_type"] == "SHT_NOBITS":
        return None
    return sec["sh_offset"], sec["sh_size"]


def _scan_fatbins(data: Buffer) -> FatbinScan | None:
    """The containers anywhere in the file: nvcc's go in ``.nv_fatbin``, but libraries also keep
    them in data sections (cuFFT's are in ``.data``) and a stripped file may have no section table."""
    found = scan(data)
    return found if found.containers or found.damaged else None


def _static_cudart(elf, data: mmap.mmap, needed: list[str]) -> bool:
    if any(n.startswith("libcudart.so") for n in needed):
        return False
    start, size = _section_range(elf, ".rodata") or (0, len(data))
    return any(data.find(mark, start, start + size) >= 0 for mark in STATIC_CUDART_MARKS)


def cuobjdump_path() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    local = Path("/usr/local/cuda/bin/cuobjdump")
    return str(local) if local.is_file() else None


def _cuobjdump_images(path: Path) -> list[CodeImage] | None:
    """The code list from cuobjdump, for containers whose headers this reader does not know."""
    tool = cuobjdump_path()
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True,
                             timeout=CUOBJDUMP_TIMEOUT_S, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_cuobjdump_list(out.stdout) or None


def read_elf(path: Path) -> ElfInfo:
    """Read ``path``; InputError when it is not a readable ELF file."""
    from elftools.elf.elffile import ELFFile

    fh = _open_checked(path)
    with fh:
        try:
            elf = ELFFile(fh)
            kind = _kind(elf)
            needed, runpath = _dynamic(elf)
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                fat = _scan_fatbins(data)
                static = _static_cudart(elf, data, needed)
            info = ElfInfo(path=path, kind=kind, machine=elf["e_machine"], needed=needed, runpath=runpath,
                           fatbin=fat, static_cudart=static)
        except Exception as exc:  # pyelftools raises many kinds on a damaged file: all are bad input
            raise InputError(f"path={path}: a damaged or truncated ELF file ({exc})",
                             fix="rebuild or copy the binary again; check it with `readelf -h`") from None
    if info.fatbin and info.fatbin.images:
        info.code_source = "fatbin headers"
    elif info.fatbin is not None and info.fatbin.damaged and (listed := _cuobjdump_images(path)):
        info.fatbin = FatbinScan(images=listed, containers=1, toolkit=info.fatbin.toolkit)
        info.code_source = "cuobjdump"
    return info

