"""`tui inspect` given what a hostile user would give it: special files and huge sparse ones are refused
or read to a limit in under a second; crafted ELF headers and fat binaries cannot make it loop; ldd
and cuobjdump run by absolute path, never from the working folder, with the file after `--`; names
from the binary, ldd and the file system reach stdout as text, never as terminal escapes."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import time
from pathlib import Path

import pytest

from engine.binary_inspect import report as report_mod
from engine.binary_inspect.fatbin import FATBIN_MAGIC, scan
from tests.unit.test_fuzz_inputs import run_main

pytestmark = pytest.mark.timeout(60)

ESC = "\x1b]0;owned\x07\x1b[2J[bold]boss[/]"


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch):
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda index: None)


def elf(needed: list[bytes] = (), *, shnum: int | None = None, shentsize: int = 64, shoff: int | None = None,
        sections: bool = True, body: bytes = b"") -> bytes:
    """A little-endian ELF64 shared library for x86-64 naming ``needed`` in its .dynamic section,
    its header fields overridable, with ``body`` appended (outside every section)."""
    dynstr = b"\0" + b"".join(n + b"\0" for n in needed)
    offs, at = [], 1
    for n in needed:
        offs.append(at)
        at += len(n) + 1
    dynamic = b"".join(struct.pack("<qQ", 1, o) for o in offs) + struct.pack("<qQ", 0, 0)
    shstr = b"\0.dynstr\0.dynamic\0.shstrtab\0"
    data = dynstr + dynamic + shstr
    base = 64
    sh = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
          struct.pack("<IIQQQQIIQQ", 1, 3, 2, 0, base, len(dynstr), 0, 0, 1, 0),
          struct.pack("<IIQQQQIIQQ", 9, 6, 3, 0, base + len(dynstr), len(dynamic), 1, 0, 8, 16),
          struct.pack("<IIQQQQIIQQ", 18, 3, 0, 0, base + len(dynstr) + len(dynamic), len(shstr), 0, 0, 1, 0)]
    table_at = base + len(data)
    header = (b"\x7fELF\x02\x01\x01" + b"\0" * 9
              + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at if shoff is None else shoff, 0, 64, 56, 0,
                            shentsize, (4 if shnum is None else shnum) if sections else 0, 3))
    return header + data + (b"".join(sh) if sections else b"") + body


def _inspect(path: Path | str, *extra: str) -> tuple[int | str, str, str, float]:
    t0 = time.monotonic()
    code, out, err = run_main(["inspect", str(path), "--profile", "h200", *extra])
    return code, out, err, time.monotonic() - t0


@pytest.mark.parametrize("make", [
    lambda d: Path("/proc/self/mem"),
    lambda d: Path("/dev/zero"),
    lambda d: Path("/dev/null"),
    lambda d: (os.mkfifo(d / "fifo"), d / "fifo")[1],
    lambda d: _sparse(d / "zeros", b""),
    lambda d: _sparse(d / "elf", Path("/bin/ls").read_bytes()),
    lambda d: _sparse(d / "crafted", elf([b"libcudart.so.12"])),
], ids=["proc-mem", "dev-zero", "dev-null", "fifo", "sparse-2g", "sparse-2g-elf", "sparse-2g-crafted"])
def test_special_and_huge_files_are_answered_in_under_a_second(tmp_path, make):
    path = make(tmp_path)
    code, out, err, took = _inspect(path, "--json")
    assert code in (0, 1, 2) and "Traceback" not in err, err
    assert took < 1.0, took
    if code == 2:
        assert str(path) in err


def _sparse(path: Path, head: bytes) -> Path:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(2 * 2**30)
    return path


@pytest.mark.parametrize("data, words", [
    (elf([b"libcudart.so.12"], shnum=65535, shentsize=0), "entries of 0 bytes"),
    (elf([b"libcudart.so.12"], shnum=60000), "past the end"),
    (elf([b"libcudart.so.12"], shoff=2**62), "past the end"),
    (elf([b"libcudart.so.12"], shnum=0, shoff=64), "no CUDA code"),
    (elf([b"libcudart.so.12"])[:100], "damaged"),
], ids=["entries-of-0-bytes", "table-past-the-end", "offset-past-the-end", "extended-count", "truncated"])
def test_crafted_headers_are_refused_at_once(tmp_path, data, words):
    path = tmp_path / "crafted.so"
    path.write_bytes(data)
    code, _, err, took = _inspect(path)
    assert code == 2 and words in err and took < 1.0, err


def test_unterminated_names_and_many_needed_entries_stay_bounded(tmp_path):
    """65 536 DT_NEEDED entries into a megabyte without a NUL: read to their caps, in well under a second."""
    base = elf([b"libcudart.so.12"])
    path = tmp_path / "many.so"
    path.write_bytes(base[:64 + 17] + b"A" * 2**20 + base[64 + 17:])  # the string table's first name runs on
    code, _, err, took = _inspect(path)
    assert code in (0, 1, 2) and "Traceback" not in err and took < 2.0


def _quadratic_fatbins(size: int) -> bytes:
    """64-byte blocks, each an entry header (64 bytes, empty payload) followed by a container header
    whose entries chain to one byte short of the end: every container walks to the end and fails."""
    blocks = []
    n = size // 64
    for i in range(n):
        at = i * 64
        entry = struct.pack("<HHIQ", 2, 0, 64, 0)
        container_end = n * 64 - 1
        container = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, container_end - (at + 32))
        blocks.append(entry + container + entry + b"\0" * 16)
    return b"".join(blocks)


def test_fat_binaries_are_scanned_in_linear_time():
    small, large = _quadratic_fatbins(256 * 1024), _quadratic_fatbins(4 * 2**20)
    t0 = time.monotonic()
    scan(small)
    t_small = time.monotonic() - t0
    t0 = time.monotonic()
    found = scan(large)
    t_large = time.monotonic() - t0
    assert found.images == [] and found.damaged > 0
    assert t_large < 3.0 and t_large < 40 * t_small + 0.5, (t_small, t_large)


def test_a_crafted_4_mb_fat_binary_through_the_cli(tmp_path):
    path = tmp_path / "fat.so"
    path.write_bytes(elf([b"libcudart.so.12"], sections=False) + _quadratic_fatbins(4 * 2**20))
    code, _, err, took = _inspect(path)
    assert code in (0, 1, 2) and "Traceback" not in err and took < 5.0


def _fake_tool(folder: Path, name: str, marker: Path, output: str = "") -> None:
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!/bin/sh\necho \"$@\" > '{marker}'\nprintf '%s\\n' '{output}'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


def test_programs_in_the_working_folder_never_run(tmp_path, monkeypatch):
    if shutil.which("ldd") is None:
        pytest.skip("no ldd")
    work = tmp_path / "work"
    marker = tmp_path / "ran"
    for name in ("ldd", "cuobjdump", "uname"):
        _fake_tool(work, name, marker)
    shutil.copy("/bin/ls", work / "--version")
    (work / "app.so").write_bytes(elf([b"libcudart.so.12"]))
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", ".:bin::" + os.environ["PATH"])
    for target in ("./app.so", "./--version"):
        code, out, err, _ = _inspect(target, "--json")
        assert code in (0, 1, 2) and "Traceback" not in err, err
        assert not marker.exists(), marker.read_text()
    code, out, err, _ = _inspect("./--version")
    assert "no CUDA code" in err and "libc.so" in err  # ldd read the file; it was not asked for its version


def test_ldd_gets_the_file_after_dashdash(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    marker = tmp_path / "args"
    _fake_tool(tools, "ldd", marker, "\tlibcudart.so.12 => not found")
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    path = tmp_path / "--version"
    path.write_bytes(elf([b"libcudart.so.12"]))
    monkeypatch.chdir(tmp_path)
    code, _, err, _ = _inspect("./--version", "--json")
    assert code in (0, 1) and marker.read_text().split() == ["--", str(path)], err


def test_names_from_the_binary_ldd_and_the_file_system_never_reach_stdout_raw(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    hostile_lib = "libcuda" + ESC + ".so.1"
    _fake_tool(tools, "ldd", tmp_path / "args", f"\t{hostile_lib} => not found\n\tlibcudart.so.12 => /x{ESC} (0x1)")
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    path = tmp_path / ("app" + ESC.replace("/", "_") + ".so")
    path.write_bytes(elf([("libcudart.so.12" + ESC).encode(), ("libcublas" + ESC).encode()]))
    for extra in ((), ("--json",)):
        code, out, err, _ = _inspect(path, *extra)
        assert code in (0, 1), err
        assert "\x1b" not in out and "\x07" not in out
        if not extra:
            assert "\\x1b]0;owned" in out and "[bold]boss[/]" in out
        else:
            doc = json.loads(out)
            assert "\\x1b" in doc["path"] and "\\x1b" in doc["runtime"]["soname"]
            assert [lib["found"] for lib in doc["libraries"]] == [False, True]
            assert any("\\x1b" in f["title"] for f in doc["findings"])


@pytest.mark.slow
def test_a_data_section_claiming_2_gb_is_searched_to_the_limit_and_said(tmp_path):
    """A sparse 2 GB file whose data section claims all of it: 1 GiB is searched, linearly (1.4 s
    once the file's pages are cached, a few seconds before), and the report says it stopped there."""
    data = bytearray(elf([b"libcudart.so.12"]))
    table_at = struct.unpack_from("<Q", data, 40)[0]
    struct.pack_into("<I", data, table_at + 64 + 4, 1)  # .dynstr as PROGBITS data
    struct.pack_into("<Q", data, table_at + 64 + 32, 2 * 2**30 - 64)
    path = tmp_path / "claims.so"
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(2 * 2**30)
    code, out, err, took = _inspect(path, "--json")
    assert code in (0, 1) and took < 10.0, (err, took)
    assert any(f["id"] == "arch.scan-limit" for f in json.loads(out)["findings"])
