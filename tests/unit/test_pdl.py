"""Programmatic dependent launch: the driver structures and argument packing of
``engine.backends.pdl`` (no GPU needed), and, in the SASS of the kernel a build marks ``pdl``, the
dependency wait (ACQBULK) ahead of the first global load, store or copy: a kernel launched early
that touched memory before it would read the previous kernel's half-written output. No early
trigger (PREEXIT): the next kernel starts as this one's CTAs exit (ADR-0010)."""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.backends import pdl
from engine.backends.clusters import _LaunchConfig
from engine.backends.tensormap import as_kernel_arg
from kernels import gemm_residual_skinny as sk
from kernels.nvrtc_check import compile_cubin
from kernels.sm90 import codegen
from kernels.spec import DeviceLimits
from tests.unit.test_gemm_sm90_compile import _cuobjdump

H200 = DeviceLimits(compute_capability=(9, 0), sm_count=132, shared_memory_per_block_bytes=232448,
                    shared_memory_per_sm_bytes=233472, profile="h200")

GLOBAL_OPS = {"LDG", "STG", "LDGSTS", "UTMALDG", "UTMASTG", "UBLKCP", "RED", "REDG", "ATOM", "ATOMG",
              "UTMAREDG", "UBLKRED", "LD", "ST"}
"""SASS opcodes that read or write global memory (generic LD/ST may too). UTMAPF, the tensor-map
prefetch, reads the kernel's parameters and may come first."""


def test_launch_structures_match_the_driver_abi() -> None:
    # CUlaunchAttribute: a 4-byte id padded to 8, then a 64-byte value union
    assert ctypes.sizeof(pdl._Attr) == 72
    assert pdl._Attr.value.offset == 8
    # CUlaunchConfig: 7 uints, then the stream, the attribute pointer and their count
    assert _LaunchConfig.hStream.offset == 32
    assert _LaunchConfig.attrs.offset == 40
    assert ctypes.sizeof(_LaunchConfig) == 56


def test_arguments_pack_as_the_kernel_reads_them() -> None:
    fake_array = SimpleNamespace(data=SimpleNamespace(ptr=0x7F00_0000_1000))
    assert pdl._param(fake_array).value == 0x7F00_0000_1000
    assert isinstance(pdl._param(fake_array), ctypes.c_uint64)
    assert pdl._param(np.int32(-7)).value == -7
    assert isinstance(pdl._param(np.int32(3)), ctypes.c_int32)
    assert pdl._param(np.float32(1.5)).value == 1.5
    desc = bytes(range(128))
    packed = pdl._param(as_kernel_arg(desc))
    assert bytes(packed) == desc
    with pytest.raises(TypeError, match="kernel argument of type str"):
        pdl._param("a")


def test_enabled_from_hopper_on_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pdl.ENV_OFF, raising=False)
    monkeypatch.setattr(pdl, "_libcuda", lambda: object())
    assert pdl.enabled((9, 0))
    assert pdl.enabled((10, 0))
    assert not pdl.enabled((8, 9))
    monkeypatch.setenv(pdl.ENV_OFF, "1")
    assert not pdl.enabled((9, 0))


@pytest.mark.parametrize("missing", [OSError("libcuda.so.1: cannot open shared object file"),
                                     AttributeError("cuLaunchKernelEx")])
def test_not_enabled_without_a_driver_that_has_the_launch(monkeypatch: pytest.MonkeyPatch,
                                                          missing: Exception) -> None:
    monkeypatch.delenv(pdl.ENV_OFF, raising=False)

    def absent() -> None:
        raise missing

    monkeypatch.setattr(pdl, "_libcuda", absent)
    assert not pdl.enabled((9, 0))


def _skinny_build():
    p = sk.plan(16, 8192, 8192, "bf16", H200)
    assert p.w_bulk == 2  # the TMA decode path, the default on Hopper
    return sk.render(p, 16, 8192, 8192, "bf16")


def _sm90_build():
    task = SimpleNamespace(shape={"m": 8192, "n": 2560, "k": 2560}, dtype="bf16", fusion=True)
    return codegen.build(task, H200, "128x256", 4)


