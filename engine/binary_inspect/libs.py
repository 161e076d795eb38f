"""The shared libraries a binary needs (ldd), where a missing one may be found, and which package
provides it; and the CUDA runtime it links against the CUDA version the driver supports.

ldd asks the system's own dynamic loader to list the libraries, the binary's own interpreter is
not used and no code of the binary runs; it is given a timeout all the same.
"""

from __future__ import annotations

import glob
import os
import re
import site
import subprocess
import sys
from pathlib import Path

from engine.binary_inspect.compat import DRIVER_FOR_CUDA, parse_version
from engine.binary_inspect.model import CudaRuntime, Finding, Library
from engine.programs import find_program
from engine.text_safety import visible

LDD_TIMEOUT_S = 20.0
MAX_CANDIDATES = 5

_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(not found|\S+)(?:\s+\(0x[0-9a-f]+\))?\s*$")

PACKAGES: dict[str, tuple[str | None, str]] = {
    "libcudart": ("cuda-runtime", "cuda-cudart-{M}-{m}"),
    "libcublas": ("cublas", "libcublas-{M}-{m}"),
    "libcublasLt": ("cublas", "libcublas-{M}-{m}"),
    "libnvrtc": ("cuda-nvrtc", "cuda-nvrtc-{M}-{m}"),
    "libnvJitLink": ("nvjitlink", "libnvjitlink-{M}-{m}"),
    "libcufft": ("cufft", "libcufft-{M}-{m}"),
    "libcurand": ("curand", "libcurand-{M}-{m}"),
    "libcusparse": ("cusparse", "libcusparse-{M}-{m}"),
    "libcusolver": ("cusolver", "libcusolver-{M}-{m}"),
    "libcudnn": ("cudnn", "libcudnn9-cuda-{M}"),
    "libnccl": ("nccl", "libnccl2"),
    "libcupti": ("cuda-cupti", "cuda-cupti-{M}-{m}"),
    "libnvToolsExt": ("nvtx", "cuda-nvtx-{M}-{m}"),
    "libcuda": (None, "the NVIDIA driver's user-space library (libnvidia-compute-<driver> on Ubuntu, libcuda1 on Debian)"),
    "libnvidia-ml": (None, "the NVIDIA driver's user-space library (libnvidia-compute-<driver> on Ubuntu, libnvidia-ml1 on Debian)"),
}
"""Library stem -> (the nvidia-* pip wheel's name stem, the apt package in NVIDIA's CUDA repository,
{M}/{m} the CUDA major/minor). libcuda comes with the driver, never from pip."""

_ALWAYS_SUFFIXED = ("cudnn", "nccl")

_SONAME_CUDA_MAJOR = ("libcudart", "libcublas", "libcublasLt", "libnvrtc", "libnvJitLink", "libcupti")
"""Libraries whose soname number is the CUDA major version (libcublas.so.12 is CUDA 12)."""


