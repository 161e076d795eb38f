"""`tui inspect`'s parts, without nvcc: fat binary headers, the compatibility rules, ldd's output,
package names, the runtime against the driver, bounded smoke output, and the rules cited."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest

from engine.binary_inspect.compat import cuda_for_ptx, judge, ptx_compiles_for, sass_runs_on
from engine.binary_inspect.fatbin import (
    FATBIN_MAGIC,
    FLAG_ARCH_SPECIFIC,
    FLAG_COMPRESSED,
    FLAG_FAMILY_SPECIFIC,
    CodeImage,
    parse_cuobjdump_list,
    scan,
)
from engine.binary_inspect.libs import packages, parse_ldd, runtime_findings
from engine.binary_inspect.model import CudaRuntime
from engine.troubleshoot import rules

PKG = Path(__file__).resolve().parents[2] / "engine" / "binary_inspect"


def _entry(kind: int, arch: int, flags: int = 0x11, isa: tuple[int, int] = (1, 8), payload: bytes = b"x" * 16) -> bytes:
    head = struct.pack("<HHIQIIHHI", kind, 0x101, 64, len(payload), 0, 0, isa[1], isa[0], arch)
    head += b"\0" * (0x28 - len(head)) + struct.pack("<I", flags)
    return head + b"\0" * (64 - len(head)) + payload


def _container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def test_fatbin_headers_give_arch_variant_and_ptx_isa():
    data = b"\0" * 8 + _container(_entry(2, 80), _entry(1, 90, 0x8011 | FLAG_ARCH_SPECIFIC, (9, 0))) + \
        _container(_entry(2, 100, FLAG_FAMILY_SPECIFIC | FLAG_COMPRESSED))
    found = scan(data)
    assert found.containers == 2 and found.damaged == 0
    assert [(i.name, i.container, i.ptx_isa) for i in found.images] == [
        ("sm_80", 0, None), ("compute_90a", 0, (9, 0)), ("sm_100f", 1, None)]
    assert found.images[2].compressed


def test_fatbin_with_a_size_past_the_end_is_damaged_not_read():
    bad = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, 10_000) + _entry(2, 80)
    found = scan(bad)
    assert found.images == [] and found.damaged == 1


def test_cuobjdump_listing():
    text = "ELF file    1: app.1.sm_80.cubin\nPTX file    1: app.1.sm_80.ptx\nELF file    2: app.2.sm_90a.cubin\n"
    assert [i.name for i in parse_cuobjdump_list(text)] == ["sm_80", "compute_80", "sm_90a"]


@pytest.mark.parametrize(("image", "cc", "runs"), [
    (CodeImage("sass", 80), (8, 0), True), (CodeImage("sass", 80), (8, 6), True), (CodeImage("sass", 80), (9, 0), False),
    (CodeImage("sass", 86), (8, 0), False), (CodeImage("sass", 90, "a"), (9, 0), True),
    (CodeImage("sass", 90, "a"), (10, 0), False), (CodeImage("sass", 100, "a"), (10, 3), False),
    (CodeImage("sass", 100, "f"), (10, 3), True), (CodeImage("sass", 100, "f"), (12, 0), False),
])
def test_sass_compatibility(image, cc, runs):
    assert sass_runs_on(image, cc) is runs


@pytest.mark.parametrize(("image", "cc", "runs"), [
    (CodeImage("ptx", 80), (9, 0), True), (CodeImage("ptx", 80), (12, 0), True), (CodeImage("ptx", 90), (8, 9), False),
    (CodeImage("ptx", 90, "a"), (10, 0), False), (CodeImage("ptx", 90, "a"), (9, 0), True),
    (CodeImage("ptx", 100, "f"), (10, 3), True), (CodeImage("ptx", 100, "f"), (12, 0), False),
])
def test_ptx_compatibility(image, cc, runs):
    assert ptx_compiles_for(image, cc) is runs


def test_sass_is_preferred_to_ptx_and_ptx_needs_its_cuda():
    imgs = [CodeImage("sass", 80), CodeImage("ptx", 80, ptx_isa=(8, 7)), CodeImage("sass", 90)]
    assert judge(imgs, (9, 0)).via == "sass" and judge(imgs, (9, 0)).image.name == "sm_90"
    v = judge(imgs[:2], (10, 0))
    assert v.via == "ptx-jit" and v.ptx_needs_cuda == (12, 8)
    assert cuda_for_ptx((9, 1)) == (13, 1) and cuda_for_ptx((5, 0)) is None
    assert "sm_90a is arch-specific" in judge([CodeImage("sass", 90, "a")], (10, 0)).reason


def test_ldd_lines():
    libs = parse_ldd("\tlinux-vdso.so.1 (0x00007ffd)\n\tlibfoo.so => not found\n"
                     "\tlibcudart.so.12 => /usr/local/cuda/lib64/libcudart.so.12 (0x00007f00)\n"
                     "\t/lib64/ld-linux-x86-64.so.2 (0x00007f01)\n")
    assert [(lib.name, lib.found) for lib in libs] == [("libfoo.so", False), ("libcudart.so.12", True)]


def test_package_names_for_common_cuda_libraries():
    assert "pip install nvidia-cublas-cu12" in packages("libcublas.so.12", None)
    assert "pip install nvidia-cublas" in packages("libcublas.so.13", None)  # CUDA 13 wheels: no suffix
    assert "pip install nvidia-cudnn-cu13" in packages("libcudnn.so.9", 13)
    assert any("libcudart" not in p and "cuda-cudart-12" in p for p in packages("libcudart.so.12", None))
    assert "driver" in packages("libcuda.so.1", 12)[0]
    assert packages("libfoo.so", 12) == []


def test_runtime_against_the_driver():
    rt = CudaRuntime(linkage="shared", soname="libcudart.so.12", version="12.8.90", driver_cuda="12.4")
    (f,) = runtime_findings(rt)
    assert f.severity == "warn" and f.id == "runtime.minor-newer-than-driver"
    assert runtime_findings(rt.model_copy(update={"driver_cuda": "13.0"})) == []
    (f,) = runtime_findings(rt.model_copy(update={"driver_cuda": "11.8"}))
    assert f.severity == "error" and f.rule == "cuda-insufficient-driver"


def test_every_rule_cited_exists():
    known = {r.id for r in rules()}
    cited = set()
    for path in PKG.glob("*.py"):
        cited |= set(re.findall(r'rule="([a-z0-9-]+)"', path.read_text()))
    assert cited >= {"cuda-no-kernel-image", "ptx-jit-warmup", "missing-shared-object", "cuda-insufficient-driver",
                     "cuda-unsupported-ptx", "task-timeout-hang", "binary-smoke-failed"}
    assert cited <= known, cited - known



def test_smoke_output_is_bounded_and_its_process_killed():
    """A program that floods its output: the run keeps the two ends only and stops at the timeout."""
    from engine.binary_inspect.smoke import KEEP_BYTES, TAIL_CHARS, run_smoke

    yes = shutil.which("yes")
    if yes is None:
        pytest.skip("no `yes` program here")
    smoke, text = run_smoke(Path(yes), ["spam"], timeout_s=0.5)
    assert smoke.timed_out and smoke.output_bytes > 2 * KEEP_BYTES
    assert len(text) < 2 * KEEP_BYTES + 100 and "bytes not kept" in text
    assert len(smoke.output_tail) <= TAIL_CHARS and smoke.output_tail.endswith("spam\n")


def test_fatbin_found_outside_its_section():
    """cuFFT keeps its containers in .data: they are found wherever they are, at any offset."""
    data = b"\x01" * 13 + _container(_entry(2, 90)) + b"\x50\xed\x55\xba" + b"\0" * 30
    found = scan(data)
    assert [i.name for i in found.images] == ["sm_90"] and found.damaged == 1
