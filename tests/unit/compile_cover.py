"""Covering sets for the NVRTC compile tests: the exhaustive sweeps (every knob combination) are
marked slow; the fast suite compiles a covering set: for each kernel and dtype, variants chosen
until every value of every switch define (``#define NAME 0|1``: the ``#if`` branches a variant
takes) has been compiled at least once. Sizes (tiles, stage counts) change constants, not which
code is compiled."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_DEFINE = re.compile(r"^#define (\w+) (-?\d+)\s*$", re.M)


def switches(source: str) -> tuple[tuple[str, str], ...]:
    """The 0/1 defines of a generated source, sorted: the branches its ``#if``s take."""
    return tuple(sorted((k, v) for k, v in _DEFINE.findall(source) if v in ("0", "1")))


def covering(variants: Iterable[tuple[str, Any]], path_of: Callable[[str], str]) -> list[tuple[str, Any]]:
    """A greedy cover: within each group ``path_of(label)`` (kernel and dtype), the variant that sets
    the most switch values not yet covered, until the group's every switch value is."""
    groups: dict[str, list[tuple[str, Any, set[tuple[str, str]]]]] = {}
    for label, build in variants:
        groups.setdefault(path_of(label), []).append((label, build, set(switches(build.source))))
    chosen = []
    for members in groups.values():
        missing = set().union(*(sw for _, _, sw in members))
        first = True
        while missing or first:
            label, build, sw = max(members, key=lambda m: len(m[2] & missing))
            chosen.append((label, build))
            missing -= sw
            first = False
    return chosen


def switch_values(variants: Iterable[tuple[str, Any]]) -> set[tuple[str, str]]:
    """Every (define, value) pair any of the variants' sources sets."""
    return {kv for _, b in variants for kv in switches(b.source)}


def compile_problems(variants: list[tuple[str, Any]], arch: str, compile_cubin: Callable[..., Any]) -> list[str]:
    """Compile every variant (threads: NVRTC releases the GIL) and list what failed, spilled or has a
    stack frame, per function of each build."""
    def one(item):
        label, build = item
        return label, build, compile_cubin(build.source, arch, build.options)

    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(one, variants))
    problems = []
    for label, build, rep in results:
        if not rep.ok:
            problems.append(f"{label}: compile failed for {arch}:\n{rep.log[-1500:]}")
            continue
        for fn in build.functions:
            r = rep.functions.get(fn)
            if r is None:
                problems.append(f"{label}: no ptxas report for {fn}")
            elif r.spill_store_bytes or r.spill_load_bytes or r.stack_frame_bytes:
                problems.append(f"{label}: {fn} spills ({r.spill_store_bytes} B stores, {r.spill_load_bytes} B "
                                f"loads, {r.stack_frame_bytes} B stack, {r.registers} registers)")
    return problems
