"""The import graph of engine/, kernels/ and tui/: no cycles, and no import up a layer.

Every ``import`` and ``from ... import`` counts, at module level or inside a function (an import
moved into a function still ties the two modules together); only those under ``if TYPE_CHECKING:``
are left out, as they never run. Layers, top to bottom: tui -> engine -> kernels, profiles. A
module's parent packages, which Python imports on the way, are not edges: a package's
``__init__`` importing its own modules is not a cycle between rooms."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tui", "engine", "kernels", "profiles")
LAYER = {"tui": 2, "engine": 1, "kernels": 0, "profiles": 0}
"""A module may import its own layer or one below, never one above."""

Edges = dict[str, list[tuple[str, int]]]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                    isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
                out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _imported(module: str, is_package: bool, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(dotted name, line) of everything ``module`` imports, submodules named in a ``from`` too."""
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([node.module] if node.module else []))
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Edges:
    """Module -> [(module it imports, line)], both within ``packages`` under ``root``; an import
    is resolved to the longest module name that exists (``from engine import plan`` -> ``engine``,
    ``from engine.checks import arch`` -> ``engine.checks.arch``)."""
    paths = {_module_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    graph: Edges = {}
    for module, path in paths.items():
        edges = set()
        for name, line in _imported(module, path.name == "__init__.py", ast.parse(path.read_text())):
            parts = name.split(".")
            while parts and ".".join(parts) not in paths:
                parts.pop()
            target = ".".join(parts)
            if target and target != module:
                edges.add((target, line))
        graph[module] = sorted(edges)
    return graph


def cycles(graph: Edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    succ = {m: sorted({t for t, _ in edges}) for m, edges in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in succ:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            nexts = succ.get(v, [])
            if i < len(nexts):
                work.append((v, i + 1))
                w = nexts[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return sorted(found)


def up_a_layer(graph: Edges) -> list[str]:
    """'module:line -> target' for each import of a layer above the importer's."""
    return [f"{m}:{line} -> {t}" for m, edges in graph.items() for t, line in edges
            if LAYER[t.split(".")[0]] > LAYER[m.split(".")[0]]]


def _describe(graph: Edges, comp: list[str]) -> str:
    inside = set(comp)
    return "\n".join(f"  {m}:{line} -> {t}" for m in comp for t, line in graph[m] if t in inside)


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles (move the shared piece into its own module):\n" + "\n".join(
        f"{' <-> '.join(c)}\n{_describe(graph, c)}" for c in found)


def test_no_import_up_a_layer():
    """engine/ is a library: it imports no front end (the cockpit and the CLI live in tui/), and
    kernels/ and profiles/ import neither engine/ nor tui/."""
    bad = up_a_layer(import_graph())
    assert not bad, "imports up a layer (tui -> engine -> kernels, profiles):\n" + "\n".join(bad)


def test_the_engines_public_names_come_from_below_the_front_ends():
    """``engine``'s lazily loaded names (``_EXPORTS``: module names as text, which the graph does not
    see) name modules of the engine or below, never of a front end."""
    import engine

    modules = {where.partition(":")[0] for where in engine._EXPORTS.values()}
    assert modules and all(LAYER[m.split(".")[0]] <= LAYER["engine"] for m in modules), modules


def test_the_graph_sees_function_level_imports_and_skips_type_checking(tmp_path):
    """The checks above are not vacuous: a cycle closed by an import inside a function is found,
    as is an import up a layer; one under ``if TYPE_CHECKING:`` is not an edge."""
    (tmp_path / "engine").mkdir()
    (tmp_path / "tui").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "tui" / "__init__.py").write_text("")
    (tmp_path / "engine" / "a.py").write_text("from engine.b import B\n")
    (tmp_path / "engine" / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "engine" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine.a import A\n"
        "def g():\n    import tui\n")
    (tmp_path / "engine" / "d.py").write_text("from engine import c\n")
    graph = import_graph(tmp_path, ("engine", "tui"))
    assert cycles(graph) == [["engine.a", "engine.b"]]
    assert graph["engine.c"] == [("tui", 5)]
    assert graph["engine.d"] == [("engine", 1), ("engine.c", 1)]
    assert up_a_layer(graph) == ["engine.c:5 -> tui"]


def test_the_product_graph_is_read():
    graph = import_graph()
    assert len(graph) > 150 and sum(map(len, graph.values())) > 500
    assert any(t == "engine.tune_worker" for t, _ in graph["engine.worker"])
