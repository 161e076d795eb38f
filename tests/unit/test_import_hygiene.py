"""The engine is headless: importing it (and building the headless CLI's parser, ``tui.cli``) must not
load textual, cupy or pynvml; the front ends reach the engine only through its public surface."""

import subprocess
import sys

CODE = """
import sys
import engine, engine.task, engine.profiles, engine.sol, engine.runner, engine.store, tui.cli.main
import engine.backends.select, engine.backends.sim, kernels
tui.cli.main.build_parser()
bad = [m for m in ("textual", "cupy", "pynvml") if m in sys.modules]
print(",".join(bad))
"""


def test_engine_import_loads_no_ui_no_cuda():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine import pulled in: {out.stdout.strip()}"


def _importers(root, top_modules, names):
    import ast

    found = []
    for d in top_modules:
        for path in (root / d).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                mods = []
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    mods = [node.module]
                if any(m.split(".")[0] in names for m in mods):
                    found.append(path.relative_to(root).as_posix())
                    break
    return sorted(set(found))


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]

CUPY_ALLOWED = {
    "engine/backends/cuda.py",        # the CUDA backend (runs only in the engine process)
    "engine/backends/cuda_convert.py",    # its dtype conversions
    "engine/backends/cuda_blas.py",       # its cuBLAS wrapper (peers, ceilings, bench)
    "engine/backends/cuda_timer.py",      # its timer (CUDA events, hold kernel, rest)
    "engine/backends/cuda_observers.py",  # its NVML sampling, validity and energy
    "engine/backends/cuda_stages.py",     # its compile, load, inputs and verify stages
    "engine/backends/cuda_peers.py",      # its peers
    "engine/backends/cuda_ceilings.py",   # the ceilings `tui calibrate` measures
    "engine/backends/tensormap.py",   # its TMA descriptor helper, imported by it alone
    "engine/backends/pdl.py",         # its launches with programmatic dependent launch
    "engine/checks/cuda_probe.py",    # a script the checks run in a subprocess, never imported
    "kernels/nvrtc_check.py",         # NVRTC compile check used by tests and tools (no GPU needed)
}


def test_only_the_cuda_backend_imports_cupy():
    assert set(_importers(ROOT, ["engine", "tui", "kernels"], {"cupy", "cupy_backends"})) <= CUPY_ALLOWED


def test_only_nvml_module_imports_pynvml():
    assert _importers(ROOT, ["engine", "tui", "kernels"], {"pynvml"}) == ["engine/nvml.py"]


def _tui_engine_imports():
    """(file, module) for every import in tui/ that reaches the engine or the kernels: by an
    import statement or by importlib with a literal name."""
    import ast

    found = []
    for path in (ROOT / "tui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in
                  ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)):
                mods = [str(node.args[0].value)]
            found += [(path.relative_to(ROOT).as_posix(), m) for m in mods
                      if m.split(".")[0] in ("engine", "kernels")]
    return found


def test_tui_talks_only_to_the_engines_public_surface():
    """The cockpit imports names from ``engine`` itself, never an engine module or the kernels."""
    bad = [(f, m) for f, m in _tui_engine_imports() if m != "engine"]
    assert not bad, f"tui/ reaches past engine's public surface: {bad}"


def test_public_surface_names_resolve():
    import engine

    missing = [n for n in engine.__all__ if n != "__version__" and not hasattr(engine, n)]
    assert not missing
    used = set()
    import ast

    for path in (ROOT / "tui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "engine":
                used |= {a.name for a in node.names}
    assert used <= set(engine.__all__), used - set(engine.__all__)


def test_type_checkers_see_the_same_public_surface():
    """``engine/__init__.py`` names its public surface twice: ``_EXPORTS`` (loaded on use) and the
    imports under ``if TYPE_CHECKING:`` (so that mypy checks the front ends' calls); each name
    imported there must come from the module ``_EXPORTS`` names."""
    import ast

    import engine

    seen = {}
    for node in ast.walk(ast.parse((ROOT / "engine" / "__init__.py").read_text())):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.dump(imp)
                for a in imp.names:
                    seen[a.asname or a.name] = f"{imp.module}:{a.name}"
    wanted = {name: f"{where.partition(':')[0]}:{where.partition(':')[2] or name}"
              for name, where in engine._EXPORTS.items()}
    wanted.update({m: f"engine:{m}" for m in engine._MODULES})
    assert seen == wanted
