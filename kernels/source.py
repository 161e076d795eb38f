"""A kernel's CUDA source as NVRTC gets it: a template under kernels/ with its ``#include`` lines
inlined (``kernel_source``) and the shared 16-byte helpers (``vec16_source``)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent


_INCLUDE_LINE = re.compile(r'^#include (?:"([\w./]+)"|([A-Z_]+))[^\n]*\n', re.M)


def kernel_source(name: str, macros: Mapping[str, str] | None = None,
                  generated: Mapping[str, Callable[[], str]] | None = None) -> str:
    """The text of ``name`` (a path under kernels/) with each ``#include "file"`` line replaced by that
    file's text (its path relative to the including file, where the preprocessor looks first), each
    ``#include MACRO`` named in ``macros`` by the text of the file it maps to, and a name in
    ``generated`` by its generator's text, recursively: a part several kernels use stands once, and
    NVRTC still gets one source, the same tokens in the same order as one file would give it."""
    macros, generated = macros or {}, generated or {}
    if name in generated:
        return generated[name]()
    folder = posixpath.dirname(name)

    def one(m: re.Match[str]) -> str:
        if m[2]:
            return kernel_source(macros[m[2]], macros, generated) if m[2] in macros else m[0]
        return kernel_source(posixpath.normpath(posixpath.join(folder, m[1])), macros, generated)

    return _INCLUDE_LINE.sub(one, (KERNEL_DIR / name).read_text(encoding="utf-8"))


def vec16_source(dtype_code: int) -> str:
    """The shared 16-byte access and conversion helpers (``vec16.cuh``) for a kernel whose dtype
    code (0 bf16, 1 fp16, 2 fp32 data) is ``dtype_code``: its VEC_DTYPE #define, then the text."""
    return f"#define VEC_DTYPE {int(dtype_code)}\n" + (KERNEL_DIR / "vec16.cuh").read_text(encoding="utf-8")
