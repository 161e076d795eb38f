"""Wherever a command takes a path it reads, a FIFO, a device, /proc/self/mem and a 2 GB sparse file
are refused (or read to a limit) in under a second: exit 2 naming the file, no traceback, no hang."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine.binary_inspect import report as report_mod
from tests.unit.test_fuzz_inputs import run_main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def specials(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("special")
    os.mkfifo(d / "fifo.toml")
    with open(d / "sparse.toml", "wb") as f:
        f.truncate(2 * 2**30)
    return {"fifo": str(d / "fifo.toml"), "sparse": str(d / "sparse.toml"), "zero": "/dev/zero",
            "proc-mem": "/proc/self/mem"}


COMMANDS = {
    "bench --task": lambda p, s: ["bench", "--backend", "sim", "--no-store", "--task", p],
    "bench --kernel-file": lambda p, s: ["bench", "--backend", "sim", "--no-store", "--kernel-file", p],
    "kernels --kernel-file": lambda p, s: ["kernels", "--kernel-file", p],
    "tune --shapes": lambda p, s: ["tune", "--backend", "sim", "--shapes", p, "--store", s],
    "tune --import": lambda p, s: ["tune", "--import", p, "--store", s],
    "batch": lambda p, s: ["batch", p, "--store", s],
    "inspect": lambda p, s: ["inspect", p, "--profile", "h200"],
    "history --store": lambda p, s: ["history", "--store", p],
    "fleet": lambda p, s: ["fleet", str(Path(p).parent) if p.endswith(".toml") else p],
}


@pytest.mark.parametrize("kind", ["fifo", "sparse", "zero", "proc-mem"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_special_files_are_refused_in_under_a_second(specials, tmp_path, monkeypatch, command, kind):
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda index: None)
    path = specials[kind]
    argv = COMMANDS[command](path, str(tmp_path / "s.db"))
    t0 = time.monotonic()
    code, out, err = run_main(argv)
    took = time.monotonic() - t0
    assert took < 1.0, (argv, took)
    assert "Traceback" not in err
    if command == "fleet":  # a folder holding a FIFO and a sparse file: neither is a report
        assert code in (1, 2), err
        return
    assert code == 2, (argv, err)
    assert path in err, err
