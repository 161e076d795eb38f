"""`tui inspect` on a real GPU (marker gpu): the GPU and driver come from NVML, and a smoke run
launches a kernel. The binaries are built with nvcc for this GPU's compute capability, for sm_80
without PTX, and for sm_80 with PTX (driver JIT)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from engine import nvml
from tests.unit.cuda_binaries import build_all, nvcc_path
from tui.cli.main import main

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_cc() -> tuple[int, int]:
    info = nvml.device_info(0)
    assert info is not None and info.compute_capability, "NVML reports no compute capability for GPU 0"
    major, minor = info.compute_capability.split(".")
    return int(major), int(minor)


@pytest.fixture(scope="module")
def bins(tmp_path_factory, gpu_cc):
    nvcc = nvcc_path()
    if nvcc is None or shutil.which("gcc") is None:
        pytest.skip("nvcc or gcc not found: the CUDA toolkit and gcc build the test binaries")
    n = f"{gpu_cc[0]}{gpu_cc[1]}"
    return build_all(tmp_path_factory.mktemp("inspect_gpu"), nvcc, {
        "native": [f"arch=compute_{n},code=sm_{n}"],
        "sm80": ["arch=compute_80,code=sm_80"],
        "ptx80": ["arch=compute_80,code=[sm_80,compute_80]"],
    })


@pytest.fixture(scope="module")
def driver_too_old(bins) -> bool:
    """The driver supports an older CUDA major than the nvcc that built the binaries."""
    out = subprocess.run([nvcc_path() or "nvcc", "--version"], capture_output=True, text=True).stdout
    toolkit = int(re.search(r"release (\d+)\.", out).group(1))
    driver = nvml.cuda_driver_version()
    return driver is not None and int(driver.split(".")[0]) < toolkit


def inspect(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["inspect", *argv[:argv.index("--")], "--json", *argv[argv.index("--"):]] if "--" in argv
                else ["inspect", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_native_binary_runs_and_the_gpu_comes_from_nvml(bins, gpu_cc, driver_too_old, capsys):
    code, doc = inspect(capsys, str(bins["native"]), "--run", "--timeout", "120", "--", "launch")
    t = doc["target"]
    assert t["source"] == "nvml" and t["compute_capability"] == f"{gpu_cc[0]}.{gpu_cc[1]}"
    assert t["driver_cuda"] and t["driver_version"]
    if driver_too_old:
        assert code == 1 and any(f["id"] == "runtime.newer-than-driver" for f in doc["findings"])
        pytest.skip(f"the driver supports CUDA {t['driver_cuda']}, older than this nvcc: the binaries cannot run")
    assert doc["runs_via"] == "sass" and doc["smoke"]["exit_code"] == 0, doc
    assert doc["smoke"]["output_tail"].strip().endswith("ok") and code == 0, doc["findings"]


def test_sm80_without_ptx_fails_with_no_kernel_image(bins, gpu_cc, driver_too_old, capsys):
    if gpu_cc[0] == 8 or driver_too_old:
        pytest.skip("sm_80 SASS runs on this cc 8.x GPU" if gpu_cc[0] == 8 else "the driver is older than nvcc")
    code, doc = inspect(capsys, str(bins["sm80"]), "--run", "--timeout", "120", "--", "launch")
    assert code == 1 and [f["rule"] for f in doc["findings"] if f["id"] == "arch.no-code"] == ["cuda-no-kernel-image"]
    assert doc["smoke"]["exit_code"] == 1 and "cuda-no-kernel-image" in doc["smoke"]["rules"], doc["smoke"]


def test_ptx_binary_runs_through_the_driver_jit(bins, gpu_cc, driver_too_old, capsys):
    if driver_too_old:
        pytest.skip("the driver is older than nvcc: its PTX ISA is too new to JIT")
    code, doc = inspect(capsys, str(bins["ptx80"]), "--run", "--timeout", "300", "--", "launch")
    assert doc["smoke"]["exit_code"] == 0 and code == 0, doc
    if gpu_cc[0] != 8:
        assert doc["runs_via"] == "ptx-jit" and any(f["id"] == "arch.ptx-jit" for f in doc["findings"])
