"""Every valid gemm_residual knob combination compiles through NVRTC, with no register spills.

Runs on a CPU-only machine: CuPy's NVRTC compiles to a cubin without a GPU. For each profile's
architecture (sm_90a H200, sm_80 A100, sm_89 L40S) it builds every dtype (bf16, fp16, fp32, tf32) x
BLOCK_SIZE x MEMORY_PIPELINING x fusion that the spec offers under that profile's limits, compiles
them in a thread pool (NVRTC releases the GIL), and checks ptxas' report for each function
(about 40 s on two idle cores).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC is not importable")

import tomllib  # noqa: E402

from kernels.gemm_residual import SPEC  # noqa: E402
from kernels.nvrtc_check import compile_cubin  # noqa: E402
from kernels.spec import (
    DeviceLimits,  # noqa: E402
    render_task,
    violations_of,
)
from tests.unit.compile_cover import compile_problems, covering, switch_values  # noqa: E402

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _limits(profile: str) -> DeviceLimits:
    data = tomllib.loads((PROFILES / f"{profile}.toml").read_text(encoding="utf-8"))
    major, minor = (int(x) for x in data["compute_capability"].split("."))
    return DeviceLimits((major, minor), data["sm_count"], data["shared_memory_per_block_bytes"],
                        data["shared_memory_per_sm_bytes"], data["registers_per_sm"],
                        data.get("max_threads_per_block", 1024), data["name"])


def _variants(limits: DeviceLimits):
    assert {"bf16", "fp16", "fp32", "tf32"} <= set(SPEC.dtypes)
    for dtype in SPEC.dtypes:
        for bs in SPEC.block_size_options(limits, dtype):
            for stages in SPEC.pipelining_options(limits, dtype, bs):
                for fusion in (True, False):
                    task = SimpleNamespace(shape={"m": 1571, "n": 2560, "k": 2560}, dtype=dtype,
                                           block_size=bs, memory_pipelining=stages, fusion=fusion)
                    assert violations_of(SPEC, task, limits) == [], (dtype, bs, stages)
                    yield f"{dtype} {bs} st={stages} fuse={int(fusion)}", render_task(SPEC, task, limits)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["h200", "a100-sxm-80gb", "l40s"])
def test_every_variant_compiles_without_spills(profile: str) -> None:
    limits = _limits(profile)
    variants = list(_variants(limits))
    assert len(variants) >= 40

    problems = compile_problems(variants, limits.arch, compile_cubin)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("profile", ["h200", "a100-sxm-80gb", "l40s"])
def test_covering_set_compiles_without_spills(profile: str) -> None:
    """The fast suite's share of the sweep above: one variant per dtype and code path (the sweep's
    every switch value among them), for each architecture."""
    variants = list(_variants(_limits(profile)))
    cover = covering(variants, lambda label: label.split()[0])
    assert switch_values(cover) == switch_values(variants)
    assert {label.split()[0] for label, _ in cover} == set(SPEC.dtypes)
    assert len(cover) < len(variants)
    problems = compile_problems(cover, _limits(profile).arch, compile_cubin)
    assert not problems, "\n".join(problems)
