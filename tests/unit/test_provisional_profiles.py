"""Provisional profiles: GPUs this product never measured (B200, GB200, RTX 5090, L4, A10 and the
other datasheet-only boards) carry ``provisional = true``, their limits match the programming
guide's table for their compute capability, they are detected by their own NVML names without
taking another board's, and every built-in kernel plans on each of them by its portable (or
compute-capability-checked) path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from engine.calibrate import measured_profile
from engine.planner import kernel_default_shape, plan
from engine.profiles import Profile, load_profiles, save_user_profile
from engine.task import TaskSpec
from kernels import builtin_names, get_spec
from kernels.rowwise import THREAD_CHOICES, threads_per_sm
from kernels.spec import DeviceLimits

PROFILES = load_profiles(include_user=False)
README = Path(__file__).resolve().parents[2] / "README.md"

NEW = {"b200": "10.0", "gb200": "10.0", "rtx-5090": "12.0", "l4": "8.9", "a10": "8.6"}
MEASURED = {"h200", "h100-sxm"}
"""The built-ins whose GPU model this product has run on (README: what has been measured on which GPU)."""

CC_SHARED_MEMORY = {
    "8.0": (167936, 166912), "8.6": (102400, 101376), "8.9": (102400, 101376),
    "9.0": (233472, 232448), "10.0": (233472, 232448), "12.0": (102400, 101376),
}
"""(per SM, per block opt-in) bytes, CUDA C++ Programming Guide's limits per compute capability
(164/100/228 KiB per SM, 1 KiB of each block reserved)."""

PROVISIONAL = sorted(p.name for p in PROFILES.profiles.values() if p.provisional)


def test_only_the_measured_gpus_are_not_provisional():
    assert {p.name for p in PROFILES.profiles.values() if not p.provisional} == MEASURED
    assert set(NEW) <= set(PROVISIONAL)
    for name, cc in NEW.items():
        prof = PROFILES.get(name)
        assert prof.compute_capability == cc and "Provisional" in prof.notes
        assert re.search("datasheet|whitepaper", prof.source) and f"compute capability {cc} limits" in prof.source


def test_readme_lists_every_provisional_profile_as_provisional():
    """README's table names each provisional built-in on its 'provisional' row, and each measured
    one on a 'measured' row: the table and the profiles' flags cannot drift apart."""
    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    provisional_rows = " ".join(r for r in rows if r.rstrip(" |").endswith("provisional"))
    measured_rows = " ".join(r for r in rows if "| measured" in r)
    for name in PROVISIONAL:
        assert f"`{name}`" in provisional_rows, name
    for name in MEASURED:
        assert f"`{name}`" in measured_rows and f"`{name}`" not in provisional_rows, name


@pytest.mark.parametrize("name", sorted(PROFILES.profiles))
def test_shared_memory_is_the_guides_figure_for_the_compute_capability(name):
    prof = PROFILES.get(name)
    assert (prof.shared_memory_per_sm_bytes, prof.shared_memory_per_block_bytes) == \
        CC_SHARED_MEMORY[prof.compute_capability]
    assert prof.registers_per_sm == 65536 and prof.max_threads_per_block == 1024


