"""Names a command filters or judges by (``--kernel``, ``--profile``) must be known: a typo that
listed nothing and exited 0 now exits 2 with the list of known names (issue 47)."""

from __future__ import annotations

from typing import Any


def known_kernel(name: str, store: Any = None) -> str:
    """``name`` when it is a kernel here (built-in or user) or one the store has runs of."""
    from engine import InputError, kernel_names

    known = list(dict.fromkeys([*kernel_names(), *(store.distinct("kernel") if store is not None else [])]))
    if name not in known:
        raise InputError(f"kernel={name}: unknown kernel; known kernels: {', '.join(known)}",
                         fix="tui kernels lists them")
    return name


def known_profile(name: str, store: Any = None) -> str:
    """The profile ``name`` names (an alias gives its profile's name), or a name the store has runs
    against (a user profile since deleted); else InputError listing the known profiles."""
    from engine import load_profiles

    if store is not None and name in store.distinct("profile"):
        return name
    return load_profiles().get(name).name
