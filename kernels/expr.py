"""Safe arithmetic expressions for user kernel specs: shapes, grid, block, FLOPs, bytes, constraints.

An expression is parsed with Python's ``ast`` and only these nodes are accepted: integer and float
literals (booleans too), names, ``+ - * / // % **``, shifts and bitwise ``& | ^``, unary ``- + not
~``, comparisons (``< <= > >= == !=``, chained), ``and`` / ``or``, ``a if c else b``, and calls of
``min``, ``max``, ``abs``, ``cdiv`` (= ``ceil_div``, rounding up) and ``log2`` (of a power of two).
No attribute access, subscripts, lambdas, comprehensions or other calls: nothing here can reach
Python's object model, so a spec file cannot run code through an expression. The tree is walked by
hand (``evaluate``), never handed to ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_TEXT = 1000
"""The longest expression accepted: ours are a line; a longer one is a mistake (or an attack on the
parser's recursion)."""
MAX_MAGNITUDE = 2**80
"""Larger intermediate integers are refused: a shape expression never needs them, and ``10**10**10``
must not take the machine's memory."""


class ExprError(ValueError):
    """An expression that does not parse, uses what is not allowed, names an unknown name, or fails
    to evaluate; the message says which and where."""


def _cdiv(a: Any, b: Any) -> Any:
    if b == 0:
        raise ExprError("cdiv: division by zero")
    return -((-a) // b)


def _log2(a: Any) -> int:
    if not isinstance(a, int) or a <= 0 or a & (a - 1):
        raise ExprError(f"log2({a}): not a power of two")
    return a.bit_length() - 1


FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs, "cdiv": _cdiv,
                                            "ceil_div": _cdiv, "log2": _log2}
"""The only functions an expression may call."""

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos,
                                            ast.Not: operator.not_, ast.Invert: operator.invert}
_WHAT = {ast.Attribute: "attribute access", ast.Subscript: "subscripts", ast.Lambda: "lambdas",
         ast.ListComp: "comprehensions", ast.GeneratorExp: "comprehensions", ast.DictComp: "comprehensions",
         ast.SetComp: "comprehensions", ast.Starred: "star arguments", ast.JoinedStr: "strings",
         ast.NamedExpr: "assignment (:=)", ast.List: "lists", ast.Tuple: "tuples", ast.Dict: "dicts",
         ast.Set: "sets", ast.Await: "await", ast.Yield: "yield", ast.Slice: "slices"}


