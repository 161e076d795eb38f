"""Every status of every environment check, with faked NVML, files, environment and subprocesses."""

from __future__ import annotations

from typing import Any

import pytest

from engine.checks import CHECKS, check_ids, run_checks
from tests.unit.test_checks_support import (
    GIB,
    FakeDevice,
    FakeNvml,
    Runner,
    healthy_answers,
    healthy_fs,
    make_ctx,
    no_driver_nvml,
    probe_ok,
)


def nvml_with(**answers: Any) -> FakeNvml:
    a = healthy_answers()
    for k, v in answers.items():
        a[k] = {0: v}
    return FakeNvml(answers=a)


def fs_with(files: dict | None = None, dirs: dict | None = None, drop: tuple = ()) -> Any:
    fs = healthy_fs()
    fs.files.update(files or {})
    fs.dirs.update(dirs or {})
    for p in drop:
        fs.files.pop(p, None)
        fs.dirs.pop(p, None)
    return fs


NO_DRIVER = dict(nvml=no_driver_nvml(), fs=fs_with(drop=("/proc/driver/nvidia/version",)))
DOCKER = {"/.dockerenv": ""}
OLD = FakeNvml(driver="550.54.15", cuda="12.4", answers=healthy_answers())

CASES: list[tuple[str, str, dict[str, Any], str]] = [
    # driver.loaded
    ("driver.loaded", "pass", {}, "580.65.06"),
    ("driver.loaded", "fail", NO_DRIVER, "no NVIDIA driver found"),
    ("driver.loaded", "fail", {"nvml": FakeNvml(ok=False, problem="the NVIDIA kernel driver is not loaded (Driver Not Loaded)")}, "not loaded"),
    ("driver.loaded", "fail", {"nvml": no_driver_nvml()}, "kernel module 580.65.06 is loaded"),
    ("driver.loaded", "warn", {"nvml": FakeNvml(ok=False, problem="NVIDIA driver/library version mismatch (Driver/library version mismatch)")}, "mismatch"),
    ("driver.loaded", "fail", {"nvml": FakeNvml(ok=False, problem="NVML failed to initialise: Unknown Error")}, "Unknown Error"),
    # driver.nouveau
    ("driver.nouveau", "pass", {}, "not loaded"),
    ("driver.nouveau", "fail", {"fs": fs_with({"/proc/modules": "nouveau 1 0\n"})}, "nouveau"),
    ("driver.nouveau", "warn", {"fs": fs_with({"/proc/modules": "nouveau 1 0\nnvidia 2 0\n"})}, "both"),
    ("driver.nouveau", "skip", {"fs": fs_with(drop=("/proc/modules",))}, "/proc/modules"),
    # driver.version_mismatch
    ("driver.version_mismatch", "pass", {}, "580.65.06"),
    ("driver.version_mismatch", "fail", {"nvml": FakeNvml(driver="575.51.03", answers=healthy_answers())}, "575.51.03"),
    ("driver.version_mismatch", "fail", {"nvml": FakeNvml(ok=False, problem="Driver/library version mismatch")}, "mismatch"),
    ("driver.version_mismatch", "skip", NO_DRIVER, "no NVIDIA driver"),
    ("driver.version_mismatch", "pass", {"fs": fs_with(drop=("/proc/driver/nvidia/version",))}, "WSL"),
    # devices.nodes
    ("devices.nodes", "pass", {}, "/dev/nvidia0"),
    ("devices.nodes", "skip", NO_DRIVER, "no NVIDIA driver"),
    ("devices.nodes", "fail", {"nvml": FakeNvml(devs=[])}, "sees no GPU"),
    ("devices.nodes", "fail", {"fs": fs_with(dirs={"/dev": ["nvidia0", "nvidiactl"]})}, "nvidia-uvm"),
    ("devices.nodes", "warn", {"fs": fs_with(dirs={"/dev": ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"]})}, "fallen off"),
    ("devices.nodes", "warn", {"nvml": FakeNvml(devs=[FakeDevice(0), FakeDevice(1)])}, "fewer"),
    ("devices.nodes", "skip", {"fs": fs_with(drop=("/dev",))}, "/dev"),
    ("devices.nodes", "pass", {"fs": fs_with(dirs={"/dev": ["dxg"]})}, "WSL"),
    # devices.visible_env
    ("devices.visible_env", "pass", {}, "unset"),
    ("devices.visible_env", "pass", {"env": {"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "all"}}, "CUDA_VISIBLE_DEVICES=0"),
    ("devices.visible_env", "pass", {"env": {"CUDA_VISIBLE_DEVICES": "GPU-8c3b0f1e"}}, "GPU-8c3b0f1e"),
    ("devices.visible_env", "fail", {"env": {"CUDA_VISIBLE_DEVICES": ""}}, "hides every GPU"),
    ("devices.visible_env", "fail", {"env": {"CUDA_VISIBLE_DEVICES": "1"}}, "index 1 does not exist"),
    ("devices.visible_env", "fail", {"env": {"CUDA_VISIBLE_DEVICES": "0,0"}}, "twice"),
    ("devices.visible_env", "fail", {"env": {"CUDA_VISIBLE_DEVICES": "GPU-ffff"}}, "matches no GPU"),
    ("devices.visible_env", "fail", {"env": {"CUDA_VISIBLE_DEVICES": "gpu0"}}, "neither an index"),
    ("devices.visible_env", "fail", {"env": {"NVIDIA_VISIBLE_DEVICES": "void"}}, "maps no GPU"),
    ("devices.visible_env", "warn", {"env": {"NVIDIA_VISIBLE_DEVICES": "first"}}, "neither"),
    # container.gpu
    ("container.gpu", "skip", {}, "not running in a container"),
    ("container.gpu", "pass", {"fs": fs_with(DOCKER), "env": {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}}, "docker"),
    ("container.gpu", "pass", {"fs": fs_with({"/proc/1/cgroup": "0::/kubepods/burstable/pod1"})}, "kubernetes"),
    ("container.gpu", "fail", {"fs": fs_with({"/run/.containerenv": ""}, {"/dev": ["null"]}, ("/proc/driver/nvidia/version",)),
                               "nvml": no_driver_nvml()}, "podman container with no GPU"),
    ("container.gpu", "fail", {"fs": fs_with(DOCKER), "env": {"NVIDIA_DRIVER_CAPABILITIES": "compute"}}, "utility"),
    ("container.gpu", "fail", {"fs": fs_with(DOCKER), "nvml": no_driver_nvml()}, "NVML does not answer"),
    # cuda.cupy
    ("cuda.cupy", "pass", {}, "cupy-cuda13x 14.2.0"),
    ("cuda.cupy", "fail", {"nvml": OLD}, "needs a driver >= 580"),
    ("cuda.cupy", "pass", {"nvml": OLD, "dist_map": {"cupy-cuda12x": "13.6.0"}}, "cuda12"),
    ("cuda.cupy", "fail", {"dist_map": {"cupy-cuda12x": "13.6.0", "cupy-cuda13x": "14.2.0"}}, "several"),
    ("cuda.cupy", "fail", {"dist_map": {}}, "not installed"),
    ("cuda.cupy", "warn", {"dist_map": {}, **NO_DRIVER}, "not installed"),
    ("cuda.cupy", "skip", NO_DRIVER, "needs a driver >= 580"),
    # cuda.runtime
    ("cuda.runtime", "pass", {}, "CUDA runtime 13.0, NVRTC 13.0"),
    ("cuda.runtime", "fail", {"nvml": OLD}, "newer than the driver"),
    ("cuda.runtime", "warn", {"cuda_probe": lambda a, r: probe_ok(a, r) | {"nvrtc_version": "13.2"}}, "newer minor"),
    ("cuda.runtime", "skip", NO_DRIVER, "no NVIDIA driver"),
    ("cuda.runtime", "skip", {"dist_map": {}}, "no CUDA runtime"),
    ("cuda.runtime", "skip", {"nvml": FakeNvml(cuda=None, answers=healthy_answers())}, "does not report"),
    # cuda.pynvml
    ("cuda.pynvml", "pass", {}, "nvidia-ml-py 13.580.65"),
    ("cuda.pynvml", "fail", {"dist_map": {"nvidia-ml-py": "12.535.1", "pynvml": "11.5.0"}}, "unofficial"),
    ("cuda.pynvml", "warn", {"dist_map": {"nvidia-ml-py": "12.535.1", "pynvml": "12.0.0"}}, "deprecated"),
    ("cuda.pynvml", "fail", {"module_origin": lambda n: None}, "no pynvml module"),
    ("cuda.pynvml", "warn", {"dist_map": {}}, "no installed nvidia-ml-py"),
    ("cuda.pynvml", "warn", {"module_origin": lambda n: "/home/op/project/pynvml.py"}, "shadowing"),
    # gpu.profile
    ("gpu.profile", "pass", {}, "h100"),
    ("gpu.profile", "pass", {"profile_name": "h100"}, "fits"),
    ("gpu.profile", "fail", {"profile_name": "a100-40gb"}, "cc 8.0"),
    ("gpu.profile", "warn", {"profile_name": "h200"}, "does not match"),
    ("gpu.profile", "fail", {"profile_name": "nope"}, "unknown profile"),
    ("gpu.profile", "warn", {"nvml": FakeNvml(devs=[FakeDevice(0, name="NVIDIA GeForce GTX 1080", compute_capability="6.1")])}, "no built-in profile"),
    ("gpu.profile", "skip", NO_DRIVER, "no NVIDIA driver"),
    ("gpu.profile", "skip", {**NO_DRIVER, "profile_name": "h100"}, "no GPU to compare"),
    # gpu.kernel_arch
    ("gpu.kernel_arch", "pass", {}, "wgmma"),
    ("gpu.kernel_arch", "pass", {"nvml": FakeNvml(devs=[FakeDevice(0, name="NVIDIA L40S", compute_capability="8.9")])}, "portable path"),
    ("gpu.kernel_arch", "fail", {"nvml": FakeNvml(devs=[FakeDevice(0, name="Tesla V100", compute_capability="7.0")])}, "cc >= 8.0"),
    ("gpu.kernel_arch", "warn", {"nvml": FakeNvml(devs=[FakeDevice(0, compute_capability=None)])}, "unknown"),
    ("gpu.kernel_arch", "skip", NO_DRIVER, "no NVIDIA driver"),
    # gpu.nvrtc_probe
    ("gpu.nvrtc_probe", "pass", {}, "verified"),
    ("gpu.nvrtc_probe", "pass", NO_DRIVER, "not launched"),
    ("gpu.nvrtc_probe", "skip", {"dist_map": {}, "module_origin": lambda n: None}, "not installed"),
    ("gpu.nvrtc_probe", "fail", {"cuda_probe": lambda a, r: {"arch": a, "error": "the CuPy probe exited with 1"}}, "exited"),
    ("gpu.nvrtc_probe", "fail", {"cuda_probe": lambda a, r: {"arch": a, "import_error": "ImportError: libcudart.so.13"}}, "cannot be imported"),
    ("gpu.nvrtc_probe", "fail", {"cuda_probe": lambda a, r: {"arch": a, "compiled": False, "compile_error": "nvrtc: error: invalid value for --gpu-architecture (-arch)"}}, "could not compile"),
    ("gpu.nvrtc_probe", "fail", {"cuda_probe": lambda a, r: probe_ok(a, False) | {"ran": True, "verified": False}}, "WRONG"),
    ("gpu.nvrtc_probe", "fail", {"cuda_probe": lambda a, r: probe_ok(a, False) | {"ran": False, "run_error": "CUDARuntimeError: cudaErrorInsufficientDriver"}}, "launching it failed"),
    # toolchain.nvcc
    ("toolchain.nvcc", "pass", {}, "CMAKE_CUDA_ARCHITECTURES=90"),
    ("toolchain.nvcc", "pass", NO_DRIVER, "no driver to compare"),
    ("toolchain.nvcc", "warn", {"which": lambda n: None}, "nvcc not found"),
    ("toolchain.nvcc", "warn", {"nvml": OLD}, "newer than the driver"),
    ("toolchain.nvcc", "warn", {"nvml": FakeNvml(cuda="12.9", answers=healthy_answers())}, "newer than the driver"),
    ("toolchain.nvcc", "warn", {"run": Runner({"nvcc": (0, "Cuda compilation tools, release 13.1, V13.1.0")})}, "newer minor"),
    ("toolchain.nvcc", "warn", {"run": Runner({"nvcc": (127, "error while loading shared libraries")})}, "does not run"),
    # libs.driver / libs.cuda
    ("libs.driver", "pass", {}, "libcuda.so.1"),
    ("libs.driver", "fail", {"fs": fs_with(dirs={"/usr/lib/x86_64-linux-gnu": ["libnvidia-ml.so.1"]})}, "libcuda: NOT FOUND"),
    ("libs.driver", "pass", {"fs": fs_with(drop=("/usr/lib/x86_64-linux-gnu",)),
                             "run": Runner({"ldconfig": (0, "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib64/libcuda.so.1\n"
                                                            "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib64/libnvidia-ml.so.1\n")})}, "/usr/lib64/libcuda.so.1"),
    ("libs.driver", "skip", {**NO_DRIVER, "fs": fs_with(drop=("/usr/lib/x86_64-linux-gnu",))}, "no NVIDIA driver"),
    ("libs.cuda", "pass", {}, "libnvrtc.so.13"),
    ("libs.cuda", "pass", {"lib_dirs": lambda: [], "env": {"LD_LIBRARY_PATH": "/wheels/nvidia/cu13/lib"}}, "LD_LIBRARY_PATH=/wheels"),
    ("libs.cuda", "fail", {"lib_dirs": lambda: []}, "kernels cannot be compiled"),
    ("libs.cuda", "warn", {"fs": fs_with(dirs={"/wheels/nvidia/cu13/lib": ["libnvrtc.so.13"]})}, "cuBLAS"),
    # health.persistence
    ("health.persistence", "pass", {}, "on"),
    ("health.persistence", "warn", {"nvml": nvml_with(persistence_mode=False)}, "off"),
    ("health.persistence", "skip", {"nvml": nvml_with(persistence_mode=None)}, "not reported"),
    ("health.persistence", "skip", NO_DRIVER, "no NVIDIA driver"),
    ("health.persistence", "skip", {"nvml": FakeNvml(devs=[])}, "no GPU visible"),
    # health.ecc
    ("health.ecc", "pass", {}, "no uncorrectable"),
    ("health.ecc", "pass", {"nvml": nvml_with(ecc_uncorrectable={"enabled": False, "volatile": 0, "aggregate": 0})}, "disabled"),
    ("health.ecc", "fail", {"nvml": nvml_with(ecc_uncorrectable={"enabled": True, "volatile": 2, "aggregate": 2})}, "2 uncorrectable"),
    ("health.ecc", "warn", {"nvml": nvml_with(ecc_uncorrectable={"enabled": True, "volatile": 0, "aggregate": 1})}, "lifetime"),
    ("health.ecc", "skip", {"nvml": nvml_with(ecc_uncorrectable=None)}, "no ECC"),
    # health.retirement
    ("health.retirement", "pass", {}, "nothing pending"),
    ("health.retirement", "pass", {"nvml": nvml_with(remapped_rows=None, retired_pages={"pending": False, "single_bit": 1, "double_bit": 0})}, "pages retired"),
    ("health.retirement", "warn", {"nvml": nvml_with(remapped_rows={"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False})}, "pending"),
    ("health.retirement", "fail", {"nvml": nvml_with(remapped_rows={"correctable": 0, "uncorrectable": 9, "pending": False, "failure": True})}, "FAILED"),
    ("health.retirement", "skip", {"nvml": nvml_with(remapped_rows=None)}, "neither"),
    # health.xid
    ("health.xid", "pass", {}, "no Xid"),
    ("health.xid", "fail", {"run": Runner({"dmesg": (0, "[ 812.1] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n")})}, "Xid 79"),
    ("health.xid", "warn", {"run": Runner({"dmesg": (0, "[ 812.1] NVRM: Xid (PCI:0000:18:00): 31, pid=4242, name=python, Ch 00000008, intr 00000000. MMU Fault\n")})}, "none critical"),
    ("health.xid", "skip", {"run": Runner({"dmesg": (1, "dmesg: read kernel buffer failed: Operation not permitted"), "journalctl": None})}, "not readable"),
    # health.throttle
    ("health.throttle", "pass", {}, "GPU idle"),
    ("health.throttle", "warn", {"nvml": nvml_with(clocks_event_mask=0x4)}, "software power cap"),
    ("health.throttle", "fail", {"nvml": nvml_with(clocks_event_mask=0x40)}, "hardware thermal slowdown"),
    ("health.throttle", "skip", {"nvml": nvml_with(clocks_event_mask=None)}, "not reported"),
    # health.power_limit
    ("health.power_limit", "pass", {}, "700 W, the board's default 700 W; settable 200-700 W"),
    ("health.power_limit", "warn", {"nvml": nvml_with(power_limits={"enforced_w": 450.0, "default_w": 700.0})},
     "lowered to 64%"),
    ("health.power_limit", "pass", {"nvml": nvml_with(power_limits={"enforced_w": 690.0, "default_w": 700.0})},
     "690 W"),
    ("health.power_limit", "pass", {"nvml": nvml_with(power_limits={"enforced_w": 300.0})}, "no default reported"),
    ("health.power_limit", "skip", {"nvml": nvml_with(power_limits=None)}, "not reported"),
    ("health.power_limit", "skip", NO_DRIVER, "no NVIDIA driver"),
    # health.pcie
    ("health.pcie", "pass", {}, "gen 5/5 x16/x16"),
    ("health.pcie", "pass", {"nvml": nvml_with(pcie_link={"gen": 1, "max_gen": 5, "width": 16, "max_width": 16})}, "power saving"),
    ("health.pcie", "warn", {"nvml": nvml_with(pcie_link={"gen": 5, "max_gen": 5, "width": 8, "max_width": 16})}, "narrower"),
    ("health.pcie", "skip", {"nvml": nvml_with(pcie_link=None)}, "not reported"),
    # health.temperature
    ("health.temperature", "pass", {}, "35 C"),
    ("health.temperature", "warn", {"nvml": nvml_with(temperatures={"current_c": 80.0, "slowdown_c": 87.0})}, "within 10 C"),
    ("health.temperature", "fail", {"nvml": nvml_with(temperatures={"current_c": 88.0, "slowdown_c": 87.0})}, "past the slowdown"),
    ("health.temperature", "pass", {"nvml": nvml_with(temperatures={"current_c": 40.0})}, "no slowdown threshold"),
    ("health.temperature", "skip", {"nvml": nvml_with(temperatures=None)}, "not reported"),
    # health.mig
    ("health.mig", "pass", {}, "disabled"),
    ("health.mig", "warn", {"nvml": nvml_with(mig_mode={"current": True, "pending": True})}, "MIG enabled"),
    ("health.mig", "warn", {"nvml": nvml_with(mig_mode={"current": False, "pending": True})}, "after the next GPU reset"),
    ("health.mig", "skip", {"nvml": nvml_with(mig_mode=None)}, "no MIG"),
    # health.compute_mode
    ("health.compute_mode", "pass", {}, "default"),
    ("health.compute_mode", "warn", {"nvml": nvml_with(compute_mode="exclusive process")}, "one process at a time"),
    ("health.compute_mode", "fail", {"nvml": nvml_with(compute_mode="prohibited")}, "prohibited"),
    ("health.compute_mode", "skip", {"nvml": nvml_with(compute_mode=None)}, "not reported"),
    # health.processes
    ("health.processes", "pass", {}, "no other processes"),
    ("health.processes", "warn", {"nvml": nvml_with(gpu_processes=[{"pid": 4242, "name": "python", "used_mib": 2048.0}])}, "pid 4242 python"),
    ("health.processes", "skip", {"nvml": nvml_with(gpu_processes=None)}, "not reported"),
    # env.cuda_debug
    ("env.cuda_debug", "pass", {}, "no CUDA debugging"),
    ("env.cuda_debug", "pass", {"env": {"CUDA_LAUNCH_BLOCKING": "0"}}, "no CUDA debugging"),
    ("env.cuda_debug", "warn", {"env": {"CUDA_LAUNCH_BLOCKING": "1", "CUDA_INJECTION64_PATH": "/opt/nsight/libInjection.so"}}, "CUDA_LAUNCH_BLOCKING=1"),
    # host.*
    ("host.user", "pass", {}, "uid 1000"),
    ("host.user", "warn", {"euid": 0}, "root"),
    ("host.user", "skip", {"euid": -1}, "not available"),
    ("host.disk", "pass", {}, "100.0 GiB"),
    ("host.disk", "warn", {"disk_free": lambda p: 3 * GIB}, "3.0 GiB"),
    ("host.disk", "fail", {"disk_free": lambda p: GIB // 2}, "0.5 GiB"),
    ("host.disk", "skip", {"disk_free": lambda p: None}, "not available"),
    ("host.memory", "pass", {}, "GiB available"),
    ("host.memory", "warn", {"fs": fs_with({"/proc/meminfo": "MemTotal: 4000000 kB\nMemAvailable: 3000000 kB\nSwapTotal: 0 kB\n"})}, "no swap"),
    ("host.memory", "fail", {"fs": fs_with({"/proc/meminfo": "MemTotal: 4000000 kB\nMemAvailable: 500000 kB\nSwapTotal: 0 kB\n"})}, "0.5 GiB"),
    ("host.memory", "skip", {"fs": fs_with(drop=("/proc/meminfo",))}, "not readable"),
    ("host.dirs", "pass", {}, "writable"),
    ("host.dirs", "fail", {"writable": lambda p: "cache" not in p}, "kernel cache"),
]


@pytest.mark.parametrize(("check_id", "status", "kw", "needle"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_check_status(check_id: str, status: str, kw: dict[str, Any], needle: str) -> None:
    (res,) = run_checks(only=[check_id], ctx=make_ctx(**kw), with_rules=False)
    assert res.status == status, res
    assert needle.lower() in res.detail.lower(), res.detail
    if status in ("fail", "warn"):
        assert res.fix, f"{check_id} {status} without a fix"


def test_every_status_of_every_check_is_covered() -> None:
    covered = {(c[0], c[1]) for c in CASES}
    for cid in check_ids():
        assert any(k[0] == cid for k in covered), f"{cid} has no test"
    assert {c.id for c in CHECKS} == {c[0] for c in CASES}


def test_healthy_machine_has_no_fail_or_warn() -> None:
    results = run_checks(ctx=make_ctx())
    bad = [(r.id, r.status, r.detail) for r in results if r.status in ("fail", "warn")]
    assert bad == []
    assert [r.id for r in results] == check_ids()


def test_no_driver_reads_as_no_driver_never_too_old() -> None:
    results = run_checks(ctx=make_ctx(**NO_DRIVER))
    by_id = {r.id: r for r in results}
    assert by_id["driver.loaded"].status == "fail"
    assert "no NVIDIA driver found" in by_id["driver.loaded"].detail
    assert "--backend sim" in by_id["driver.loaded"].fix
    for r in results:
        assert "too old" not in r.detail.lower(), r
    assert "nvml-library-not-found" in by_id["driver.loaded"].rules


def test_a_check_that_raises_becomes_a_fail_not_a_crash() -> None:
    def boom(_ctx: Any) -> Any:
        raise RuntimeError("bug")

    from engine.checks.model import Check

    res = Check("x.y", "t", boom).run(make_ctx())
    assert res.status == "fail" and "RuntimeError" in res.detail


def test_failed_checks_carry_their_rules() -> None:
    (res,) = run_checks(only=["health.compute_mode"], ctx=make_ctx(nvml=nvml_with(compute_mode="prohibited")))
    assert res.rules[0] == "cuda-devices-unavailable"


def test_only_accepts_an_area_prefix() -> None:
    results = run_checks(only=["host"], ctx=make_ctx(), with_rules=False)
    assert [r.id for r in results] == ["host.user", "host.disk", "host.memory", "host.dirs"]


def test_probe_runs_once_per_context() -> None:
    calls = []

    def probe(arch: str, run: bool) -> dict[str, Any]:
        calls.append((arch, run))
        return probe_ok(arch, run)

    run_checks(ctx=make_ctx(cuda_probe=probe), with_rules=False)
    assert calls == [("sm_90a", True)]


def test_a_lowered_power_limit_points_at_the_power_cap_rule() -> None:
    ctx = make_ctx(nvml=nvml_with(power_limits={"enforced_w": 450.0, "default_w": 700.0}))
    (r,) = run_checks(only=["health.power_limit"], ctx=ctx)
    assert r.status == "warn" and "power-cap" in r.rules
    assert "nvidia-smi -i <gpu> -pl" in r.fix


class _FakePowerNvml:
    def __init__(self, constraints):
        self.constraints = constraints

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("h", i)

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 450_000

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return 700_000

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        if self.constraints is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return self.constraints


@pytest.mark.parametrize("constraints", [[200_000, 700_000], None])
def test_nvml_power_limits_in_watts(monkeypatch: pytest.MonkeyPatch, constraints) -> None:
    from engine import nvml

    monkeypatch.setattr(nvml, "_state", {"init": True, "error": None, "mod": _FakePowerNvml(constraints)})
    want = {"enforced_w": 450.0, "default_w": 700.0}
    if constraints:
        want.update(min_w=200.0, max_w=700.0)
    assert nvml.power_limits(0) == want
