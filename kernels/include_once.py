"""A kernel's source as NVRTC gets it: its files under kernels/ with each ``#include`` inlined once.

The device headers (kernels/sm90/, kernels/skinny/) each include what they use and carry an include
guard, so each one compiles alone (tests/unit/test_sm90_headers_alone.py). The rendered source
pastes every file the first time a file includes it and drops the later ``#include`` lines of the
same file, as the preprocessor would skip its guarded text: one source with each part once, the
same tokens in the same order as compiling the files with an include path would give, on a machine
without the CUDA toolkit too.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping

from kernels.spec import KERNEL_DIR

_INCLUDE_LINE = re.compile(r'^#include (?:"([\w./]+)"|([A-Z_]+))[^\n]*\n', re.M)


def inline_once(names: Iterable[str], macros: Mapping[str, str] | None = None,
                generated: Mapping[str, Callable[[], str]] | None = None,
                seen: Iterable[str] = ()) -> str:
    """``names`` (paths under kernels/) concatenated, each ``#include "file"`` (a path relative to
    the including file) replaced by that file's text the first time and by nothing after, each
    ``#include MACRO`` named in ``macros`` as the file it maps to, and a name in ``generated`` by its
    generator's text. ``seen``: files the caller already placed in the source (e.g. vec16.cuh after
    its ``VEC_DTYPE``), whose ``#include`` lines are dropped."""
    macros, generated = macros or {}, generated or {}
    done = set(seen)

    def text(name: str) -> str:
        if name in done:
            return ""
        done.add(name)
        if name in generated:
            return generated[name]()
        folder = posixpath.dirname(name)

        def one(m: re.Match[str]) -> str:
            if m[2]:
                return text(macros[m[2]]) if m[2] in macros else m[0]
            return text(posixpath.normpath(posixpath.join(folder, m[1])))

        return _INCLUDE_LINE.sub(one, (KERNEL_DIR / name).read_text(encoding="utf-8"))

    return "".join(text(name) for name in names)
