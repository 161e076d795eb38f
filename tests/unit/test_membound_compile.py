"""Every valid add_rmsnorm / bias_gelu knob combination compiles through NVRTC, with no spills.

CPU-only: CuPy's NVRTC compiles to a cubin without a GPU. For sm_90a (H200), sm_80 (A100) and
sm_89 (L40S) every dtype x BLOCK_SIZE x MEMORY_PIPELINING x fusion that check() accepts is built
(add_rmsnorm's source depends on the row length too: the default shapes, plus the long-row re-read
path), identical sources are compiled once, and ptxas' report must show no spills and no stack.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC is not importable")

from kernels.add_rmsnorm import SPEC as RMS  # noqa: E402
from kernels.bias_gelu import SPEC as GELU  # noqa: E402
from kernels.nvrtc_check import compile_cubin  # noqa: E402
from kernels.spec import (
    DeviceLimits,  # noqa: E402
    render_task,
    violations_of,
)
from tests.unit.compile_cover import compile_problems, covering, switch_values  # noqa: E402

LIMITS = {
    "sm_90a": DeviceLimits((9, 0), 132, 232448, 233472, profile="h200"),
    "sm_80": DeviceLimits((8, 0), 108, 166912, 167936, profile="a100"),
    "sm_89": DeviceLimits((8, 9), 142, 101376, 102400, profile="l40s"),
}
SHAPES = {
    "add_rmsnorm": {"sm_90a": [{"m": 777, "n": 4096}, {"m": 777, "n": 2560}, {"m": 5, "n": 131072}],
                    "sm_80": [{"m": 777, "n": 2560}], "sm_89": [{"m": 777, "n": 4096}]},
    "bias_gelu": {"sm_90a": [{"m": 777, "n": 1000}], "sm_80": [{"m": 777, "n": 1000}],
                  "sm_89": [{"m": 777, "n": 1000}]},
}


def _variants(arch: str):
    limits = LIMITS[arch]
    seen: dict[str, tuple[str, object]] = {}
    for spec in (RMS, GELU):
        for shape in SHAPES[spec.name][arch]:
            long_row = shape["n"] > 65536
            for dtype in spec.dtypes:
                for bs in spec.block_size_options(limits, dtype):
                    if long_row and bs != "256":
                        continue
                    for st in spec.pipelining_options(limits, dtype, bs):
                        for fusion in (True, False):
                            task = SimpleNamespace(shape=shape, dtype=dtype, block_size=bs,
                                                   memory_pipelining=st, fusion=fusion)
                            if violations_of(spec, task, limits):
                                continue
                            build = render_task(spec, task, limits)
                            label = f"{spec.name} n={shape['n']} {dtype} {bs} st={st} fuse={int(fusion)}"
                            seen.setdefault(build.source_sha256, (label, build))
    return list(seen.values())


@pytest.mark.slow
@pytest.mark.parametrize("arch", list(LIMITS))
def test_every_variant_compiles_without_spills(arch: str) -> None:
    variants = _variants(arch)
    assert len(variants) >= 100

    problems = compile_problems(variants, arch, compile_cubin)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("arch", list(LIMITS))
def test_covering_set_compiles_without_spills(arch: str) -> None:
    """The fast suite's share of the sweep above: one variant per kernel, row length, dtype and code
    path (the sweep's every switch value among them)."""
    variants = _variants(arch)
    cover = covering(variants, lambda label: " ".join(label.split()[:3]))
    assert switch_values(cover) == switch_values(variants)
    assert len(cover) < len(variants)
    problems = compile_problems(cover, arch, compile_cubin)
    assert not problems, "\n".join(problems)


def test_pipelining_changes_the_generated_code() -> None:
    """MEMORY_PIPELINING is not a label. On the register path (sm_80) off and 2/3/4 rows in flight
    give different register counts (more rows in flight hold more registers); on Hopper's bulk ring
    the rows are in shared memory: one 16 KB slot per row in flight, a different cubin for each."""
    regs, cubins, smem = {}, {}, {}
    for st in (0, 2, 4):
        task = SimpleNamespace(shape={"m": 777, "n": 4096}, dtype="bf16", block_size="256",
                               memory_pipelining=st, fusion=True)
        b = render_task(RMS, task, LIMITS["sm_80"])
        rep = compile_cubin(b.source, "sm_80", b.options)
        assert rep.ok, rep.log
        regs[st] = rep.functions["add_rmsnorm"].registers
        bulk = render_task(RMS, task, LIMITS["sm_90a"])
        rep = compile_cubin(bulk.source, "sm_90a", bulk.options)
        assert rep.ok and not rep.spills, rep.log
        cubins[st], smem[st] = rep.cubin, bulk.launches[0].shared_mem_bytes
    assert regs[0] < regs[2] < regs[4], regs
    assert len(set(cubins.values())) == 3 and smem == {0: 16384, 2: 2 * 16384, 4: 4 * 16384}
