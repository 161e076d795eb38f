"""No module-level ``*_DEFAULT`` switch in kernels/ that an experiment flips: a choice a probe or a
test varies is an explicit parameter of the plan (``kernels.sm90.planner.plan``'s keywords, the
decode path's ``plan(a_smem_rule=...)``) or a task's schedule, and a fixed value is a constant
named for what it is (``PROMOTE_K_BLOCKS``, ``BULK_RING_STAGES``). No test or bench module sets a
``*_DEFAULT`` attribute (``monkeypatch.setattr(module, "X_DEFAULT", ...)`` or ``module.X_DEFAULT =``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def default_switches(tree: ast.AST) -> list[str]:
    """Module-level names ending in ``_DEFAULT`` assigned in ``tree``."""
    out = []
    for node in getattr(tree, "body", []):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        out += [t.id for t in targets if isinstance(t, ast.Name) and t.id.endswith("_DEFAULT")]
    return out


def default_flips(tree: ast.AST) -> list[str]:
    """``setattr(x, "..._DEFAULT", ...)`` calls (monkeypatch's too) and ``x.<...>_DEFAULT = ...``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "setattr":
            out += [a.value for a in node.args[1:2] if isinstance(a, ast.Constant) and str(a.value).endswith("_DEFAULT")]
        if isinstance(node, ast.Assign):
            out += [t.attr for t in node.targets if isinstance(t, ast.Attribute) and t.attr.endswith("_DEFAULT")]
    return out


def parsed(folder: str) -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p)))
            for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts]


def test_kernels_have_no_default_switches():
    found = {str(p.relative_to(ROOT)): names for p, t in parsed("kernels") if (names := default_switches(t))}
    assert found == {}


def test_no_test_or_bench_flips_a_default():
    found = {str(p.relative_to(ROOT)): names for folder in ("tests", "bench") for p, t in parsed(folder)
             if (names := default_flips(t))}
    assert found == {}


def test_the_scans_see_a_switch_and_a_flip():
    tree = ast.parse('X_DEFAULT = True\nY: int = 4\n\ndef f(monkeypatch, mod):\n'
                     '    monkeypatch.setattr(mod, "X_DEFAULT", False)\n    mod.Z_DEFAULT = 1\n    setattr(mod, "Y", 2)\n')
    assert default_switches(tree) == ["X_DEFAULT"]
    assert sorted(default_flips(tree)) == ["X_DEFAULT", "Z_DEFAULT"]