@dataclass(frozen=True)
class Expr:
    """A parsed, checked expression: its text, its tree and the names it uses."""

    text: str
    tree: ast.Expression
    names: frozenset[str]

    def __str__(self) -> str:
        return self.text

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The value with ``env`` binding the names; ExprError naming an unbound name or a failure."""
        return evaluate(self, env)


def parse_source(text: str, max_text: int = MAX_TEXT, too_long_hint: str = "") -> tuple[str, ast.Expression]:
    """``text`` stripped and parsed as one Python expression, before any check of what it uses;
    ExprError for empty, longer than ``max_text``, not parsing (with the column) or nested too
    deeply. ``too_long_hint`` ends the message for text that is too long."""
    src = text.strip()
    if not src:
        raise ExprError("empty expression")
    if len(src) > max_text:
        raise ExprError(f"expression longer than {max_text} characters{too_long_hint}")
    try:
        return src, ast.parse(src, mode="eval")
    except SyntaxError as exc:
        col = f" at column {exc.offset}" if exc.offset else ""
        raise ExprError(f"{src!r} does not parse{col}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError(f"{src[:60]!r} does not parse: nested too deeply") from None


def parse(text: Any) -> Expr:
    """``text`` (a string, or an int/float literal from TOML) parsed and checked against the allowed
    syntax; ExprError saying what is wrong (a syntax error with its column, or the first construct
    that is not allowed)."""
    if isinstance(text, bool):
        raise ExprError(f"expected an expression, got the boolean {text}")
    if isinstance(text, (int, float)):
        text = repr(text)
    if not isinstance(text, str):
        raise ExprError(f"expected an expression (a string or a number), got {type(text).__name__}")
    src, tree = parse_source(text)
    names: set[str] = set()
    for node in ast.walk(tree):
        _check_node(node, src, names)
    return Expr(src, tree, frozenset(names))


def _check_node(node: ast.AST, src: str, names: set[str]) -> None:
    if isinstance(node, (ast.Expression, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
                         ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp)):
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise ExprError(f"{src!r}: operator {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.Compare) and any(type(o) not in _CMPOPS for o in node.ops):
            raise ExprError(f"{src!r}: only < <= > >= == != comparisons are allowed")
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float)):
            return
        raise ExprError(f"{src!r}: only numbers are allowed as literals, not {type(node.value).__name__}")
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExprError(f"{src!r}: names starting with '_' are not allowed ({node.id})")
        if node.id not in FUNCTIONS:
            names.add(node.id)
        return
    if isinstance(node, ast.Call):
        fn = node.func.id if isinstance(node.func, ast.Name) else None
        if fn not in FUNCTIONS:
            what = ast.unparse(node.func)[:40]
            raise ExprError(f"{src!r}: calling {what} is not allowed (functions: {', '.join(FUNCTIONS)})")
        if node.keywords or not node.args:
            raise ExprError(f"{src!r}: {fn}() takes positional arguments only")
        return
    what = _WHAT.get(type(node), type(node).__name__)
    raise ExprError(f"{src!r}: {what} not allowed in an expression (only arithmetic, comparisons, "
                    f"names and {', '.join(FUNCTIONS)})")


def check_names(expr: Expr, known: set[str] | frozenset[str]) -> None:
    """ExprError naming any name ``expr`` uses that is not in ``known`` (and listing those)."""
    unknown = sorted(expr.names - set(known))
    if unknown:
        raise ExprError(f"{expr.text!r}: unknown name{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(unknown)} (names here: {', '.join(sorted(known)) or 'none'})")


def _num(v: Any, src: str) -> Any:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_MAGNITUDE:
        raise ExprError(f"{src!r}: an intermediate value exceeds 2**80")
    if isinstance(v, float) and not math.isfinite(v):
        raise ExprError(f"{src!r}: the value is not finite")
    return v


def evaluate(expr: Expr, env: Mapping[str, Any]) -> Any:
    """Walk the checked tree with ``env`` binding the names; ExprError on an unbound name, a
    division by zero, an exponent or shift beyond 64, or an integer beyond 2**80."""
    src = expr.text

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ExprError(f"{src!r}: {node.id} has no value here")
            return env[node.id]
        if isinstance(node, ast.UnaryOp):
            return _num(_UNARY[type(node.op)](ev(node.operand)), src)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Pow, ast.LShift)) and (not isinstance(b, (int, float)) or abs(b) > 64):
                raise ExprError(f"{src!r}: exponent or shift {b} beyond 64")
            try:
                return _num(_BINOPS[type(node.op)](a, b), src)
            except ZeroDivisionError:
                raise ExprError(f"{src!r}: division by zero") from None
            except (TypeError, OverflowError) as exc:
                raise ExprError(f"{src!r}: {exc}") from None
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                val: Any = True
                for v in node.values:
                    val = ev(v)
                    if not val:
                        return val
                return val
            val = False
            for v in node.values:
                val = ev(v)
                if val:
                    return val
            return val
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = ev(right_node)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            args = [ev(a) for a in node.args]
            try:
                return _num(FUNCTIONS[node.func.id](*args), src)
            except ExprError as exc:
                raise ExprError(f"{src!r}: {exc}") from None
            except (TypeError, ValueError, ZeroDivisionError) as exc:
                raise ExprError(f"{src!r}: {node.func.id}(): {exc}") from None
        raise ExprError(f"{src!r}: cannot evaluate {type(node).__name__}")  # parse() refused it already

    try:
        return ev(expr.tree)
    except RecursionError:
        raise ExprError(f"{src[:60]!r}: nested too deeply") from None


def as_int(value: Any, what: str) -> int:
    """``value`` as an int where it is a whole number; ExprError naming ``what`` otherwise."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ExprError(f"{what} = {value!r}: not a whole number (use // or cdiv for integer division)")
