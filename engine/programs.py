"""External programs the engine runs (ldd, cuobjdump, nvidia-smi, uname, ...): found by absolute path.

A program is looked up on PATH's absolute folders only: a relative entry ('.', 'bin', or an empty
one, which means the current folder) would find, and the engine would run, a program that sits in
whatever folder the user stands in (a downloaded tree with its own ``ldd``). Callers pass file
arguments after ``--`` or as absolute paths, so that a file named ``--version`` is never an option.
"""

from __future__ import annotations

import os
import shutil


def safe_path() -> str:
    """PATH with every relative or empty entry dropped."""
    return os.pathsep.join(d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(d))


def find_program(name: str) -> str | None:
    """The absolute path of program ``name`` on PATH's absolute folders, or None."""
    found = shutil.which(name, path=safe_path())
    return os.path.abspath(found) if found else None
