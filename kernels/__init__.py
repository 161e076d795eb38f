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


_USER: dict[str, KernelSpec] = {}
"""User kernels loaded in this process (``engine.user_kernels`` reads their spec files)."""


def kernel_names() -> list[str]:
    return [*_REGISTRY, *_USER]


def builtin_names() -> list[str]:
    return list(_REGISTRY)


def builtin_modules() -> list[str]:
    """The modules that hold the built-in specs (``get_spec`` imports them on first use)."""
    return sorted({module for module, _ in _REGISTRY.values()})


def register_user(spec: KernelSpec) -> None:
    """Make a user kernel's spec known by its name (ValueError where a built-in has that name)."""
    if spec.name in _REGISTRY:
        raise ValueError(f"{spec.name!r} is the name of a built-in kernel: pick another name")
    _USER[spec.name] = spec


def get_spec(name: str) -> KernelSpec:
    """The spec for ``name``; KeyError listing the known kernels when unknown."""
    if name in _USER:
        return _USER[name]
    if name not in _REGISTRY:
        raise KeyError(f"unknown kernel {name!r}; known kernels: {', '.join(kernel_names())}")
    module, attr = _REGISTRY[name]
    return getattr(importlib.import_module(module), attr)
