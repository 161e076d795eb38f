"""`tui kernels` lists every kernel's MEMORY_PIPELINING values in one order (off, then more stages)
and names the profile whose limits it used (issue 47, defect 21)."""

from __future__ import annotations

import json

from tui.cli.main import main


def test_stages_ascend_for_every_kernel_and_the_profile_is_named(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["kernels", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    orders = [d["memory_pipelining"] for k in doc["kernels"] for d in k["dtypes"].values() if d["memory_pipelining"]]
    assert len(orders) >= 8 and all(o == sorted(o) for o in orders)
    assert main(["kernels", "--profile", "a100"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("What fits profile a100-sxm-80gb")
