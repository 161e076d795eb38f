"""A user kernel's reference: an expression in a closed language, or a Python file that is code.

The expression (``reference.expr``) is checked when the spec loads and walked by
``kernels.reference_expr``: array arithmetic over the inputs, ``np.NAME`` for a fixed list of pure
functions, array methods from a fixed list, nothing that reads or writes a file or reaches native
code. A spec is a file people share, so listing or benching one runs nothing but that language.

A reference file (``reference.file``) is Python and runs with the user's permissions. It runs only
when the user has trusted its exact content (``tui bench --trust-reference``, recorded by sha256 in
the config dir; the engine sets ``trusted``); its text is the one read when the spec loaded, so a
file changed after it was trusted is not the one that runs. It runs in the engine process only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.reference_expr import ReferenceError_, check, evaluate


class Reference:
    """Computes a user kernel's expected outputs from its inputs (float64 arrays)."""

    def __init__(self, expr: str | None, file: Path | None, names: set[str], file_text: str = "") -> None:
        self.expr = expr
        self.file = file
        self.file_text = file_text
        self.file_sha256 = hashlib.sha256(file_text.encode()).hexdigest() if file is not None else None
        """The reference file's content hash: what trusting it records."""
        self.trusted = False
        """Whether the user trusted this file's content (set by the engine from its trust record)."""
        self._tree = check(expr, names) if expr is not None else None
        self._fn: Callable[..., Any] | None = None

    @property
    def runs_code(self) -> bool:
        """Whether computing the reference runs the user's Python (a reference file)."""
        return self._tree is None and self.file is not None

    def _function(self) -> Callable[..., Any]:
        if not self.trusted:
            raise ReferenceError_(f"reference.file {self.file}: not trusted (it is Python code); "
                                  "pass --trust-reference to run it")
        if self._fn is None:
            module: dict[str, Any] = {"__name__": "sol_user_reference", "__file__": str(self.file)}
            exec(compile(self.file_text, str(self.file), "exec"), module)  # noqa: S102 -- trusted by the user
            fn = module.get("reference")
            if not callable(fn):
                raise ReferenceError_(f"reference.file {self.file}: defines no function reference(**arrays)")
            self._fn = fn
        return self._fn

    def __call__(self, xp: Any, env: dict[str, Any]) -> Any:
        """The reference's value for ``env`` (arrays on ``xp``, scalars, dimensions)."""
        import numpy as np

        if self._tree is None:
            host = {k: _to_host(v) for k, v in env.items()}
            return _to_xp(xp, self._function()(**host))
        assert self.expr is not None
        try:
            return evaluate(self.expr, self._tree, xp, env)
        except ReferenceError_:
            raise
        except Exception:
            if xp is np:
                raise
        host = {k: _to_host(v) for k, v in env.items()}  # CuPy lacks something: NumPy on the host
        return _to_xp(xp, evaluate(self.expr, self._tree, np, host))


def _to_host(v: Any) -> Any:
    return v.get() if hasattr(v, "get") and hasattr(v, "__cuda_array_interface__") else v


def _to_xp(xp: Any, out: Any) -> Any:
    if isinstance(out, dict):
        return {k: xp.asarray(v) for k, v in out.items()}
    return xp.asarray(out)
