"""Kernels as data: ``<name>.cu`` templates plus ``<name>.py`` specs. No UI, no I/O, no cupy."""

from __future__ import annotations

import importlib

from kernels.spec import KernelSpec

# name -> (module, attribute holding the spec)
_REGISTRY = {
    "gemm_residual": ("kernels.gemm_residual_auto", "SPEC"),
    "gemm_residual_mma": ("kernels.gemm_residual_auto", "PORTABLE_SPEC"),
    "add_rmsnorm": ("kernels.add_rmsnorm", "SPEC"),
    "bias_gelu": ("kernels.bias_gelu", "SPEC"),
}


def kernel_names() -> list[str]:
    return list(_REGISTRY)


def get_spec(name: str) -> KernelSpec:
    """The spec for ``name``; KeyError listing the known kernels when unknown."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown kernel {name!r}; known kernels: {', '.join(_REGISTRY)}")
    module, attr = _REGISTRY[name]
    return getattr(importlib.import_module(module), attr)
