"""`tui diagnose` on a log from elsewhere (issue 47, defect 18): no advice that only holds inside the
cockpit, one Xid line fires one rule, and PyTorch's out-of-memory is PyTorch's."""

from __future__ import annotations

import json
import re

import pytest

from engine.troubleshoot import match_text, rules
from tui.cli.main import main

TRAINING_LOG = """\
Epoch 3: 100%|##########| 500/500 [01:02<00:00]
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    loss.backward()
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call.
[ 1123.9] NVRM: Xid (PCI:0000:18:00): 31, pid=4242, name=python, Ch 00000008, intr 00000000
[ 1124.0] python[4242]: segfault at 10 ip 00007f sp 00007ffd error 6 in libcuda.so.1
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB
CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`
RuntimeError: CUDA error: too many resources requested for launch
RuntimeError: CUDA error: invalid configuration argument
cupy.cuda.compiler.CompileException: nvrtc: error: invalid value for --gpu-architecture (-arch)
ptxas error   : Entry function 'k' uses too much shared data (0x1c000 bytes, 0xc000 max)
NVMLError_NotSupported: Not Supported
NVML Shared Library Not Found
OSError: [Errno 28] No space left on device
"""
COCKPIT_WORDS = re.compile(r"cockpit|engine process|\btui\b|--backend|sol-cockpit|BLOCK_SIZE|MEMORY_PIPELINING|"
                           r"--device N\b|SOL_COCKPIT", re.IGNORECASE)


def test_a_third_party_log_gets_no_cockpit_advice(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text(TRAINING_LOG)
    assert main(["diagnose", str(log), "--json"]) == 0
    matches = json.loads(capsys.readouterr().out)["matches"]
    assert len(matches) >= 8
    for m in matches:
        for field in ("title", "cause", "fix", "command"):
            assert not COCKPIT_WORDS.search(m[field] or ""), (m["id"], field, m[field])


def test_rules_a_log_can_fire_keep_cockpit_notes_apart():
    for r in rules():
        if r.patterns and r.id not in ("ptx-jit-warmup", "binary-smoke-failed", "running-as-root"):
            for field in ("title", "fix", "command"):
                assert not COCKPIT_WORDS.search(getattr(r, field) or ""), (r.id, field)


def test_one_xid_line_fires_one_rule():
    line = "[ 1123.9] NVRM: Xid (PCI:0000:18:00): 31, pid=4242, name=python, Ch 00000008"
    assert [m.id for m in match_text(line)] == ["xid-app-fault"]
    both = line + "\n[ 1130.2] NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed\n"
    got = {m.id: m.evidence for m in match_text(both)}
    assert set(got) == {"xid-app-fault", "xid-other"} and ": 154," in got["xid-other"]


@pytest.mark.parametrize("text", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
    "RuntimeError: CUDA error: out of memory",
])
def test_a_torch_oom_is_not_filed_under_cupy(text):
    ids = [m.id for m in match_text(text)]
    assert ids[0] == "torch-out-of-memory" and "cupy-out-of-memory" not in ids