@pytest.mark.parametrize("nvml_name,expected", [
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ("NVIDIA A100 80GB PCIe", "a100-sxm-80gb"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA H200", "h200"),
])
def test_each_name_detects_its_own_profile(nvml_name, expected):
    assert PROFILES.detect(nvml_name).name == expected


@pytest.mark.parametrize("nvml_name", ["NVIDIA A10G", "NVIDIA L40", "NVIDIA A100", "NVIDIA GH200 480GB"])
def test_neighbouring_names_are_not_taken_for_a_new_profile(nvml_name):
    found = PROFILES.detect(nvml_name)
    assert found is None or found.name not in NEW, found


@pytest.mark.parametrize("nvml_name,facts,expected", [
    ("NVIDIA B200", {"sm_count": 148, "memory_gib": 178.35, "power_limit_w": 1000.0}, "b200"),
    ("NVIDIA GB200", {"sm_count": 148, "memory_gib": 185.0, "power_limit_w": 1200.0}, "gb200"),
    ("NVIDIA GeForce RTX 5090", {"sm_count": 170, "memory_gib": 31.8, "power_limit_w": 575.0}, "rtx-5090"),
    ("NVIDIA L4", {"sm_count": 58, "memory_gib": 22.5, "power_limit_w": 72.0}, "l4"),
    ("NVIDIA A10", {"sm_count": 72, "memory_gib": 22.0, "power_limit_w": 150.0}, "a10"),
])
def test_detected_with_the_facts_nvml_reports(nvml_name, facts, expected):
    """Memory as NVML reports it (GiB, a little under the datasheet's GB) is within the tolerance."""
    assert PROFILES.detect(nvml_name, **facts).name == expected


def test_measured_and_provisional_together_is_refused():
    data = PROFILES.get("l4").model_dump() | {"name": "l4-x", "measured": True}
    with pytest.raises(ValidationError, match="measured and provisional"):
        Profile.model_validate(data)


def test_a_profile_calibrated_on_a_provisional_one_is_not_provisional(tmp_path):
    base = PROFILES.get("l4")
    ceilings = {"tflops": {"fp32": 25.0, "tf32": 50.0, "bf16": 100.0, "fp16": 100.0}, "copy_gbps": 250.0}
    mine = measured_profile(base, ceilings, host="test")
    assert mine.measured and not mine.provisional
    save_user_profile(mine, tmp_path)
    again = load_profiles(user_dir=tmp_path).get(mine.name)
    assert again.measured and not again.provisional


def _tasks(kernel: str):
    spec = get_spec(kernel)
    shapes = [kernel_default_shape(kernel)]
    if "k" in spec.dims:
        shapes.append({"m": 16, "n": 4096, "k": 4096})  # decode: the skinny split-K path
    for shape in shapes:
        for dtype in spec.dtypes:
            yield TaskSpec(kernel=kernel, shape=shape, dtype=dtype)


@pytest.mark.parametrize("profile", PROVISIONAL)
def test_every_kernel_plans_on_every_provisional_profile(profile):
    """Each built-in kernel plans each dtype on the profile; the Hopper wgmma/TMA path only on
    compute capability 9.0 (sm_90a), the portable path (or the decode path) everywhere else."""
    prof = PROFILES.get(profile)
    for kernel in builtin_names():
        for task in _tasks(kernel):
            p = plan(task, prof)
            assert not p.violations, (profile, kernel, task.dtype, [str(v) for v in p.violations])
            path = str(p.info.get("path", ""))
            if prof.compute_capability != "9.0":
                assert "wgmma" not in path and "sm_90a" not in path, (profile, kernel, path)


@pytest.mark.parametrize("profile", ["rtx-5090", "l4", "a10"])
def test_rowwise_blocks_per_sm_fit_the_threads_an_sm_holds(profile):
    """sm_86, sm_89 and sm_120 hold 1536 threads per SM: a block count above that is ignored by
    ptxas ('.minnctapersm will be ignored') and oversubscribes the persistent grid."""
    prof = PROFILES.get(profile)
    limits = DeviceLimits.from_profile(prof)
    assert threads_per_sm(limits) == 1536
    for n in (1024, 2048, 4096):
        for dtype in ("bf16", "fp32"):
            for threads in THREAD_CHOICES:
                task = TaskSpec(kernel="add_rmsnorm", shape={"m": 8192, "n": n}, dtype=dtype,
                                block_size=str(threads))
                p = plan(task, prof)
                if p.violations:
                    continue
                assert p.info["blocks_per_sm"] * threads <= 1536, (n, dtype, threads, p.info)


def test_provisional_arch_targets():
    """The backend's NVRTC target for each new profile (DeviceLimits.arch): sm_100 and sm_120 need no
    arch-specific ('a') features, since no kernel uses tcgen05 or wgmma there."""
    arch = {name: DeviceLimits.from_profile(PROFILES.get(name)).arch for name in NEW}
    assert arch == {"b200": "sm_100", "gb200": "sm_100", "rtx-5090": "sm_120", "l4": "sm_89", "a10": "sm_86"}
    assert DeviceLimits.from_profile(PROFILES.get("h200")).arch == "sm_90a"
