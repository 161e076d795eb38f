"""`tui tune --import`: each entry is checked as a task and planned on its GPU's profile before it is
stored; refused entries are named with their index and field and the rest imported; text from the
file is stored visible; the import is linear in the entries; `--export` never writes through a link."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import tomli_w

from engine.errors import InputError
from engine.planner import plan
from engine.profiles import load_profiles
from engine.store import ResultStore
from engine.task import TaskSpec
from engine.tuning_cache import TuningCache
from kernels import get_spec
from tests.unit.test_fuzz_inputs import run_main

SHAPE = {"m": 8, "n": 4096, "k": 4096}


@pytest.fixture(scope="module")
def good_entry() -> dict:
    p = plan(TaskSpec(kernel="gemm_residual", shape=SHAPE), load_profiles().get("h200"))
    return {"gpu": "SIMULATED h200", "sm_count": 132, "kernel": "gemm_residual",
            "source_hash": get_spec("gemm_residual").source_hash(), "dtype": "bf16", "shape": "k=4096,m=8,n=4096",
            "fusion": True, "regime": "burst", "block_size": str(p.task.block_size),
            "memory_pipelining": p.task.memory_pipelining, "schedule": dict(p.schedule), "median_ms": 0.1,
            "candidates": 10, "simulated": True, "tuned_at": "2026-01-01T00:00:00+00:00", "host": "node-1"}


def export_file(path: Path, entries: list[dict], host: str = "node-1") -> Path:
    path.write_text(tomli_w.dumps({"version": 1, "host": host, "entry": entries}))
    return path


HOSTILE = [
    ({"memory_pipelining": "abc"}, "memory_pipelining"),
    ({"memory_pipelining": -3}, "memory_pipelining"),
    ({"memory_pipelining": 10**18}, "memory_pipelining"),
    ({"schedule": {"nonsense": 3}}, "schedule"),
    ({"schedule": "consumers=pingpong"}, "schedule"),
    ({"block_size": "7x7x7x7", "schedule": {}}, "block_size"),
    ({"shape": "m=1,n="}, "shape"),
    ({"shape": "k=4096,m=" + "9" * 30 + ",n=4096"}, "shape"),
    ({"dtype": "int3"}, "dtype"),
    ({"gpu": "NVIDIA Quantum 9000"}, "gpu"),
    ({"gpu": "NVIDIA H100 [bold]x[/]"}, "gpu"),
    ({"regime": "forever"}, "regime"),
    ({"sm_count": -1}, "sm_count"),
    ({"median_ms": float("inf")}, "median_ms"),
    ({"tuned_at": "yesterday"}, "tuned_at"),
    ({"host": 5}, "host"),
]


def test_each_bad_entry_is_refused_by_index_and_field_and_the_rest_imported(tmp_path, good_entry):
    entries = [good_entry] + [{**good_entry, **change, "sm_count": 200 + i}
                              for i, (change, _) in enumerate(HOSTILE)]
    entries[1 + HOSTILE.index(({"sm_count": -1}, "sm_count"))]["sm_count"] = -1
    missing = {k: v for k, v in good_entry.items() if k != "block_size"}
    path = export_file(tmp_path / "x.toml", [*entries, missing, "not a table"])
    store = ResultStore(tmp_path / "s.db")
    report = TuningCache(store).import_report(path)
    assert report.imported == 1 and report.skipped == 0
    assert [i for i, _ in report.refused] == list(range(2, len(entries) + 3))
    for (i, why), (_, field) in zip(report.refused, HOSTILE, strict=False):
        assert why.startswith(field), (i, why)
    assert report.refused[-2][1].startswith("block_size: missing")
    assert report.refused[-1][1].startswith("entry: not a table")
    assert len(store.list_tuned()) == 1
    # the CLI: exit 2 naming the file and each refused entry; the good one stored
    code, out, err = run_main(["tune", "--import", str(path), "--store", str(tmp_path / "t.db"), "--json"])
    assert code == 2 and "Traceback" not in err
    assert str(path) in err and "entry 2: memory_pipelining" in err and "imported 1" in err
    assert len(ResultStore(tmp_path / "t.db").list_tuned()) == 1


def test_an_imported_entry_is_used_and_its_text_shown_escaped(tmp_path, good_entry):
    hostile = "evil\x1b]0;owned\x07\x1b[2J[bold red]boss[/]\n#SBATCH"
    path = export_file(tmp_path / "x.toml", [{**good_entry, "origin": hostile, "host": hostile}], host=hostile)
    store_path = tmp_path / "s.db"
    code, _, err = run_main(["tune", "--import", str(path), "--store", str(store_path)])
    assert code == 0, err
    row = ResultStore(store_path).list_tuned()[0]
    assert "\x1b" not in row["origin"] + row["host"] and "[" not in row["origin"] and "\n" not in row["host"]
    assert "\\x1b" in row["origin"]
    code, out, err = run_main(["bench", "--backend", "sim", "--profile", "h200", "--shape", "m=8,n=4096,k=4096",
                               "--store", str(store_path), "--iterations", "2", "--warmup", "0", "--no-peers"])
    assert code == 0, err
    assert "imported from evil\\x1b" in out.replace("\n", "")
    assert "\x1b" not in out and "\x07" not in out


def test_a_damaged_stored_entry_is_a_cache_miss_not_a_traceback(tmp_path, good_entry):
    store = ResultStore(tmp_path / "s.db")
    store.put_tuned({**good_entry, "shape": "k=4096,m=8,n=4096", "memory_pipelining": "abc", "origin": None})
    code, _, err = run_main(["bench", "--backend", "sim", "--profile", "h200", "--shape", "m=8,n=4096,k=4096",
                             "--store", str(tmp_path / "s.db"), "--iterations", "2", "--warmup", "0", "--no-peers"])
    assert code == 0, err


def _many(good_entry: dict, n: int) -> list[dict]:
    return [{**good_entry, "sm_count": i + 1} for i in range(n)]


def test_the_import_is_linear_in_the_entries(tmp_path, good_entry):
    small = export_file(tmp_path / "small.toml", _many(good_entry, 300))
    large = export_file(tmp_path / "large.toml", _many(good_entry, 3000))
    t0 = time.monotonic()
    TuningCache(ResultStore(tmp_path / "a.db")).import_(small)
    t_small = time.monotonic() - t0
    t0 = time.monotonic()
    assert TuningCache(ResultStore(tmp_path / "b.db")).import_(large) == (3000, 0)
    t_large = time.monotonic() - t0
    assert t_large < 5.0 and t_large < 10 * t_small + 1.0, (t_small, t_large)


@pytest.mark.slow
def test_thirty_thousand_entries_in_seconds(tmp_path, good_entry):
    """30 000 distinct shapes, each planned (an earlier import took over 300 s)."""
    entries = [{**good_entry, "shape": f"k=4096,m=8,n={4096 + 16 * i}"} for i in range(30_000)]
    path = export_file(tmp_path / "big.toml", entries)
    t0 = time.monotonic()
    assert TuningCache(ResultStore(tmp_path / "s.db")).import_(path) == (30_000, 0)
    assert time.monotonic() - t0 < 30


def test_export_never_writes_through_a_link(tmp_path, good_entry):
    store = ResultStore(tmp_path / "s.db")
    store.put_tuned({**good_entry, "origin": None})
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "cache.toml"
    os.symlink(victim, tmp_path / "cache.toml.tmp")
    assert TuningCache(store).export(out) == 1
    assert victim.read_text() == "precious" and "[[entry]]" in out.read_text()
    link = tmp_path / "link.toml"
    os.symlink(victim, link)
    with pytest.raises(InputError, match="symbolic link"):
        TuningCache(store).export(link)
    assert victim.read_text() == "precious"
    for bad in (tmp_path / "no" / "such" / "dir.toml", tmp_path, tmp_path / ("x" * 300)):
        code, _, err = run_main(["tune", "--export", str(bad), "--store", str(tmp_path / "s.db")])
        assert code == 2 and "--export" in err and "Traceback" not in err, err
