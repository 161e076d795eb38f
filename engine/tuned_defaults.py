"""Defaults from tuned shapes: a table per profile of the knobs ``tui tune`` found fastest at a set of
shapes (``profiles/tuned/<profile>.toml``, written by ``tui tune --export``), from which a task that
nobody tuned takes the knobs of the nearest tuned shape of its class, where they fit.

The kernel's own rules stay the fallback (and the tuner's prior). The table is data: tune the shapes
again on a new GPU, driver or kernel and export, and the defaults follow. Only shapes on the same
side of the decode boundary (M <= 64) and with N and K each within ``MAX_RATIO`` count as near.

A table is one GPU model's: the profile in use picks it by name (a calibrated profile by the
datasheet profile it was measured against), and an entry measured on another model (its ``gpu`` not
matched by the profile's NVML name patterns, or another SM count) is never lent. A profile without a
table of its own (an A100, an L40S, a B200) gets the kernel's rules for its own figures, never another
model's tuned knobs. Where the knobs came from is said in one of three ways (``knobs_from``):
``engine.tuned_knobs``' TABLE_LABEL (this model's table), RULES_LABEL (the kernel's rules for this
profile) or TUNED_HERE_LABEL (the tuning cache: "tuned on this GPU")."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from engine.profiles import BUILTIN_DIR
from engine.tuned_knobs import TABLE_LABEL, TunedKnobs

TABLE_DIR = BUILTIN_DIR / "tuned"
MAX_RATIO = 2.0
"""N and K of a tuned shape must be within this factor of the task's to lend it their knobs."""
DECODE_M = 64


def table_name(profile: Any) -> str:
    """The name of the table a profile uses: its own, or for a calibrated profile the datasheet
    profile it was measured against (the same GPU model)."""
    base = getattr(profile, "base_profile", None)
    return str(base) if getattr(profile, "measured", False) and base else str(profile.name)


def same_model(entry: dict[str, Any], profile: Any) -> bool:
    """Whether a table entry was measured on the GPU model ``profile`` describes: its SM count equal
    and its GPU name matched by the profile's NVML name patterns (each where the entry records it)."""
    sm = entry.get("sm_count")
    if sm is not None and getattr(profile, "sm_count", None) is not None and int(sm) != int(profile.sm_count):
        return False
    gpu = entry.get("gpu")
    if gpu and getattr(profile, "nvml_name_patterns", None) and not profile.matches_device_name(str(gpu)):
        return False
    return True


@lru_cache(maxsize=16)
def table(profile: str, directory: Path = TABLE_DIR) -> tuple[dict[str, Any], ...]:
    """The entries of ``<directory>/<profile>.toml`` (an export of the tuning cache); () when the
    profile has none, the file cannot be read or it says it is another profile's (a default is never
    an error)."""
    from engine.errors import CockpitError
    from engine.tomlio import load_toml

    path = directory / f"{profile}.toml"
    if not path.is_file():
        return ()
    try:
        doc = load_toml(path, "tuned defaults")
    except CockpitError:
        return ()
    if str(doc.get("profile", profile)) != profile:
        return ()
    out = []
    for e in doc.get("entry") or []:
        if not isinstance(e, dict):
            continue
        try:
            shape = {k: int(v) for k, v in (part.split("=") for part in str(e["shape"]).split(","))}
            out.append({**e, "shape": shape})
        except (KeyError, ValueError):
            continue
    return tuple(out)


def nearest(task: Any, profile: Any, directory: Path = TABLE_DIR) -> TunedKnobs | None:
    """The knobs of the tuned shape nearest to the task's (same kernel, dtype and fusion; both decode
    or both not; N and K within ``MAX_RATIO``) in the table of ``profile``'s GPU model, by log
    distance with N and K counting double; None where no shape is near or the model has no table.
    ``profile``: a Profile (its model's table, entries of other models refused) or a table's name."""
    shape = task.shape
    if not {"m", "n", "k"} <= set(shape):
        return None
    name = profile if isinstance(profile, str) else table_name(profile)
    best: tuple[float, dict[str, Any]] | None = None
    for e in table(name, directory):
        if not isinstance(profile, str) and not same_model(e, profile):
            continue
        s = e["shape"]
        if (e.get("kernel") != task.kernel or e.get("dtype") != task.dtype.value
                or bool(e.get("fusion", True)) != bool(task.fusion) or not {"m", "n", "k"} <= set(s)):
            continue
        if (s["m"] <= DECODE_M) != (shape["m"] <= DECODE_M):
            continue
        rn, rk = abs(math.log(s["n"] / shape["n"])), abs(math.log(s["k"] / shape["k"]))
        if max(rn, rk) > math.log(MAX_RATIO):
            continue
        d = abs(math.log(s["m"] / shape["m"])) + 2 * (rn + rk)
        if best is None or d < best[0]:
            best = (d, e)
    if best is None:
        return None
    e = best[1]
    at = "x".join(str(e["shape"][d]) for d in ("m", "n", "k"))
    return TunedKnobs(block_size=str(e["block_size"]), memory_pipelining=int(e["memory_pipelining"]),
                      schedule=dict(e.get("schedule") or {}), shape=dict(e["shape"]),
                      label=f"{TABLE_LABEL.format(name=name)} (nearest {at})")
