"""bench.product_data.tuned_defaults: tune outputs (one JSON document or JSON lines) to a table of tuned defaults;
``--update`` keeps an existing table's entries except the shapes tuned again, whose new tune
replaces them even where the old time was lower."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib

from bench.product_data import tuned_defaults


def _shape(m: int, n: int, k: int, block: str, stages: int, ms: float, schedule: dict | None = None) -> dict:
    return {"kernel": "gemm_residual", "dtype": "bf16", "shape": {"m": m, "n": n, "k": k}, "fusion": True,
            "profile": "h200", "gpu": "NVIDIA H200", "sm_count": 132, "regime": "burst", "simulated": False,
            "timed": 40, "best": {"block_size": block, "memory_pipelining": stages, "schedule": schedule or {},
                                   "median_ms": ms},
            "default": {"median_ms": ms * 1.05}, "peers": {"cublas_gemm_beta1": {"median_ms": ms}}}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert tuned_defaults.main(argv) == 0
    return tomllib.loads(capsys.readouterr().out)


def test_json_lines_and_the_fastest_of_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = tmp_path / "tune.jsonl"
    lines.write_text("\n".join(json.dumps({"shapes": [s]}) for s in (
        _shape(4096, 4096, 4096, "128x256", 4, 0.190), _shape(4096, 4096, 4096, "128x128", 5, 0.185))) + "\n")
    doc = _run(["--profile", "h200", str(lines)], capsys)
    assert [(e["shape"], e["block_size"]) for e in doc["entry"]] == [("k=4096,m=4096,n=4096", "128x128")]


def test_update_replaces_the_retuned_shapes_and_keeps_the_rest(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"shapes": [_shape(4096, 4096, 4096, "128x256", 4, 0.180),
                                          _shape(8, 4096, 4096, "8x16", 6, 0.012)]}))
    table = tmp_path / "h200.toml"
    table.write_text(_table_text(["--profile", "h200", str(old)], capsys))
    new = tmp_path / "new.json"
    new.write_text(json.dumps({"shapes": [_shape(4096, 4096, 4096, "128x256", 4, 0.182, {"raster": "group"})]}))
    doc = _run(["--profile", "h200", "--update", str(table), str(new)], capsys)
    by_shape = {e["shape"]: e for e in doc["entry"]}
    assert set(by_shape) == {"k=4096,m=4096,n=4096", "k=4096,m=8,n=4096"}
    assert by_shape["k=4096,m=4096,n=4096"]["schedule"] == {"raster": "group"}  # the re-tune, though slower
    assert by_shape["k=4096,m=8,n=4096"]["block_size"] == "8x16"


def _table_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert tuned_defaults.main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("content", [None, "entry = [[[", "\xff\xfe"])
def test_an_unreadable_update_table_exits_2_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             content: str | None) -> None:
    tune = tmp_path / "tune.json"
    tune.write_text(json.dumps({"shapes": [_shape(4096, 4096, 4096, "128x256", 4, 0.18)]}))
    table = tmp_path / "h200.toml"
    if content is not None:
        table.write_bytes(content.encode("latin-1"))
    with pytest.raises(SystemExit) as exc:
        tuned_defaults.main(["--profile", "h200", "--update", str(table), str(tune)])
    assert exc.value.code == 2 and "--update" in capsys.readouterr().err
    if content is not None:
        assert table.read_bytes() == content.encode("latin-1")  # left as it was