def _decode_tile_build(k: int = 8192):
    task = SimpleNamespace(shape={"m": 16, "n": 8192, "k": k}, dtype="bf16", fusion=True)
    return codegen.build(task, H200, "16x64", 8)


def _register_ring_build():
    p = sk.plan(16, 4096, 4098, "bf16", H200)  # K % 8 != 0: no bulk copies
    assert p.w_bulk == 0
    return sk.render(p, 16, 4096, 4098, "bf16")


def test_only_the_gemm_kernels_are_launched_dependent() -> None:
    assert [ln.function for ln in _skinny_build().launches if ln.pdl] == [sk.KERNEL]
    unfused = sk.render(sk.plan(16, 8192, 8192, "bf16", H200, fuse=False), 16, 8192, 8192, "bf16")
    assert [ln.function for ln in unfused.launches if ln.pdl] == [sk.KERNEL]  # the add waits as usual
    assert not any(ln.pdl for ln in _register_ring_build().launches)  # its loads start at once
    assert not any(ln.pdl for ln in _sm90_build().launches)
    # the Hopper GEMM's decode tiles (ADR-0011) are; after K's padding kernel too (it waits for it)
    assert [ln.function for ln in _decode_tile_build().launches if ln.pdl] == [codegen.KERNEL]
    padded = _decode_tile_build(k=8190)
    assert [ln.function for ln in padded.launches] == [codegen.PAD_KERNEL, codegen.PAD_KERNEL, codegen.KERNEL]
    assert [ln.pdl for ln in padded.launches] == [False, False, True]


def _sass(source: str, options: tuple[str, ...], tmp_path: Path) -> str:
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (CUDA toolkit or the nvidia-cuda-cuobjdump wheel)")
    report = compile_cubin(source, "sm_90a", options)
    assert report.ok, report.log
    path = tmp_path / "k.cubin"
    path.write_bytes(report.cubin)
    env = dict(os.environ)
    env["PATH"] = str(Path(tool).parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([tool, "--dump-sass", str(path)], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0 and "nvdisasm" in proc.stderr:
        pytest.skip("cuobjdump needs nvdisasm, not found")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _functions(sass: str) -> dict[str, list[str]]:
    """Each function's opcodes (predicates and modifiers dropped), in address order."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in sass.splitlines():
        if m := re.search(r"Function : (\S+)", line):
            name = m[1]
            out[name] = []
        elif name and (m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)):
            out[name].append(m[1].split(".")[0])
    return out


@pytest.mark.parametrize("make", [_skinny_build, _decode_tile_build], ids=["decode path", "decode tile"])
def test_the_dependency_wait_comes_before_any_global_access(make, tmp_path: Path) -> None:
    build = make()
    ops = _functions(_sass(build.source, build.options, tmp_path))
    for ln in build.launches:
        if not ln.pdl:
            continue
        body = ops[ln.function]
        assert "ACQBULK" in body, f"{ln.function}: no griddepcontrol.wait"
        first_global = next(i for i, op in enumerate(body) if op in GLOBAL_OPS)
        assert body.index("ACQBULK") < first_global, f"{ln.function}: {body[first_global]} before the wait"
        assert "PREEXIT" not in body, f"{ln.function}: an early griddepcontrol.launch_dependents"


@pytest.mark.parametrize("value", ["maybe", "2", "off please"])
def test_a_malformed_switch_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from engine.backends.base import RunFailure

    monkeypatch.setenv(pdl.ENV_OFF, value)
    with pytest.raises(RunFailure, match="SOL_COCKPIT_NO_PDL") as exc:
        pdl.enabled((9, 0))
    assert exc.value.status == "invalid"


@pytest.mark.parametrize("value,off", [("1", True), ("TRUE", True), ("0", False), ("no", False), ("", False)])
def test_the_switch_reads_yes_and_no(monkeypatch: pytest.MonkeyPatch, value: str, off: bool) -> None:
    monkeypatch.setenv(pdl.ENV_OFF, value)
    assert pdl.switched_off() is off
