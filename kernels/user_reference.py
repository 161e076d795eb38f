"""A user kernel's reference: a NumPy expression, or a ``reference()`` function in a Python file.

The expression is checked when the spec loads: it parses as one Python expression, uses only the
names it may (``np``, the arguments, the dimensions), no name or attribute starting with '_', and
no lambdas, comprehensions or assignments. It is then evaluated with no builtins and ``np`` bound to
the array module of the run (CuPy on a GPU, NumPy on the host; NumPy again where CuPy lacks a
function). This narrows mistakes; it is not a sandbox: a reference, like the ``.cu`` file beside
it, is the user's own code and runs in the engine process only. A reference file is imported there
on first use, never in the cockpit's process.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.expr import parse_source

MAX_TEXT = 2000
_REFUSED = {ast.Lambda: "lambdas", ast.NamedExpr: "assignments (:=)", ast.ListComp: "comprehensions",
            ast.SetComp: "comprehensions", ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions",
            ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.JoinedStr: "f-strings"}


def check_expression(text: str, names: set[str]) -> ast.Expression:
    """The parsed expression; ValueError saying what is wrong (does not parse, a construct or a
    name that is not allowed, an unknown name listing the known ones)."""
    src, tree = parse_source(text, MAX_TEXT, ": use reference.file for more")
    used: set[str] = set()
    for node in ast.walk(tree):
        what = _REFUSED.get(type(node))
        if what:
            raise ValueError(f"{src!r}: {what} are not allowed in a reference expression")
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                raise ValueError(f"{src!r}: names starting with '_' are not allowed ({node.id})")
            used.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ValueError(f"{src!r}: attributes starting with '_' are not allowed (.{node.attr})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            raise ValueError(f"{src!r}: bytes literals are not allowed")
    unknown = sorted(used - names)
    if unknown:
        raise ValueError(f"{src!r}: unknown name{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                         f"(names here: {', '.join(sorted(names))})")
    return tree


class Reference:
    """Computes a user kernel's expected outputs from its inputs (float64 arrays)."""

    def __init__(self, expr: str | None, file: Path | None, names: set[str]) -> None:
        self.expr = expr
        self.file = file
        self._code = compile(check_expression(expr, names), "<reference>", "eval") if expr is not None else None
        self._fn: Callable[..., Any] | None = None

    def _function(self) -> Callable[..., Any]:
        if self._fn is None:
            assert self.file is not None
            spec = importlib.util.spec_from_file_location(f"sol_user_reference_{abs(hash(str(self.file)))}", self.file)
            if spec is None or spec.loader is None:
                raise ValueError(f"reference.file {self.file}: cannot import it")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            fn = getattr(module, "reference", None)
            if not callable(fn):
                raise ValueError(f"reference.file {self.file}: defines no function reference(**arrays)")
            self._fn = fn
        return self._fn

    def __call__(self, xp: Any, env: dict[str, Any]) -> Any:
        """The reference's value for ``env`` (arrays on ``xp``, scalars, dimensions)."""
        import numpy as np

        if self._code is None:
            host = {k: _to_host(v) for k, v in env.items()}
            return _to_xp(xp, self._function()(**host))
        try:
            return eval(self._code, {"__builtins__": {}}, {"np": xp, **env})  # noqa: S307 -- checked tree
        except Exception:
            if xp is np:
                raise
        host = {k: _to_host(v) for k, v in env.items()}  # CuPy lacks something: NumPy on the host
        return _to_xp(xp, eval(self._code, {"__builtins__": {}}, {"np": np, **host}))  # noqa: S307


def _to_host(v: Any) -> Any:
    return v.get() if hasattr(v, "get") and hasattr(v, "__cuda_array_interface__") else v


def _to_xp(xp: Any, out: Any) -> Any:
    if isinstance(out, dict):
        return {k: xp.asarray(v) for k, v in out.items()}
    return xp.asarray(out)
