"""The CUDA code embedded in a host binary: NVIDIA fat binaries, read from their headers alone.

nvcc puts each translation unit's device code in a fat binary container in the ``.nv_fatbin``
section (``__nv_relfatbin`` in relocatable objects). A container is a 16-byte header and then
entries, each a header followed by its payload (a cubin of SASS, or PTX text, often
zstd-compressed). Only the headers are read, so no decompressor and no CUDA toolkit is needed:

  container header (16 bytes, little-endian)
    u32 magic 0xBA55ED50 (0x466243B1 for relocatable device code), u16 version (1),
    u16 header size (16), u64 size of the entries that follow
  entry header (64 bytes, longer for newer architectures: the u32 at 4 says how long)
    u16 kind (1 PTX, 2 cubin), u16, u32 header size, u64 payload size (padded),
    u32 compressed size, u32, u16 code version minor, u16 major (the PTX ISA for PTX),
    u32 architecture (80 = sm_80 / compute_80), ... u32 flags at 0x28

The flags say which variant the code is for: 0x100000 an arch-specific target (sm_90a: that
compute capability only), 0x200000 a family-specific one (sm_100f); 0x8000 a compressed payload.
``cuobjdump --list-elf --list-ptx`` reports the same list where the toolkit is installed.
"""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from typing import Literal

Buffer = bytes | bytearray | mmap.mmap
"""Bytes to read headers from: a section read into memory, or a whole file mapped."""

FATBIN_MAGIC = 0xBA55ED50
"""A container of an executable or shared library."""
RELOC_FATBIN_MAGIC = 0x466243B1
"""A container of relocatable device code (``-rdc=true`` objects and static libraries)."""
MAGICS = (FATBIN_MAGIC, RELOC_FATBIN_MAGIC)

KIND_PTX, KIND_CUBIN, KIND_CUBIN_ALT = 1, 2, 0x10
FLAG_COMPRESSED = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000

_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHI")
ENTRY_MIN = 64
MAX_ENTRIES = 1_000_000
"""Entries read from one file at most (cuBLAS holds a few thousand): a corrupt size cannot loop."""
STEP_BUDGET_PER_BYTE = 4 / ENTRY_MIN
"""Entry headers read per byte scanned at most, over all the candidate containers: a real file reads
each entry once (one per ``ENTRY_MIN`` bytes at most), so four times that is room to spare, while a
crafted file whose thousands of magics each claim a long chain of entries that fails at its last
step (a 4 MB one took over 300 s) stops here: the scan is linear in the bytes."""
STEP_BUDGET_MIN = 100_000

TOOLKIT_RE = re.compile(rb"Cuda compilation tools, release (\d{1,2})\.(\d{1,2})")


@dataclass(frozen=True)
class CodeImage:
    """One piece of device code: SASS for one architecture, or PTX for one virtual one."""

    kind: Literal["sass", "ptx"]
    arch: int
    """The architecture as nvcc numbers it: 80 for sm_80 / compute_80, 100 for sm_100."""
    variant: Literal["", "a", "f"] = ""
    """'a': arch-specific (runs on exactly this compute capability), 'f': family-specific."""
    container: int = 0
    """Which fat binary container (one per translation unit, roughly) holds it."""
    ptx_isa: tuple[int, int] | None = None
    """The PTX ISA version of PTX code (8.7, 9.0, ...), from its entry header."""
    compressed: bool = False

    @property
    def cc(self) -> tuple[int, int]:
        return self.arch // 10, self.arch % 10

    @property
    def name(self) -> str:
        return f"{'sm' if self.kind == 'sass' else 'compute'}_{self.arch}{self.variant}"


@dataclass(frozen=True)
class FatbinScan:
    """What the headers of the containers in some bytes say."""

    images: list[CodeImage]
    containers: int
    toolkit: tuple[int, int] | None = None
    """The CUDA release that built uncompressed cubins ('Cuda compilation tools, release X.Y')."""
    damaged: int = 0
    """Containers whose sizes point past the data (truncated or not a fat binary after all)."""


def _variant(flags: int) -> Literal["", "a", "f"]:
    if flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & FLAG_FAMILY_SPECIFIC:
        return "f"
    return ""


class _Budget:
    """Entry headers the scan may still read."""

    def __init__(self, steps: int) -> None:
        self.left = steps


