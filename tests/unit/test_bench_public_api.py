"""bench/ on the public API: no bench module imports the engine's backends (``engine.backends``) or
a kernel path's internals (``kernels.sm90``, ``kernels.skinny`` and their modules
``kernels.gemm_residual_sm90`` / ``kernels.gemm_residual_skinny``). A probe plans through
``engine.plan`` or the kernel spec's ``plan`` and ``render`` (``kernels.spec.plan_or_raise``,
``render_task``) and reaches the GPU through the names ``engine`` exports. Every import counts,
at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = ("engine.backends", "kernels.sm90", "kernels.skinny", "kernels.gemm_residual_sm90",
            "kernels.gemm_residual_skinny")
"""Modules (and their submodules) a bench module may not import."""
NOT_YET = {"bench/kernel_span.py", "bench/launch_gap.py", "bench/skinny_probe.py", "bench/swap_probe.py"}
"""Research probes that still reach into the Hopper or decode planner (its tile tables, schedule
candidates, private default rules, the decode path's plan type). Each must still import an
internal, so an entry goes once its probe is moved onto the public API (the spec's ``plan`` and
``render``, ``kernels.gemm_residual_experiments`` for the Hopper path's forced choices); no new
module may join."""


def imported(tree: ast.AST) -> set[str]:
    """Every module name an import in ``tree`` names; ``from a import b`` gives a and a.b (b may be
    a module)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def internal_imports(path: Path) -> list[str]:
    names = imported(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return sorted(n for n in names if any(n == i or n.startswith(i + ".") for i in INTERNAL))


def bench_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "bench").rglob("*.py") if "__pycache__" not in p.parts)


def test_no_bench_module_imports_the_backends_or_a_kernel_paths_internals():
    found = {str(p.relative_to(ROOT)): bad for p in bench_modules() if (bad := internal_imports(p))}
    assert {k: v for k, v in found.items() if k not in NOT_YET} == {}, (
        "plan through engine.plan or the spec's plan/render; reach the GPU through engine's exports")
    assert set(found) >= NOT_YET, f"on the public API now: drop from NOT_YET {sorted(NOT_YET - set(found))}"


def test_the_scan_sees_every_form_of_import(tmp_path):
    src = tmp_path / "probe.py"
    src.write_text("import os\nfrom engine import plan\n\ndef f():\n    from kernels import sm90\n"
                   "    import engine.backends.cuda_timer as t\n    from kernels.skinny.planner import plan\n"
                   "    from kernels import gemm_residual_skinny as sk\n", encoding="utf-8")
    assert internal_imports(src) == ["engine.backends.cuda_timer", "kernels.gemm_residual_skinny", "kernels.skinny.planner",
                                     "kernels.skinny.planner.plan", "kernels.sm90"]
    assert len(bench_modules()) > 20
