"""Choosing a backend without creating a CUDA context: NVML says whether a driver and a device
answer, importlib says whether CuPy is installed (without importing it)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from engine.errors import BackendUnavailable


@dataclass
class BackendChoice:
    name: str
    """'cuda' or 'sim'."""
    notice: str | None = None
    """Why the choice differs from the request (e.g. auto fell back to the simulated device)."""
    device_name: str | None = None


def cupy_installed() -> bool:
    return importlib.util.find_spec("cupy") is not None


def probe_cuda(device: int = 0) -> BackendChoice:
    """A usable CUDA backend, or BackendUnavailable naming the problem and the fix."""
    from engine import nvml

    ok, problem, fix = nvml.probe()
    if not ok:
        raise BackendUnavailable(problem or "no usable GPU", fix=fix)
    n = nvml.device_count()
    if device >= n:
        raise BackendUnavailable(f"GPU index {device} does not exist: NVML sees {n} device(s)",
                                 fix=f"use --device 0..{n - 1}")
    if not cupy_installed():
        raise BackendUnavailable(
            "CuPy is not installed, so kernels cannot be compiled or launched",
            fix="pip install 'sol-cockpit[cuda13]' (driver >= 580) or 'sol-cockpit[cuda12]' (driver >= 525)",
        )
    info = nvml.device_info(device)
    return BackendChoice(name="cuda", device_name=info.name if info else None)


def choose_backend(requested: str, device: int = 0) -> BackendChoice:
    """Resolve 'auto' | 'cuda' | 'sim'. 'cuda' raises BackendUnavailable; 'auto' falls back to
    the simulated device and says why in ``notice``."""
    if requested == "sim":
        return BackendChoice(name="sim")
    if requested == "cuda":
        return probe_cuda(device)
    try:
        return probe_cuda(device)
    except BackendUnavailable as exc:
        return BackendChoice(
            name="sim",
            notice=f"no usable GPU ({exc.message}); using the SIMULATED device. Fix: {exc.fix}",
        )
