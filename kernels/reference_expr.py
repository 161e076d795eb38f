"""The closed language of a user kernel's reference expression: array arithmetic over the inputs.

An expression such as ``alpha * (A @ B.T) + np.tanh(x)`` is parsed with Python's ``ast`` and walked
by hand (never handed to ``eval``). What it may use is listed here and nothing else:

- numbers, short strings (einsum subscripts, dtype names), ``None``, ``...``, tuples, lists and
  a dict of output names (a kernel with several outputs);
- the names it is given (the input arrays, the dimensions, the scalar arguments) and ``np``;
- ``np.NAME`` for a NAME in ``NP_NAMES``: pure array functions and constants, none of which reads
  or writes a file, takes a callable, or reaches native code;
- ``value.NAME`` for a NAME in ``ARRAY_NAMES``: array properties and methods that return a new
  value (no ``tofile``, ``ctypes``, ``data``, ``base`` or in-place method);
- arithmetic and comparisons (``+ - * / // % ** @``, shifts, ``& | ^``, ``~``), ``a if c else b``,
  subscripts and slices, calls of the above with positional and keyword arguments.

No other attribute, no dunder, no lambda, comprehension, f-string, star or double-star argument,
and ``np`` only as ``np.NAME``. Python-number arithmetic is bounded like the spec's shape
expressions (exponents and shifts up to 64, integers up to 2**80), and a string or a sequence
cannot be repeated. Every refusal is a ``ReferenceError_`` naming what was refused.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from kernels.expr import parse_source

MAX_TEXT = 2000
"""The longest expression: a longer reference belongs in a reference file."""
MAX_STR = 64
"""The longest string literal (an einsum subscript, a dtype name)."""
MAX_INT = 2**80
"""Larger Python integers are refused (``10**10**10`` must not take the machine)."""

NP_NAMES = frozenset("""
abs absolute add subtract multiply divide true_divide floor_divide negative positive power
float_power mod fmod remainder maximum minimum fmax fmin exp exp2 expm1 log log2 log10 log1p sqrt
cbrt square reciprocal sin cos tan arcsin arccos arctan arctan2 sinh cosh tanh arcsinh arccosh
arctanh hypot sign floor ceil round around rint trunc clip where isnan isinf isfinite nan_to_num
sum mean max min amax amin prod std var cumsum cumprod argmax argmin average median matmul dot
vdot einsum tensordot outer inner kron transpose swapaxes moveaxis reshape ravel squeeze
expand_dims broadcast_to concatenate stack hstack vstack tile repeat flip roll tril triu diag eye
identity zeros ones full zeros_like ones_like full_like arange linspace asarray array copy
float64 float32 float16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool_ logical_and
logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor invert left_shift
right_shift equal not_equal less less_equal greater greater_equal isclose sort argsort diff
pi e inf nan newaxis heaviside logaddexp logaddexp2 sinc deg2rad rad2deg
""".split())
"""What ``np.NAME`` may name: pure functions and constants of the array module."""

ARRAY_NAMES = frozenset("""
T shape ndim size dtype real imag astype sum mean max min prod std var cumsum cumprod argmax
argmin reshape transpose swapaxes squeeze ravel flatten clip round any all dot conj copy
""".split())
"""What ``value.NAME`` may name: array properties and methods that return a new value."""

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.MatMult: operator.matmul, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos,
                                            ast.Invert: operator.invert, ast.Not: operator.not_}
_PLAIN = (ast.Expression, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.BinOp, ast.UnaryOp,
          ast.Compare, ast.IfExp, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.keyword)
_ALLOWED = (*_PLAIN, ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.Dict)


class ReferenceError_(ValueError):  # noqa: N801 -- ReferenceError is a builtin
    """A reference expression that does not parse, uses what the language does not have, or fails
    to evaluate; the message says which."""


def check(text: str, names: set[str] | frozenset[str]) -> ast.Expression:
    """The parsed expression; ReferenceError_ for the first thing it may not use (a construct, an
    attribute, a name that is not one of ``names`` or ``np``, a long string)."""
    try:
        src, tree = parse_source(text, MAX_TEXT, ": use reference.file for more")
    except ValueError as exc:
        raise ReferenceError_(str(exc)) from None
    known = {*names, "np"}
    np_bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name) and n.value.id == "np"}
    for node in ast.walk(tree):  # constructs first, outermost first: 'lambdas', not its parts
        if not isinstance(node, _ALLOWED):
            raise ReferenceError_(f"{src!r}: {_construct(node)} not allowed in a reference expression (arithmetic "
                                  "over the inputs, np.NAME functions and array methods only; or name a "
                                  "reference.file)")

    def visit(node: ast.AST) -> None:  # then names, children first: the innermost one is named
        for child in ast.iter_child_nodes(node):
            visit(child)
        _check_node(node, src, known, np_bases)

    try:
        visit(tree)
    except RecursionError:
        raise ReferenceError_(f"{src[:60]!r}: nested too deeply") from None
    return tree


def _check_node(node: ast.AST, src: str, known: set[str], np_bases: set[int]) -> None:
    if isinstance(node, _PLAIN):
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise ReferenceError_(f"{src!r}: operator {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.Compare) and any(type(o) not in _CMPOPS for o in node.ops):
            raise ReferenceError_(f"{src!r}: only < <= > >= == != comparisons are allowed")
        if isinstance(node, ast.keyword) and node.arg is None:
            raise ReferenceError_(f"{src!r}: ** arguments are not allowed")
        return
    if isinstance(node, ast.Constant):
        v = node.value
        if v is None or v is Ellipsis or isinstance(v, (bool, int, float)):
            return
        if isinstance(v, str) and len(v) <= MAX_STR:
            return
        what = f"strings longer than {MAX_STR} characters" if isinstance(v, str) else f"{type(v).__name__} literals"
        raise ReferenceError_(f"{src!r}: {what} are not allowed in a reference expression")
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ReferenceError_(f"{src!r}: names starting with '_' are not allowed ({node.id})")
        if node.id not in known:
            shown = ", ".join(sorted(known))
            raise ReferenceError_(f"{src!r}: unknown name {node.id} (names here: {shown})")
        if node.id == "np" and id(node) not in np_bases:
            raise ReferenceError_(f"{src!r}: np is only usable as np.NAME (a function or constant)")
        return
    if isinstance(node, ast.Attribute):
        _check_attribute(node, src)
        return
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            raise ReferenceError_(f"{src!r}: a dict's keys must be output names (strings)")
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Attribute):
            what = ast.unparse(node.func)[:40]
            raise ReferenceError_(f"{src!r}: calling {what} is not allowed (call np.NAME or an array method)")


def _check_attribute(node: ast.Attribute, src: str) -> None:
    if node.attr.startswith("_"):
        raise ReferenceError_(f"{src!r}: attributes starting with '_' are not allowed (.{node.attr})")
    on_np = isinstance(node.value, ast.Name) and node.value.id == "np"
    allowed = NP_NAMES if on_np else ARRAY_NAMES
    if node.attr not in allowed:
        where = "np" if on_np else "an array"
        raise ReferenceError_(f"{src!r}: {where}.{node.attr} is not in the reference language "
                              f"(see kernels/reference_expr.py for the {'functions' if on_np else 'methods'})")


def _construct(node: ast.AST) -> str:
    names = {ast.Lambda: "lambdas", ast.NamedExpr: "assignments (:=)", ast.ListComp: "comprehensions",
             ast.SetComp: "comprehensions", ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions",
             ast.JoinedStr: "f-strings", ast.Starred: "star arguments", ast.Set: "sets",
             ast.BoolOp: "and / or", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield"}
    return names.get(type(node), type(node).__name__)


def _bounded(value: Any, src: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ReferenceError_(f"{src!r}: an intermediate integer exceeds 2**80")
    if isinstance(value, complex):
        raise ReferenceError_(f"{src!r}: a complex intermediate value (a root of a negative number?)")
    return value


def _binop(op: ast.operator, a: Any, b: Any, src: str) -> Any:
    scalar = (int, float)
    if isinstance(op, (ast.Pow, ast.LShift, ast.RShift)) and isinstance(a, scalar) and isinstance(b, scalar):
        if abs(b) > 64 or (not isinstance(op, ast.Pow) and b < 0):
            raise ReferenceError_(f"{src!r}: exponent or shift {b} outside 0..64")
    if isinstance(op, ast.Mult) and any(isinstance(v, (str, tuple, list)) for v in (a, b)):
        raise ReferenceError_(f"{src!r}: a string or a sequence cannot be repeated")
    return _bounded(_BINOPS[type(op)](a, b), src)


class Evaluator:
    """Walks a checked tree with ``np`` bound to an array module and the names to their values."""

    def __init__(self, src: str, xp: Any, env: Mapping[str, Any]) -> None:
        self.src, self.xp, self.env = src, xp, env

    def __call__(self, node: ast.AST) -> Any:  # noqa: C901 -- one branch per node type
        ev = self
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.env[node.id]
        if isinstance(node, ast.Attribute):
            base = self.xp if isinstance(node.value, ast.Name) and node.value.id == "np" else ev(node.value)
            return getattr(base, node.attr)
        if isinstance(node, ast.UnaryOp):
            return _bounded(_UNARY[type(node.op)](ev(node.operand)), self.src)
        if isinstance(node, ast.BinOp):
            return _binop(node.op, ev(node.left), ev(node.right), self.src)
        if isinstance(node, ast.Compare):
            left, out = ev(node.left), True
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = ev(right_node)
                out = out & _CMPOPS[type(op)](left, right)
                left = right
            return out
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Subscript):
            return ev(node.value)[ev(node.slice)]
        if isinstance(node, ast.Slice):
            return slice(*(ev(p) if p is not None else None for p in (node.lower, node.upper, node.step)))
        if isinstance(node, ast.Tuple):
            return tuple(ev(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [ev(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
        if isinstance(node, ast.Call):
            fn = ev(node.func)
            return fn(*(ev(a) for a in node.args), **{k.arg: ev(k.value) for k in node.keywords if k.arg})
        raise ReferenceError_(f"{self.src!r}: cannot evaluate {type(node).__name__}")  # check() refused it


def evaluate(src: str, tree: ast.Expression, xp: Any, env: Mapping[str, Any]) -> Any:
    """The value of a checked expression; ReferenceError_ for a bounded-arithmetic refusal, the
    array module's own exception for an array error (a shape mismatch), which the caller reports."""
    try:
        return Evaluator(src, xp, env)(tree)
    except RecursionError:
        raise ReferenceError_(f"{src[:60]!r}: nested too deeply") from None
    except (ZeroDivisionError, OverflowError) as exc:
        raise ReferenceError_(f"{src!r}: {exc}") from None