def run_ldd(path: Path) -> tuple[list[Library], str | None]:
    """The libraries ldd lists for ``path`` and a note when it could not list them. ldd is found on
    PATH's absolute folders only (``engine.programs``) and given the file after ``--``, by its
    absolute path: ``./--version`` is a file, never an option, and ``./ldd`` never runs."""
    ldd = find_program("ldd")
    if ldd is None:
        return [], "ldd is not installed (package libc-bin): the libraries were not checked"
    try:
        out = subprocess.run([ldd, "--", os.path.abspath(path)], capture_output=True, text=True,
                             timeout=LDD_TIMEOUT_S, errors="replace", stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [], f"ldd did not answer within {LDD_TIMEOUT_S:g} s: the libraries were not checked"
    except OSError as exc:
        return [], f"ldd failed: {exc}"
    text = out.stdout + out.stderr
    if "not a dynamic executable" in text:
        return [], "ldd: not a dynamic executable here (statically linked, or built for another machine)"
    libs = parse_ldd(text)
    if out.returncode != 0 and not libs:
        return [], f"ldd failed: {visible(text.strip()[:200], one_line=True)}"
    return libs, None


def parse_ldd(text: str) -> list[Library]:
    """ldd's 'name => path (0x...)' and 'name => not found' lines (the loader and vdso skipped).
    Names and paths are kept visible (``engine.text_safety``): a binary names its libraries itself."""
    libs: dict[str, Library] = {}
    for line in text.splitlines():
        m = _LDD_LINE.match(line)
        if m is None:
            continue
        name, where = visible(m.group(1), one_line=True), visible(m.group(2), one_line=True)
        found = where != "not found"
        libs.setdefault(name, Library(name=name, path=where if found else None, found=found))
    return list(libs.values())


def _stem(soname: str) -> str:
    return soname.split(".so", 1)[0]


def _soname_number(soname: str) -> int | None:
    m = re.search(r"\.so\.(\d+)", soname)
    return int(m.group(1)) if m else None


def search_dirs(binary: Path, runpath: list[str]) -> list[Path]:
    """Folders where CUDA libraries usually are: the binary's own (its RUNPATH, ./lib, ../lib),
    the CUDA toolkits, the system's, conda's, and the nvidia-* wheels in site-packages."""
    origin = binary.resolve().parent
    dirs = [Path(p.replace("$ORIGIN", str(origin)).replace("${ORIGIN}", str(origin))) for p in runpath]
    dirs += [origin, origin / "lib", origin.parent / "lib", origin.parent / "lib64"]
    dirs += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*/lib64")) + sorted(glob.glob("/usr/local/cuda*/lib"))
             + sorted(glob.glob("/usr/local/cuda*/targets/*/lib")) + sorted(glob.glob("/opt/nvidia/*/lib*"))]
    dirs += [Path(p) for p in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                               "/usr/local/lib")]
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(Path(os.environ["CONDA_PREFIX"]) / "lib")
    sites = [*site.getsitepackages(), site.getusersitepackages(), *(p for p in sys.path if p.endswith("-packages"))]
    for sp in dict.fromkeys(sites):
        dirs += [Path(p) for p in sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib")))]
    return list(dict.fromkeys(dirs))


def candidates(soname: str, dirs: list[Path]) -> list[str]:
    """Folders in ``dirs`` that hold a file named ``soname`` (at most ``MAX_CANDIDATES``)."""
    out = []
    for d in dirs:
        try:
            if (d / soname).is_file():
                out.append(str(d))
        except OSError:
            continue
        if len(out) >= MAX_CANDIDATES:
            break
    return out


def wheel(pip_stem: str, cuda_major: int) -> str:
    """The nvidia-* wheel for a CUDA major version: CUDA 13's toolkit wheels dropped the -cuNN
    suffix (nvidia-cublas), cuDNN's and NCCL's kept it (nvidia-cudnn-cu13)."""
    if cuda_major >= 13 and pip_stem not in _ALWAYS_SUFFIXED:
        return f"nvidia-{pip_stem}"
    return f"nvidia-{pip_stem}-cu{cuda_major}"


def packages(soname: str, cuda_major: int | None) -> list[str]:
    """How to install ``soname``: pip wheel and apt package, for its CUDA major version (or for
    CUDA 12 and 13 when unknown); empty for libraries not known here."""
    stem = _stem(soname)
    if stem not in PACKAGES:
        return []
    pip_stem, apt = PACKAGES[stem]
    if pip_stem is None:
        return [apt]
    if stem in _SONAME_CUDA_MAJOR:
        cuda_major = _soname_number(soname) or cuda_major
    out = []
    for major in [cuda_major] if cuda_major else [12, 13]:
        out += [f"pip install {wheel(pip_stem, major)}",
                f"apt install {apt.format(M=major, m='<minor>')} (NVIDIA's CUDA repository)"]
    return out


def missing_findings(libs: list[Library], binary: Path, runpath: list[str], cuda_major: int | None) -> list[Finding]:
    """One finding per library the loader cannot find, with where it is and what provides it."""
    missing = [lib for lib in libs if not lib.found]
    if not missing:
        return []
    dirs = search_dirs(binary, runpath)
    out = []
    for lib in missing:
        lib.candidates = candidates(lib.name, dirs)
        lib.packages = packages(lib.name, cuda_major)
        if lib.candidates:
            fix = (f"it is in {', '.join(lib.candidates)}: run with LD_LIBRARY_PATH={lib.candidates[0]}"
                   f"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}, or add that folder to /etc/ld.so.conf.d/ and run "
                   "`sudo ldconfig`")
        elif lib.packages:
            fix = f"install it ({'; '.join(lib.packages)}), then add its folder to LD_LIBRARY_PATH"
        else:
            fix = ("no copy was found in the usual folders: install or rebuild the library, or add the folder "
                   "that holds it to LD_LIBRARY_PATH")
        out.append(Finding(id="libs.missing", severity="error", title=f"{lib.name} not found",
                           detail=f"the dynamic loader cannot find {lib.name}: {visible(binary.name, one_line=True)} will not start "
                                  "(error while loading shared libraries)",
                           fix=fix, rule="missing-shared-object"))
    return out


def runtime_info(needed: list[str], libs: list[Library], static: bool, built_with: tuple[int, int] | None,
                 driver_cuda: str | None) -> CudaRuntime:
    """The CUDA runtime the binary links: the libcudart in DT_NEEDED (its version from the file
    the loader resolves, libcudart.so.13.0.96), or a static one (the toolkit's version)."""
    soname = next((n for n in needed if n.startswith("libcudart.so")), None)
    built = f"{built_with[0]}.{built_with[1]}" if built_with else None
    if soname is None:
        return CudaRuntime(linkage="static" if static else "none", version=built if static else None,
                           built_with=built, driver_cuda=driver_cuda)
    version = None
    resolved = next((lib.path for lib in libs if lib.name == soname and lib.path), None)
    if resolved:
        m = re.search(r"libcudart\.so\.(\d+\.\d+(?:\.\d+)?)$", os.path.realpath(resolved))
        version = m.group(1) if m else None
    if version is None and (major := _soname_number(soname)) is not None:
        version = str(major)
    return CudaRuntime(linkage="shared", soname=soname, version=version, built_with=built, driver_cuda=driver_cuda)


def runtime_findings(rt: CudaRuntime) -> list[Finding]:
    """The runtime against the driver: a newer major version cannot run (insufficient driver); a
    newer minor runs (minor version compatibility), without the newer minor's driver features."""
    have = parse_version(rt.version) if rt.version and "." in rt.version else None
    major = have[0] if have else (int(rt.version) if rt.version and rt.version.isdigit() else None)
    if rt.linkage == "none" or major is None:
        return []
    what = f"CUDA runtime {rt.version} ({rt.soname or 'linked statically'})"
    driver = parse_version(rt.driver_cuda)
    min_driver = DRIVER_FOR_CUDA.get(major)
    need = f"a driver that supports CUDA {major}.x" + (f" (>= {min_driver})" if min_driver else "")
    if driver is None:
        return [Finding(id="runtime.driver-unknown", severity="info", title=f"needs {need}",
                        detail=f"it uses the {what}; no NVIDIA driver answers here, so the driver's CUDA version "
                               "could not be compared",
                        fix="on the GPU machine, `nvidia-smi` shows the CUDA version the driver supports: it must "
                            f"be {major}.0 or newer",
                        rule="cuda-insufficient-driver")]
    if major > driver[0]:
        return [Finding(id="runtime.newer-than-driver", severity="error",
                        title=f"CUDA runtime {major} on a CUDA {rt.driver_cuda} driver",
                        detail=f"it uses the {what}; the driver supports CUDA {rt.driver_cuda}: it fails with "
                               "'CUDA driver version is insufficient for CUDA runtime version'",
                        fix=f"upgrade the driver to one that supports CUDA {major} (>= {min_driver or '?'}), or "
                            f"rebuild with a CUDA {driver[0]}.x toolkit",
                        rule="cuda-insufficient-driver")]
    if have is not None and major == driver[0] and have[1] > driver[1]:
        return [Finding(id="runtime.minor-newer-than-driver", severity="warn",
                        title=f"CUDA runtime {rt.version} on a CUDA {rt.driver_cuda} driver",
                        detail=f"it uses the {what}: it runs (minor version compatibility), but APIs and PTX that "
                               f"need a CUDA {have[0]}.{have[1]} driver fail",
                        fix=f"upgrade the driver to one that supports CUDA {have[0]}.{have[1]}, or ship SASS for "
                            "the GPU (no JIT)",
                        rule="cuda-insufficient-driver")]
    return []
