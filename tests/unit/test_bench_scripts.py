"""The GPU-machine bench scripts refuse malformed arguments before touching a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ncu_probe_unknown_case_exits_2_naming_the_flag():
    pytest.importorskip("cupy")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "ncu_probe.py"), "--cases", "seed-bf16,bogus"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--cases" in proc.stderr and "bogus" in proc.stderr and "seed-fp16" in proc.stderr