def _entries(data: Buffer, start: int, end: int, container: int, budget: _Budget) -> list[CodeImage] | None:
    """The entries of the container whose entries span exactly ``data[start:end]``; None when
    they do not (a size pointing outside it: not a container, or a damaged one) or when the
    ``budget`` of entry headers runs out."""
    out: list[CodeImage] = []
    pos = start
    while pos + ENTRY_MIN <= end:
        budget.left -= 1
        if budget.left < 0:
            return None
        kind, _, hsize, psize, _, _, vminor, vmajor, arch = _ENTRY.unpack_from(data, pos)
        if hsize < ENTRY_MIN or pos + hsize + psize > end:
            return None
        (flags,) = struct.unpack_from("<I", data, pos + 0x28)
        if kind in (KIND_PTX, KIND_CUBIN, KIND_CUBIN_ALT) and 10 <= arch <= 1000:
            ptx = kind == KIND_PTX
            out.append(CodeImage(kind="ptx" if ptx else "sass", arch=arch, variant=_variant(flags),
                                 container=container, ptx_isa=(vmajor, vminor) if ptx else None,
                                 compressed=bool(flags & FLAG_COMPRESSED)))
        pos += hsize + psize
    return out if pos == end else None


_MAGIC_BYTES = tuple(struct.pack("<I", m) for m in MAGICS)
_MAGIC_RES = {m: re.compile(re.escape(m)) for m in _MAGIC_BYTES}
"""Each magic as a literal pattern: the regex engine's literal search reads a long stretch without
a hit about twice as fast as ``bytes.find`` does for a 4-byte needle."""


def _next_magic(data: Buffer, pos: int, n: int, ahead: dict[bytes, int]) -> int:
    """The next offset >= ``pos`` where a container magic occurs, or -1. ``ahead`` keeps each
    magic's next hit (-1: none before ``n``), so each stretch of the data is searched once."""
    best = -1
    for magic in _MAGIC_BYTES:
        hit = ahead.get(magic)
        if hit is None or 0 <= hit < pos:
            m = _MAGIC_RES[magic].search(data, pos, n)
            hit = ahead[magic] = m.start() if m else -1
        if hit >= 0 and (best < 0 or hit < best):
            best = hit
    return best


def scan(data: Buffer, start: int = 0, end: int | None = None, first_container: int = 0) -> FatbinScan:
    """Every container found in ``data[start:end]`` (a ``.nv_fatbin`` section, a data section
    that embeds them, or a whole file): where a magic occurs and the header's version and sizes,
    and its entries' sizes, add up. ``data`` may be a memory map: it is read in place. Linear in
    the bytes: each stretch is searched for magics once, and the entry headers read over all the
    candidates are bounded (``STEP_BUDGET_PER_BYTE``); what the budget cuts counts as damaged."""
    images: list[CodeImage] = []
    containers = damaged = 0
    toolkit: tuple[int, int] | None = None
    n = len(data) if end is None else min(end, len(data))
    budget = _Budget(STEP_BUDGET_MIN + int(max(0, n - start) * STEP_BUDGET_PER_BYTE))
    ahead: dict[bytes, int] = {}
    pos = _next_magic(data, start, n, ahead)
    while 0 <= pos and pos + _HEADER.size <= n and len(images) < MAX_ENTRIES and budget.left > 0:
        _, version, hsize, size = _HEADER.unpack_from(data, pos)
        stop = pos + hsize + size
        found = None
        if version == 1 and hsize >= _HEADER.size and stop <= n:
            found = _entries(data, pos + hsize, stop, first_container + containers, budget)
        if found is None:
            damaged += 1
            pos = _next_magic(data, pos + 1, n, ahead)
            continue
        images.extend(found)
        containers += 1
        if toolkit is None and (m := TOOLKIT_RE.search(data, pos, stop)):  # in a cubin: inside a container
            toolkit = int(m.group(1)), int(m.group(2))
        pos = _next_magic(data, max(stop, pos + 1), n, ahead)
    return FatbinScan(images=images, containers=containers, toolkit=toolkit, damaged=damaged)


_CUOBJDUMP_LINE = re.compile(r"^(ELF|PTX) file\s+\d+:\s*\S*?\bsm_(\d{2,3})([af]?)\.(?:cubin|ptx)\s*$",
                             re.MULTILINE)


def parse_cuobjdump_list(text: str) -> list[CodeImage]:
    """The images in ``cuobjdump --list-elf --list-ptx`` output: 'ELF file 1: app.1.sm_80.cubin',
    'PTX file 2: app.2.sm_90a.ptx'. cuobjdump names neither containers nor PTX ISA versions."""
    out = []
    for m in _CUOBJDUMP_LINE.finditer(text):
        variant = m.group(3)
        out.append(CodeImage(kind="sass" if m.group(1) == "ELF" else "ptx", arch=int(m.group(2)),
                             variant=variant if variant in ("a", "f") else ""))  # type: ignore[arg-type]
    return out
