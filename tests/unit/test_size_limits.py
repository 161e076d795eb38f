"""Small files with one job (STYLE 10): no product file over ``MAX_FILE_LINES`` lines (engine/,
kernels/ and tui/: Python, CUDA sources and headers), and no function over ``MAX_FUNCTION_LINES``
lines in engine/ and tui/ (counted over ``ast``, decorators and docstring included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
FILE_ROOTS = ("engine", "kernels", "tui")
FUNCTION_ROOTS = ("engine", "tui")
SUFFIXES = (".py", ".cu", ".cuh")


def product_files(roots: tuple[str, ...], suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for root in roots for p in (ROOT / root).rglob("*")
                  if p.suffix in suffixes and "__pycache__" not in p.parts)


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_functions(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > MAX_FUNCTION_LINES:
                out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_product_file_is_over_the_limit():
    over = {str(p.relative_to(ROOT)): n for p in product_files(FILE_ROOTS, SUFFIXES)
            if (n := line_count(p)) > MAX_FILE_LINES}
    assert over == {}, f"over {MAX_FILE_LINES} lines: split along a seam (STYLE 10)"


def test_no_function_in_engine_or_tui_is_over_the_limit():
    over = [f for p in product_files(FUNCTION_ROOTS, (".py",)) for f in long_functions(p)]
    assert over == [], f"over {MAX_FUNCTION_LINES} lines: split into named pieces"


def test_the_counts_see_what_they_are_meant_to(tmp_path):
    """A file of MAX_FILE_LINES + 1 lines is over; a function of MAX_FUNCTION_LINES + 1 lines is
    over, one of MAX_FUNCTION_LINES is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    src = tmp_path / "probe.py"
    src.write_text(f"def fits():\n{body}\n\n\ndef over():\n{body}\n    x = 0\n", encoding="utf-8")
    assert [f.split()[1] for f in long_functions(src, tmp_path)] == ["over"]
    assert line_count(src) == 2 * MAX_FUNCTION_LINES + 3
    assert product_files(FILE_ROOTS, SUFFIXES), "no product files found"
    assert any(p.suffix == ".cuh" for p in product_files(FILE_ROOTS, SUFFIXES))
