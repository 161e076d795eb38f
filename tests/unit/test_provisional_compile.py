"""Each built-in kernel's default build compiles through NVRTC for every provisional profile's
architecture (sm_100 for B200/GB200, sm_120 for the RTX 5090, sm_89, sm_86, sm_80 and sm_90a for the
other datasheet-only boards), with no spill, no stack frame and no launch bound ptxas has to ignore.

CPU-only: CuPy's NVRTC compiles to a cubin without a GPU. A build is what the planner chooses by
default on that profile (the kernel's rules, no tuned table), for every dtype, at the kernel's
default shape and, for the GEMM, at a decode shape too (the skinny split-K path); the target is the
backend's (``DeviceLimits.arch``). About a minute on two cores."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC is not importable")

from engine.planner import plan  # noqa: E402
from kernels import builtin_names, get_spec  # noqa: E402
from kernels.nvrtc_check import compile_cubin  # noqa: E402
from kernels.spec import DeviceLimits  # noqa: E402
from tests.unit.test_provisional_profiles import PROFILES, PROVISIONAL, _tasks  # noqa: E402

IGNORED_BOUND = "will be ignored"
"""ptxas' warning for a launch bound the architecture cannot honour ('.minnctapersm will be
ignored': more blocks per SM than its threads allow)."""

COLD_STACK = {("sm_120", "gemm_residual_skinny"): 8}
"""Stack frames (bytes, with no spill) ptxas keeps on a path that never runs: on sm_120 it guards each
TMA load into ``shared::cluster`` with a check that the destination is this CTA's and, where it is
not, calls a handler whose argument goes on the stack (``STL.64 [R1]`` before ``CALL.ABS``, in
nvdisasm). The kernel's destinations are always its own CTA's."""


def _default_builds(profile: str):
    prof = PROFILES.get(profile)
    for kernel in builtin_names():
        spec = get_spec(kernel)
        for task in _tasks(kernel):
            p = plan(task, prof)
            assert not p.violations, (profile, kernel, task.dtype, [str(v) for v in p.violations])
            label = f"{kernel} {task.dtype.value} m={task.shape['m']} {p.info.get('path', '')}"
            yield label, spec.render(p.kernel, p.limits)


def _problems(label: str, build, rep, arch: str) -> list[str]:
    if not rep.ok:
        return [f"{label}: compile failed for {arch}:\n{rep.log[-1500:]}"]
    out = [f"{label} on {arch}: {rep.log[-600:]}"] if IGNORED_BOUND in rep.log else []
    for fn in build.functions:
        r = rep.functions.get(fn)
        if r is None:
            out.append(f"{label}: no ptxas report for {fn}")
        elif r.spill_store_bytes or r.spill_load_bytes or r.stack_frame_bytes > COLD_STACK.get((arch, fn), 0):
            out.append(f"{label}: {fn} spills on {arch} ({r.spill_store_bytes} B stores, {r.spill_load_bytes} B "
                       f"loads, {r.stack_frame_bytes} B stack, {r.registers} registers)")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROVISIONAL)
def test_every_default_build_compiles_for_the_profiles_arch(profile):
    arch = DeviceLimits.from_profile(PROFILES.get(profile)).arch
    builds = list(_default_builds(profile))
    assert {label.split()[0] for label, _ in builds} == set(builtin_names())
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        reports = list(pool.map(lambda b: compile_cubin(b[1].source, arch, b[1].options), builds))
    problems = [p for (label, build), rep in zip(builds, reports, strict=True) for p in _problems(label, build, rep, arch)]
    assert not problems, "\n".join(problems)
