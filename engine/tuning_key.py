"""How the tuning cache spells a shape in its keys: what the cache (``engine.tuning_cache``) looks up
by and what an import (``engine.tuning_import``) checks an entry against, in its own module so that
neither imports the other."""

from __future__ import annotations


def shape_key(shape: dict[str, int]) -> str:
    """A shape as the cache spells it: 'k=2560,m=8192,n=2560' (sorted names, so any order matches)."""
    return ",".join(f"{k}={int(v)}" for k, v in sorted(shape.items()))
