"""The Hopper kernel's source is assembled from parts (kernels/sm90/codegen.py): each consumer
schedule's header rendered where the kernel includes it, every part (each a header with its own
include guard) inlined once, no #include left for NVRTC, and every part among the files that key
tuned entries."""

from __future__ import annotations

import posixpath
import re

import pytest

from kernels.sm90 import codegen
from kernels.spec import KERNEL_DIR, render_task

_INCLUDE = re.compile(r'^#include (?:"([\w./]+)"|CONSUMER_BODY)', re.M)


def _parts() -> set[str]:
    """Every file the rendered sources read, following the #includes from the kernel's files."""
    seen: set[str] = set()
    todo = [*codegen.HEADERS, codegen.SOURCE_FILE, *codegen.TRAILERS, *codegen.CONSUMERS.values()]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in codegen.GENERATED:
            continue
        folder = name.rpartition("/")[0]
        text = (KERNEL_DIR / name).read_text(encoding="utf-8")
        todo += [posixpath.normpath(f"{folder}/{m[1]}" if folder else m[1]) for m in _INCLUDE.finditer(text) if m[1]]
    return seen


def _code(name: str) -> str:
    """A part's code: its text after its last #include (or its header comment)."""
    text = (KERNEL_DIR / name).read_text(encoding="utf-8")
    last = list(re.finditer(r"^#include [^\n]*\n", text, re.M))
    return text[last[-1].end():] if last else text.split("\n\n", 1)[1]


def _guard(name: str) -> str:
    """A header's include guard (its first #ifndef)."""
    m = re.search(r"^#ifndef (\w+)\n#define \1\n", (KERNEL_DIR / name).read_text(encoding="utf-8"), re.M)
    assert m, f"{name} has no include guard"
    return m[1]


@pytest.mark.parametrize("pingpong", [False, True], ids=["cooperative", "pingpong"])
def test_each_schedule_renders_its_own_consumers_with_every_part_once(pingpong: bool) -> None:
    src = codegen.render_source("128x128", 4, "bf16", pingpong=pingpong)
    assert not re.search(r"^\s*#\s*include", src, re.M)
    mine, other = codegen.CONSUMERS[pingpong], codegen.CONSUMERS[not pingpong]
    assert (KERNEL_DIR / mine).read_text(encoding="utf-8").splitlines()[0] in src
    assert (KERNEL_DIR / other).read_text(encoding="utf-8").splitlines()[0] not in src
    headers = _parts() - {other, codegen.SOURCE_FILE, *codegen.GENERATED}
    assert {"sm90/mainloop.cuh", "sm90/epilogue_write.cuh", "sm90/streamk_fixup.cuh", "sm90/producer.cuh",
            "vec16.cuh", "mbarrier.cuh"} <= headers
    for name in headers:
        assert src.count(f"#define {_guard(name)}\n") == 1, name
        assert src.count(_code(name)) == 1, name


def test_every_part_the_source_reads_keys_the_tuned_entries() -> None:
    """A file part by its name, a generated part by the module that writes it."""
    generated = {f"sm90/{gen.__module__.rpartition('.')[2]}.py" for gen in codegen.GENERATED.values()}
    assert (_parts() - set(codegen.GENERATED)) | generated <= set(codegen.SOURCE_FILES)
    assert "sm90/wgmma_table.py" in generated


def test_the_generated_wgmma_table_has_every_width_once() -> None:
    """Each width's wrapper takes N / 2 accumulators named %0 .. %(N/2 - 1) in the template, the
    widths every build uses are defined unconditionally and the others only for their WG_N, and
    WGMMA is named exactly once per branch (the compile tests build every tile with it)."""
    from kernels.sm90 import wgmma_table

    text = wgmma_table.table()
    lines = text.splitlines()
    for n in (*wgmma_table.WIDTHS, *wgmma_table.BUILD_WIDTHS):
        nacc = n // 2
        acc = [ln for ln in lines if ln.startswith(f"#define WG_ACC_{nacc} ")]
        regs = [ln for ln in lines if ln.startswith(f"#define WG_R{nacc} ")]
        assert len(acc) == len(regs) == 1, n
        assert acc[0].count('"+f"(d[') == nacc and f"d[{nacc - 1}]" in acc[0] and f"d[{nacc}]" not in acc[0]
        assert regs[0].endswith(f'%{nacc - 1}"') and regs[0].count("%") == nacc
        assert text.count(f"DEFINE_WGMMA({n}, {nacc}, {nacc}, {nacc + 1}, {nacc + 2},") == 1
        guard = f"WG_N == {n}"
        assert (guard in text) == (n != wgmma_table.DEFAULT_WIDTH)
    assert text.count("#define WGMMA ") == len(wgmma_table.BUILD_WIDTHS) + len(wgmma_table.WIDTHS)
    assert text.count("#else") == 1 and text.rstrip().endswith("#endif")


def test_the_mbarrier_helpers_stand_once_in_every_kernel_that_uses_them() -> None:
    """kernels/mbarrier.cuh is pasted where the Hopper GEMM, the decode path's W ring and
    add_rmsnorm's row ring include it: each rendered source defines mbar_wait once and hands NVRTC
    no #include; the file keys each spec's tuned entries."""
    from engine.planner import plan
    from engine.profiles import load_profiles
    from engine.task import TaskSpec
    from kernels import get_spec
    from kernels.spec import DeviceLimits

    profile = load_profiles().get("h200")
    lim = DeviceLimits.from_profile(profile)
    tasks = (TaskSpec(kernel="gemm_residual", shape={"m": 8192, "n": 2560, "k": 2560}),
             TaskSpec(kernel="gemm_residual", shape={"m": 16, "n": 8192, "k": 8192}),
             TaskSpec(kernel="add_rmsnorm"))
    for task in tasks:
        spec = get_spec(task.kernel)
        src = render_task(spec, plan(task, profile).task, lim).source
        assert src.count("void mbar_wait(") == 1 and "\n#include" not in src, task.shape
        assert "mbarrier.cuh" in spec.source_files
