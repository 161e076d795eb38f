"""The headers of an ELF file, read with bounds: what ``tui inspect`` needs and nothing more.

A binary given to ``tui inspect`` may be crafted. Every count, size and offset in it is checked
against the file before it is followed: entry sizes must be the ELF class's, tables must lie inside
the file, counts are capped (``MAX_SECTIONS``, ``MAX_SEGMENTS``, ``MAX_DYNAMIC``), a name is read to
its NUL or ``MAX_NAME`` bytes. So the work is linear in the (capped) table sizes: no header can make
the reader loop, seek past the end or read a string across a megabyte (a crafted 1 MB file held a
general-purpose ELF library for over a minute). Problems are ``ElfError`` with what was wrong.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field

Buffer = bytes | bytearray | mmap.mmap

MAX_SECTIONS = 200_000
"""Sections read at most (relocatable objects built with -ffunction-sections have tens of thousands)."""
MAX_SEGMENTS = 4096
MAX_DYNAMIC = 65_536
"""Entries of .dynamic read at most (a program has a few dozen)."""
MAX_NEEDED = 4096
MAX_NAME = 4096
"""Bytes of one section name or library name read at most."""

ET_NAMES = {1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
PT_INTERP, PT_LOAD = 3, 1
SHT_PROGBITS, SHT_NOBITS, SHT_DYNAMIC = 1, 8, 6
SHF_EXECINSTR = 0x4
DT_NULL, DT_NEEDED, DT_RPATH, DT_RUNPATH = 0, 1, 15, 29


class ElfError(ValueError):
    """The file is not a well-formed ELF file: what is wrong, in words."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int

    @property
    def has_bytes(self) -> bool:
        return self.type != SHT_NOBITS and self.size > 0


@dataclass
class ElfHeaders:
    """What the file's headers say, each value checked against the file."""

    e_type: str
    machine: str
    sections: list[Section] = field(default_factory=list)
    segments: list[tuple[int, int, int]] = field(default_factory=list)
    """(p_type, p_offset, p_filesz) of each program header, its range clipped to the file."""
    needed: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


def _machine_names() -> dict[int, str]:
    try:
        from elftools.elf.enums import ENUM_E_MACHINE
    except ImportError:  # pragma: no cover - pyelftools is a dependency; the names are a nicety
        return {3: "EM_386", 40: "EM_ARM", 62: "EM_X86_64", 183: "EM_AARCH64", 21: "EM_PPC64", 243: "EM_RISCV"}
    return {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int) and k.startswith("EM_")}


_MACHINE_NAMES: dict[int, str] | None = None


def machine_name(number: int) -> str:
    global _MACHINE_NAMES
    if _MACHINE_NAMES is None:
        _MACHINE_NAMES = _machine_names()
    return _MACHINE_NAMES.get(number, f"EM_{number}")


def _cstring(data: Buffer, start: int, end: int) -> str:
    """The NUL-terminated string at ``start`` (at most ``MAX_NAME`` bytes, not past ``end``)."""
    if not 0 <= start < end:
        return ""
    stop = data.find(b"\0", start, min(end, start + MAX_NAME))
    raw = data[start:stop if stop >= 0 else min(end, start + MAX_NAME)]
    return bytes(raw).decode("utf-8", errors="replace")


