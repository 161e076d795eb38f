"""Can a GPU of compute capability X.Y run this device code, and if not, what rebuild fixes it?

The rules (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility"):

- SASS for sm_XY runs on a GPU of the same major version and a minor version >= Y (sm_80 runs on
  8.0, 8.6, 8.9; not on 9.0). An arch-specific target (sm_90a) runs on exactly that compute
  capability; a family-specific one (sm_100f) on the same major version, minor >= Y.
- PTX for compute_XY is compiled by the driver (JIT) for any GPU of compute capability >= X.Y,
  at the first launch, if the driver knows the PTX ISA version it was written in. compute_90a
  PTX compiles only for 9.0; compute_100f only within the 10.x family.

The code of the whole file is judged as one: a kernel whose module lacks this GPU's code fails
at its launch ("no kernel image is available"), which the list of architectures shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.binary_inspect.fatbin import CodeImage

CC = tuple[int, int]

PTX_ISA_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (6, 0): (9, 0), (6, 1): (9, 1), (6, 2): (9, 2), (6, 3): (10, 0), (6, 4): (10, 1), (6, 5): (10, 2),
    (7, 0): (11, 0), (7, 1): (11, 1), (7, 2): (11, 2), (7, 3): (11, 3), (7, 4): (11, 4), (7, 5): (11, 5),
    (7, 6): (11, 6), (7, 7): (11, 7), (7, 8): (11, 8),
    (8, 0): (12, 0), (8, 1): (12, 1), (8, 2): (12, 2), (8, 3): (12, 3), (8, 4): (12, 4), (8, 5): (12, 5),
    (8, 6): (12, 7), (8, 7): (12, 8), (8, 8): (12, 9),
    (9, 0): (13, 0),
}
"""PTX ISA version -> the CUDA release that introduced it: the oldest driver (by the CUDA version
it supports) that can JIT-compile such PTX (PTX ISA release notes)."""

DRIVER_FOR_CUDA: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
"""CUDA major version -> the oldest Linux driver that runs its runtime (minor version
compatibility: any 12.x runtime on a 525+ driver); features of a newer minor may need more."""


def cuda_for_ptx(isa: tuple[int, int]) -> tuple[int, int] | None:
    """The CUDA release that a PTX ISA version needs, None when unknown; an ISA newer than the
    table's is guessed from the latest known one (9.1 -> 13.1)."""
    if isa in PTX_ISA_CUDA:
        return PTX_ISA_CUDA[isa]
    latest = max(PTX_ISA_CUDA)
    if isa > latest and isa[0] == latest[0]:
        base = PTX_ISA_CUDA[latest]
        return base[0], base[1] + isa[1] - latest[1]
    return None


def parse_cc(text: str | None) -> CC | None:
    """'9.0' -> (9, 0); None for None or malformed text."""
    if not text:
        return None
    major, _, minor = text.strip().partition(".")
    if not (major.isdigit() and (minor or "0").isdigit()):
        return None
    return int(major), int(minor or 0)


def fmt_cc(cc: CC) -> str:
    return f"{cc[0]}.{cc[1]}"


def parse_version(text: str | None) -> tuple[int, int] | None:
    """'13.0' (or '12.8.1') -> (13, 0)."""
    if not text:
        return None
    parts = text.strip().split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def sass_runs_on(image: CodeImage, cc: CC) -> bool:
    if image.variant == "a":
        return image.cc == cc
    return image.cc[0] == cc[0] and cc[1] >= image.cc[1]


def ptx_compiles_for(image: CodeImage, cc: CC) -> bool:
    if image.variant == "a":
        return image.cc == cc
    if image.variant == "f":
        return image.cc[0] == cc[0] and cc[1] >= image.cc[1]
    return cc >= image.cc


@dataclass(frozen=True)
class Verdict:
    """How (and whether) code in the file reaches a GPU of compute capability ``cc``."""

    cc: CC
    via: Literal["sass", "ptx-jit", "none"]
    image: CodeImage | None = None
    """The image the driver would pick: the newest SASS that runs, else the newest PTX."""
    reason: str = ""
    """Why not (via 'none'), or what JIT means here (via 'ptx-jit')."""
    ptx_needs_cuda: tuple[int, int] | None = None
    """For PTX JIT: the CUDA version the driver must support for the PTX's ISA."""

    @property
    def runnable(self) -> bool:
        return self.via != "none"


def arch_list(images: list[CodeImage], kind: str) -> list[str]:
    """The distinct architectures of one kind, oldest first: ['sm_80', 'sm_90a']."""
    seen = {(i.arch, i.variant): i.name for i in images if i.kind == kind}
    return [seen[k] for k in sorted(seen)]


def _describe(images: list[CodeImage]) -> str:
    """'sm_80 without PTX', 'sm_80 and PTX compute_80', 'PTX compute_90a only'."""
    sass, ptx = arch_list(images, "sass"), arch_list(images, "ptx")
    if not ptx:
        return f"{', '.join(sass)} without PTX"
    if not sass:
        return f"PTX {', '.join(ptx)} only"
    return f"{', '.join(sass)} and PTX {', '.join(ptx)}"


def _why_not(image: CodeImage, cc: CC) -> str:
    if image.kind == "sass":
        if image.variant == "a":
            return f"{image.name} is arch-specific: it runs only on cc {fmt_cc(image.cc)}"
        if image.cc[0] != cc[0]:
            family = f"{image.cc[0]}.x" if image.cc[1] == 0 else f"{fmt_cc(image.cc)} to {image.cc[0]}.x"
            return f"SASS {image.name} runs only on cc {family}"
        return f"SASS {image.name} needs cc {image.cc[0]}.{image.cc[1]} or a later {image.cc[0]}.x"
    if image.variant == "a":
        return f"PTX {image.name} compiles only for cc {fmt_cc(image.cc)}"
    if image.variant == "f":
        return f"PTX {image.name} compiles only for the cc {image.cc[0]}.x family"
    return f"PTX {image.name} needs cc {fmt_cc(image.cc)} or newer"


def judge(images: list[CodeImage], cc: CC) -> Verdict:
    """The verdict for compute capability ``cc`` over every image in the file."""
    sass = [i for i in images if i.kind == "sass" and sass_runs_on(i, cc)]
    if sass:
        return Verdict(cc=cc, via="sass", image=max(sass, key=lambda i: (i.arch, i.variant != "")))
    ptx = [i for i in images if i.kind == "ptx" and ptx_compiles_for(i, cc)]
    if ptx:
        best = max(ptx, key=lambda i: (i.arch, i.ptx_isa or (0, 0)))
        need = cuda_for_ptx(best.ptx_isa) if best.ptx_isa else None
        return Verdict(cc=cc, via="ptx-jit", image=best, ptx_needs_cuda=need,
                       reason=f"no SASS for cc {fmt_cc(cc)}: the driver JIT-compiles the {best.name} PTX "
                              "at the first launch")
    reasons = "; ".join(dict.fromkeys(_why_not(i, cc) for i in images))
    return Verdict(cc=cc, via="none", reason=f"built for {_describe(images)}: {reasons}")


def gencode_fix(cc: CC) -> str:
    """How to build for ``cc``, for nvcc and for CMake."""
    n = f"{cc[0]}{cc[1]}"
    return (f"rebuild with -gencode arch=compute_{n},code=sm_{n} or CMAKE_CUDA_ARCHITECTURES={n} "
            f"(add -gencode arch=compute_{n},code=compute_{n}, or CMAKE_CUDA_ARCHITECTURES=\"{n}-real;{n}-virtual\", "
            "to keep PTX that newer GPUs can JIT-compile)")
