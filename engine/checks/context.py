"""Everything a check reads, behind one injectable object, so tests fake NVML, files and env.

The real context reads the machine: ``engine.nvml`` (NVML never creates a CUDA context), files under
``/``, ``os.environ``, subprocesses. CUDA-side facts (CuPy, runtime, NVRTC) come from package
metadata and from a short subprocess (``engine.checks.cuda_probe``): the calling process never
creates a CUDA context. ``engine.checks.fakes`` has the fakes the tests use.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.errors import InputError
from engine.safe_files import read_bytes

SYSTEM_FILE_BYTES = 4 * 2**20
"""The most read of one system file (/proc/modules is tens of KiB)."""


class FileSystem(Protocol):
    """The few file operations the checks need; paths are absolute ('/proc/modules')."""

    def read_text(self, path: str) -> str | None: ...
    def listdir(self, path: str) -> list[str] | None: ...
    def exists(self, path: str) -> bool: ...


class RealFS:
    """The machine's files, optionally under another root (a mounted image, a test tree)."""

    def __init__(self, root: str = "/") -> None:
        self.root = Path(root)

    def _p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read_text(self, path: str) -> str | None:
        """A system file's text (/proc/meminfo, /proc/modules: regular files without a size), read
        through ``engine.safe_files`` to ``SYSTEM_FILE_BYTES``; None when it cannot be read."""
        try:
            return read_bytes(self._p(path), "system file", SYSTEM_FILE_BYTES).decode("utf-8", errors="replace")
        except InputError:
            return None

    def listdir(self, path: str) -> list[str] | None:
        try:
            return sorted(os.listdir(self._p(path)))
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return self._p(path).exists()


class RealNvml:
    """engine.nvml and engine.nvml_health with every failure turned into None, so a check never sees an exception."""

    def status(self) -> tuple[bool, str | None, str | None]:
        """(NVML initialised, problem, fix). True even when it sees no GPU."""
        from engine import nvml
        from engine.errors import BackendUnavailable

        try:
            nvml.init()
        except BackendUnavailable as exc:
            return False, exc.message, exc.fix
        return True, None, None

    def _call(self, name: str, *args: Any) -> Any:
        from engine import nvml, nvml_health
        from engine.errors import BackendUnavailable

        try:
            return getattr(nvml_health if hasattr(nvml_health, name) else nvml, name)(*args)
        except BackendUnavailable:
            return None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # driver_version, cuda_driver_version, nvml_library_version, device_count, devices,
        # persistence_mode, ecc_uncorrectable, retired_pages, remapped_rows, clocks_event_mask,
        # power_limits, pcie_link, temperatures, mig_mode, compute_mode, gpu_processes
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self._call(name, *args)


def safe_which(name: str) -> str | None:
    """``engine.programs.find_program``: PATH's absolute folders only, so that a relative entry ('.',
    or an empty one) never finds, and the checks never run, a program of the current directory's."""
    from engine.programs import find_program

    return find_program(name)


def run_command(argv: list[str], timeout_s: float = 10.0) -> tuple[int, str] | None:
    """(exit code, stdout + stderr), or None when the program is missing or hangs. A bare name is
    looked up with ``safe_which``."""
    exe = argv[0] if os.sep in argv[0] else safe_which(argv[0])
    if exe is None:
        return None
    try:
        cp = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cp.returncode, (cp.stdout or "") + (cp.stderr or "")


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def dists_installed(prefix: str) -> dict[str, str]:
    """Installed distributions whose normalised name starts with ``prefix`` -> version."""
    out = {}
    for d in importlib.metadata.distributions():
        # typeshed declares get() from 3.12 on; the object is an email Message, which has it on every version
        name = (d.metadata.get("Name") or "").lower().replace("_", "-")  # type: ignore[attr-defined]
        if name.startswith(prefix):
            out[name] = d.version
    return out


