"""A healthy fake machine for the check tests; each test changes one thing about it."""

from __future__ import annotations

from typing import Any

from engine.checks.context import CheckContext
from engine.checks.fakes import FakeDevice, FakeNvml, MemoryFS
from engine.profiles import load_profiles

GIB = 2**30
PROFILES = load_profiles(include_user=False)

PROC_VERSION = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
                "(dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 06:54:38 UTC 2025\nGCC version:  gcc version 12.3.0\n")
MEMINFO = "MemTotal:       65863224 kB\nMemFree:        40000000 kB\nMemAvailable:   52000000 kB\nSwapTotal:       8388604 kB\n"
NVCC = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"


def healthy_answers() -> dict[str, dict[int, Any]]:
    return {
        "persistence_mode": {0: True},
        "ecc_uncorrectable": {0: {"enabled": True, "volatile": 0, "aggregate": 0}},
        "remapped_rows": {0: {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}},
        "retired_pages": {},
        "clocks_event_mask": {0: 0x1},
        "power_limits": {0: {"enforced_w": 700.0, "default_w": 700.0, "min_w": 200.0, "max_w": 700.0}},
        "pcie_link": {0: {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16}},
        "temperatures": {0: {"current_c": 35.0, "slowdown_c": 87.0, "shutdown_c": 92.0}},
        "mig_mode": {0: {"current": False, "pending": False}},
        "compute_mode": {0: "default"},
        "gpu_processes": {0: []},
    }


def healthy_fs() -> MemoryFS:
    return MemoryFS(
        files={"/proc/driver/nvidia/version": PROC_VERSION, "/proc/modules": "nvidia_uvm 1 0\nnvidia 2 1\n",
               "/proc/meminfo": MEMINFO, "/proc/1/cgroup": "0::/init.scope\n"},
        dirs={"/dev": ["null", "nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"],
              "/usr/lib/x86_64-linux-gnu": ["libcuda.so.1", "libnvidia-ml.so.1"],
              "/wheels/nvidia/cu13/lib": ["libnvrtc.so.13", "libcublas.so.13"]},
    )


class Runner:
    """Fake subprocess runner: argv[0] -> (exit code, output)."""

    def __init__(self, table: dict[str, tuple[int, str] | None]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], timeout_s: float = 10.0) -> tuple[int, str] | None:
        self.calls.append(argv)
        return self.table.get(argv[0].rsplit("/", 1)[-1])


def probe_ok(arch: str, run: bool) -> dict[str, Any]:
    out = {"arch": arch, "cupy_version": "14.2.0", "runtime_version": "13.0", "nvrtc_version": "13.0",
           "compiled": True, "cubin_bytes": 3579}
    if run:
        out.update(ran=True, verified=True)
    return out


def make_ctx(**kw: Any) -> CheckContext:
    """A context for a healthy H100 host (all checks pass or skip); keyword arguments replace fields."""
    dists = kw.pop("dist_map", {"cupy-cuda13x": "14.2.0", "nvidia-cuda-runtime": "13.0.96",
                                "nvidia-cuda-nvrtc": "13.0.88", "nvidia-ml-py": "13.580.65"})
    base: dict[str, Any] = dict(
        env={}, fs=healthy_fs(), nvml=FakeNvml(answers=healthy_answers()),
        run=Runner({"dmesg": (0, "[    1.0] Linux version 6.8\n"), "nvcc": (0, NVCC), "ldconfig": (0, "")}),
        which=lambda name: "/usr/local/cuda/bin/nvcc" if name == "nvcc" else None,
        euid=1000, disk_free=lambda p: 100 * GIB, writable=lambda p: True,
        dist_version=lambda name: dists.get(name),
        dists=lambda prefix: {k: v for k, v in dists.items() if k.startswith(prefix)},
        module_origin=lambda name: f"/venv/lib/python3.11/site-packages/{name}.py",
        lib_dirs=lambda: ["/wheels/nvidia/cu13/lib"], cuda_probe=probe_ok,
        dirs={"kernel cache": "/home/op/.cache/sol-cockpit", "results store": "/home/op/.local/share/sol-cockpit"},
        profiles=PROFILES, python="/venv/bin/python",
    )
    base.update(kw)
    return CheckContext(**base)


def no_driver_nvml() -> FakeNvml:
    return FakeNvml(ok=False, problem="no NVIDIA driver found: NVML library libnvidia-ml.so.1 could not be "
                                      "loaded (NVML Shared Library Not Found)", devs=[])


__all__ = ["FakeDevice", "FakeNvml", "MemoryFS", "Runner", "make_ctx", "no_driver_nvml", "healthy_answers",
           "healthy_fs", "probe_ok", "GIB", "NVCC"]