def parse(data: Buffer) -> ElfHeaders:
    """The headers of the ELF file whose bytes are ``data`` (a memory map is read in place)."""
    size = len(data)
    if size < 16 or bytes(data[:4]) != b"\x7fELF":
        raise ElfError("no ELF magic")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise ElfError(f"unknown ELF class {ei_class} or byte order {ei_data}")
    wide = ei_class == 2
    end = "<" if ei_data == 1 else ">"
    ehdr = struct.Struct(end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"))
    if size < 16 + ehdr.size:
        raise ElfError(f"{size} bytes: shorter than an ELF header")
    (e_type, e_machine, _, _, e_phoff, e_shoff, _, _, e_phentsize, e_phnum, e_shentsize, e_shnum,
     e_shstrndx) = ehdr.unpack_from(data, 16)
    out = ElfHeaders(e_type=ET_NAMES.get(e_type, f"ET_{e_type}"), machine=machine_name(e_machine))
    out.segments = _segments(data, end, wide, e_phoff, e_phentsize, e_phnum)
    out.sections = _sections(data, end, wide, e_shoff, e_shentsize, e_shnum, e_shstrndx)
    out.needed, out.runpath = _dynamic(data, end, wide, out.sections)
    return out


def _table(size: int, offset: int, entsize: int, count: int, want: int, what: str, cap: int) -> None:
    if count == 0:
        return
    if entsize != want:
        raise ElfError(f"{what} entries of {entsize} bytes (this ELF class has {want})")
    if count > cap:
        raise ElfError(f"{count} {what} entries: more than the {cap} read")
    if offset <= 0 or offset + count * entsize > size:
        raise ElfError(f"the {what} table ({count} x {entsize} bytes at offset {offset}) lies past the end of "
                       f"the file ({size} bytes)")


def _segments(data: Buffer, end: str, wide: bool, off: int, entsize: int, count: int) -> list[tuple[int, int, int]]:
    size = len(data)
    _table(size, off, entsize, count, 56 if wide else 32, "program header", MAX_SEGMENTS)
    out = []
    for i in range(count):
        at = off + i * entsize
        if wide:
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(end + "IIQQQQ", data, at)
        else:
            p_type, p_offset, _, _, p_filesz = struct.unpack_from(end + "IIIII", data, at)
        start = min(p_offset, size)
        out.append((p_type, start, min(p_filesz, size - start)))
    return out


def _sections(data: Buffer, end: str, wide: bool, off: int, entsize: int, count: int,
              shstrndx: int) -> list[Section]:
    size = len(data)
    fmt = struct.Struct(end + ("IIQQQQIIQQ" if wide else "IIIIIIIIII"))
    if count == 0 and off:  # extended numbering: section 0's sh_size holds the count
        if entsize != fmt.size or off + fmt.size > size:
            raise ElfError(f"the section table at offset {off} lies past the end of the file ({size} bytes)")
        count = fmt.unpack_from(data, off)[5]
        if count == 0:
            return []
    _table(size, off, entsize, count, fmt.size, "section header", MAX_SECTIONS)
    raw = []
    for i in range(count):
        name, typ, flags, _, offset, sz, link, _, _, _ = fmt.unpack_from(data, off + i * entsize)
        if typ != SHT_NOBITS and sz and (offset > size or sz > size - offset):
            raise ElfError(f"section {i} ({sz} bytes at offset {offset}) lies past the end of the file ({size} bytes)")
        raw.append((name, typ, flags, offset, sz, link))
    if shstrndx == 0xFFFF and raw:  # SHN_XINDEX: the index is section 0's sh_link
        shstrndx = raw[0][5]
    names_at, names_end = 0, 0
    if 0 < shstrndx < len(raw) and raw[shstrndx][1] != SHT_NOBITS:
        names_at, names_end = raw[shstrndx][3], raw[shstrndx][3] + raw[shstrndx][4]
    return [Section(_cstring(data, names_at + n, names_end) if names_end else "", t, f, o, s, lk)
            for n, t, f, o, s, lk in raw]


def _dynamic(data: Buffer, end: str, wide: bool, sections: list[Section]) -> tuple[list[str], list[str]]:
    needed: list[str] = []
    runpath: list[str] = []
    dyn = next((s for s in sections if s.type == SHT_DYNAMIC and s.has_bytes), None)
    if dyn is None or not 0 <= dyn.link < len(sections):
        return needed, runpath
    strtab = sections[dyn.link]
    if not strtab.has_bytes:
        return needed, runpath
    entry = struct.Struct(end + ("qQ" if wide else "iI"))
    count = min(dyn.size // entry.size, MAX_DYNAMIC)
    s_start, s_end = strtab.offset, strtab.offset + strtab.size
    for i in range(count):
        tag, val = entry.unpack_from(data, dyn.offset + i * entry.size)
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED and len(needed) < MAX_NEEDED:
            needed.append(_cstring(data, s_start + val, s_end))
        elif tag in (DT_RUNPATH, DT_RPATH) and len(runpath) < MAX_NEEDED:
            runpath.extend(p for p in _cstring(data, s_start + val, s_end).split(":") if p)
    return needed, runpath