def module_origin(name: str) -> str | None:
    """Where ``import name`` would load from, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


def disk_free_bytes(path: str) -> int | None:
    """Free bytes on the filesystem holding ``path`` (or its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def is_writable(path: str) -> bool:
    """Can the cockpit create files in ``path`` (creating the directory if it is missing)?"""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(p, os.W_OK | os.X_OK)


def wheel_lib_dirs() -> list[str]:
    """lib folders of NVIDIA's pip wheels (nvidia/*/lib, nvidia/cu13/lib), which CuPy also searches."""
    spec = importlib.util.find_spec("nvidia")
    out: list[str] = []
    for base in (spec.submodule_search_locations or []) if spec else []:
        for lib in sorted(Path(base).glob("*/lib")):
            out.append(str(lib))
    return out


def cockpit_dirs() -> dict[str, str]:
    from engine.paths import cache_dir, config_dir, store_path

    return {"kernel cache": str(cache_dir()), "results store": str(store_path().parent),
            "config": str(config_dir())}


@dataclass
class CheckContext:
    """The inputs of every check. Each field defaults to the real machine; tests replace them."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    """Environment variables."""
    fs: FileSystem = field(default_factory=RealFS)
    """/proc, /dev, /sys and library folders."""
    nvml: Any = field(default_factory=RealNvml)
    """NVML facade: status(), driver_version(), devices(), the health queries; None = unsupported."""
    run: Callable[..., tuple[int, str] | None] = run_command
    """Runs a program: (argv, timeout_s) -> (exit code, output) or None when it cannot run."""
    which: Callable[[str], str | None] = safe_which
    """PATH lookup (absolute folders only)."""
    euid: int = field(default_factory=lambda: os.geteuid() if hasattr(os, "geteuid") else -1)
    """Effective user id (0 = root; -1 = unknown)."""
    disk_free: Callable[[str], int | None] = disk_free_bytes
    """Free bytes for a path."""
    writable: Callable[[str], bool] = is_writable
    """Whether the cockpit can write into a directory."""
    dist_version: Callable[[str], str | None] = dist_version
    """Installed version of a Python distribution (package metadata, no import)."""
    dists: Callable[[str], dict[str, str]] = dists_installed
    """Installed distributions by name prefix."""
    module_origin: Callable[[str], str | None] = module_origin
    """File a module would be imported from, without importing it."""
    lib_dirs: Callable[[], list[str]] = wheel_lib_dirs
    """Extra library folders (NVIDIA wheels)."""
    cuda_probe: Callable[[str, bool], dict[str, Any] | None] | None = None
    """(arch, run_on_gpu) -> facts from a CuPy subprocess; None -> engine.checks.cuda_probe.probe."""
    dirs: Mapping[str, str] = field(default_factory=cockpit_dirs)
    """The cockpit's own folders that must be writable: label -> path."""
    profile_name: str | None = None
    """The profile asked for with --profile (None: detect from the device)."""
    profiles: Any = None
    """A ProfileSet; None loads the built-in and user profiles when a check first needs them."""
    python: str = sys.executable
    """Interpreter for probe subprocesses."""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """Compute a fact once per context (several checks share NVML answers and the probe)."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def nvml_status(self) -> tuple[bool, str | None, str | None]:
        return self.memo("nvml_status", self.nvml.status)

    def driver_ok(self) -> bool:
        return self.nvml_status()[0]

    def devices(self) -> list[Any]:
        """NVML's devices ([] without a driver)."""
        return self.memo("devices", lambda: (self.nvml.devices() or []) if self.driver_ok() else [])

    def profile_set(self) -> Any:
        if self.profiles is None:
            from engine.profiles import load_profiles

            self.profiles = load_profiles()
        return self.profiles

    def probe(self, arch: str, run_on_gpu: bool) -> dict[str, Any] | None:
        def go() -> dict[str, Any] | None:
            if self.cuda_probe is not None:
                return self.cuda_probe(arch, run_on_gpu)
            from engine.checks.cuda_probe import probe

            return probe(arch, run_on_gpu, python=self.python)

        return self.memo(f"probe:{arch}:{run_on_gpu}", go)
