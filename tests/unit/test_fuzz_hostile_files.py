"""Property-based fuzzing of the files that come from elsewhere, in the manner of test_fuzz_inputs.py:
tuning-cache imports, fleet reports, ELF headers and export paths. Whatever comes in: a result, or
exit 2 naming the file and the field; never a traceback, never a hang, never an escape sequence on
stdout, never a write through a link. Seeded and bounded."""

from __future__ import annotations

import json
import os
import re
import struct
import tempfile
import time
from pathlib import Path

import pytest
import tomli_w
from hypothesis import event, given
from hypothesis import strategies as st

from engine.binary_inspect import report as report_mod
from engine.planner import plan
from engine.profiles import load_profiles
from engine.store import ResultStore
from engine.task import TaskSpec
from engine.tuning_cache import as_knobs
from kernels import get_spec
from tests.unit.test_fuzz_inputs import fuzz, run_main, strict_json
from tests.unit.test_inspect_hostile import elf

pytestmark = pytest.mark.timeout(300)

ESCAPES = ["\x1b]0;owned\x07", "\x1b[2J", "\x1b]52;c;eA==\x07", "\x9b31m", "[bold]", "[/]", "\r", "\n", "\x00"]
hostile_text = st.one_of(st.text(max_size=12), st.lists(st.sampled_from(ESCAPES + ["a", " "]), max_size=6).map("".join))
toml_values = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.integers(-5, 300), st.booleans(), hostile_text,
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["abc", "off", "128x128", "8x16", "-3", ""]),
    st.lists(st.integers(0, 9), max_size=3), st.dictionaries(st.sampled_from(["cluster", "warps", "x"]),
                                                               st.one_of(st.integers(-2, 99), hostile_text), max_size=3),
)


def _no_escape(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, out[:400]


# --- tuning cache imports --------------------------------------------------------------------------

_PLANNED: dict[str, object] = {}


def _good_entry() -> dict:
    if not _PLANNED:
        p = plan(TaskSpec(kernel="gemm_residual", shape={"m": 8, "n": 4096, "k": 4096}), load_profiles().get("h200"))
        _PLANNED.update({"gpu": "SIMULATED h200", "sm_count": 132, "kernel": "gemm_residual",
                         "source_hash": get_spec("gemm_residual").source_hash(), "dtype": "bf16",
                         "shape": "k=4096,m=8,n=4096", "fusion": True, "regime": "burst", "block_size": str(p.task.block_size),
                         "memory_pipelining": p.task.memory_pipelining, "schedule": dict(p.schedule), "median_ms": 0.1,
                         "candidates": 10, "simulated": True, "tuned_at": "2026-01-01T00:00:00+00:00", "host": "h"})
    return dict(_PLANNED)


entry_keys = st.sampled_from(sorted(["gpu", "sm_count", "kernel", "source_hash", "dtype", "shape", "fusion", "regime",
                                     "block_size", "memory_pipelining", "schedule", "median_ms", "default_ms",
                                     "candidates", "simulated", "tuned_at", "host", "origin", "extra"]))


@st.composite
def exports(draw) -> list:
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        e = _good_entry()
        for key in draw(st.lists(entry_keys, max_size=3, unique=True)):
            if draw(st.integers(0, 5)) == 0:
                e.pop(key, None)
            else:
                e[key] = draw(toml_values)
        entries.append(e)
    if draw(st.integers(0, 8)) == 0:
        entries.append(draw(toml_values))
    return entries


@fuzz(80)
@given(entries=exports(), host=hostile_text)
def test_cache_imports(entries, host):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.toml"
        try:
            path.write_text(tomli_w.dumps({"version": 1, "host": host, "entry": entries}))
        except (TypeError, ValueError):  # a value TOML cannot hold
            return
        store = Path(tmp) / "s.db"
        code, out, err = run_main(["tune", "--import", str(path), "--store", str(store), "--json"])
        event(f"exit {code}")
        assert code in (0, 2), err
        strict_json(out)
        _no_escape(out)
        if code == 2:
            assert str(path) in err and "Traceback" not in err
            named = re.findall(r"entry \d+: ([a-z_]+)", err)
            assert named or "not a tuning export" in err or "TOML" in err, err
            assert set(named) <= {*_good_entry(), "default_ms", "origin", "entry"}, named
        profile = load_profiles().get("h200")
        for row in ResultStore(store).list_tuned():  # what was stored plans without a traceback
            knobs = as_knobs(row)
            assert "\x1b" not in knobs.label and "[" not in knobs.label.split("imported from")[-1]
            shape = dict(kv.split("=") for kv in row["shape"].split(","))
            task = TaskSpec(kernel=row["kernel"], shape={k: int(v) for k, v in shape.items()}, dtype=row["dtype"],
                            fusion=row["fusion"])
            assert plan(task, profile, tuned=knobs).ok


# --- fleet reports ---------------------------------------------------------------------------------

def _base_report() -> dict:
    return {"schema": "sol-cockpit.fleet-report", "version": 1, "host": "node-1", "time": "2026-01-01T00:00:00+00:00",
            "tool_version": "0.1.0", "backend": "sim", "simulated": True, "job": {"NODE_NAME": "node-1"},
            "gpus": [{"index": 0, "uuid": "GPU-1", "name": "SIMULATED H100", "driver_version": "570",
                      "pci_bus_id": "0000:01:00.0", "visible_as": "0"}],
            "check": {"checks": [{"id": "host.user", "status": "pass"}], "ok": True},
            "benches": [{"device": 0, "result": {"status": "ok", "sol_pct": 61.5, "kernel": "gemm_residual",
                                                 "shape": {"m": 8192}, "dtype": "bf16", "profile": "h100-sxm"},
                         "error": None}]}


PATHS = [("host",), ("time",), ("tool_version",), ("backend",), ("gpus", 0, "index"), ("gpus", 0, "name"),
         ("gpus", 0, "uuid"), ("gpus", 0, "visible_as"), ("benches", 0, "device"), ("benches", 0, "error"),
         ("benches", 0, "result", "sol_pct"), ("benches", 0, "result", "status"), ("benches", 0, "result", "kernel"),
         ("check", "checks", 0, "id"), ("check", "checks", 0, "status"), ("job", "NODE_NAME"), ("version",)]
class Raw(str):
    """A bare JSON token written as it is (a 5000-digit integer, NaN), not as a string."""


json_values = st.one_of(
    st.none(), st.booleans(), st.integers(), hostile_text, st.floats(allow_nan=False),
    st.sampled_from(["9" * 5000, "-" + "9" * 400, "1e999", "-1e999", "NaN", "Infinity", '"' + "x" * 20000 + '"',
                     "[" * 5000 + "]" * 5000]).map(Raw),
    st.recursive(st.integers(0, 3), lambda c: st.lists(c, max_size=3), max_leaves=6),
)


@fuzz(80)
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), json_values), max_size=4))
def test_fleet_reports(changes):
    doc = _base_report()
    raw: dict[str, str] = {}
    for i, (where, value) in enumerate(changes):
        node = doc
        for k in where[:-1]:
            node = node[k]
        if isinstance(value, Raw):
            raw[json.dumps(f"@@RAW{i}@@")] = str(value)
            value = f"@@RAW{i}@@"
        node[where[-1]] = value
    text = json.dumps(doc)
    for quoted, token in raw.items():
        text = text.replace(quoted, token)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "node.json").write_text(text)
        for argv in (["fleet", tmp, "--json"], ["fleet", tmp]):
            t0 = time.monotonic()
            code, out, err = run_main(argv)
            assert time.monotonic() - t0 < 10
            assert code in (0, 1), err
            _no_escape(out)
        for e in strict_json(run_main(["fleet", tmp, "--json"])[1])["errors"]:
            field = e["problem"].split(":")[0].split(".")[0].split("[")[0].split(" ")[0]
            event(f"refused: {field}")
            assert e["file"] == "node.json"
            assert field in {"host", "time", "tool_version", "backend", "gpus", "benches", "check", "job", "report",
                             "not"}, e["problem"]  # the field, the version ('report version ...') or 'not JSON'


# --- ELF headers ---------------------------------------------------------------------------------

HEADER_FIELDS = {"e_type": (16, "<H"), "e_machine": (18, "<H"), "e_phoff": (32, "<Q"), "e_shoff": (40, "<Q"),
                 "e_phentsize": (54, "<H"), "e_phnum": (56, "<H"), "e_shentsize": (58, "<H"), "e_shnum": (60, "<H"),
                 "e_shstrndx": (62, "<H"), "class": (4, "<B"), "data": (5, "<B")}


@st.composite
def elf_files(draw) -> bytes:
    needed = draw(st.lists(st.sampled_from([b"libcudart.so.12", b"libc.so.6", b"libcublas.so.13",
                                            b"libcuda\x1b]0;x\x07.so"]), max_size=3))
    data = bytearray(elf(needed))
    for name in draw(st.lists(st.sampled_from(sorted(HEADER_FIELDS)), max_size=3, unique=True)):
        at, fmt = HEADER_FIELDS[name]
        size = struct.calcsize(fmt)
        value = draw(st.one_of(st.integers(0, 8), st.integers(0, 2 ** (8 * size) - 1)))
        struct.pack_into(fmt, data, at, value)
    for _ in range(draw(st.integers(0, 4))):  # bytes anywhere: sections, the dynamic table, names
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data += draw(st.binary(max_size=256))
    if draw(st.integers(0, 4)) == 0:
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data)


@fuzz(150)
@given(data=elf_files())
def test_elf_headers(data, monkeypatch):
    monkeypatch.setattr(report_mod, "nvml_gpu", lambda index: None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lib.so"
        path.write_bytes(data)
        t0 = time.monotonic()
        code, out, err = run_main(["inspect", str(path), "--profile", "h200", "--json"])
        assert time.monotonic() - t0 < 5
    event(f"exit {code}")
    assert code in (0, 1, 2), err
    doc = strict_json(out)
    _no_escape(out)
    if code == 2:
        assert doc["field"] == "path" and str(path) in doc["error"]


# --- export paths ----------------------------------------------------------------------------------

export_names = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=40),
    st.integers(200, 320).map(lambda n: "x" * n),
    st.sampled_from(["-", "--json", ".", "..", "dir", "link", "dangling", "fifo", "a\nb", "\x1b]0;t\x07"]),
)


@fuzz(80)
@given(parts=st.lists(export_names, min_size=1, max_size=3))
def test_export_paths(parts):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        victim = root / "victim"
        victim.write_text("precious")
        (root / "dir").mkdir()
        (root / "link").symlink_to(victim)
        (root / "dangling").symlink_to(root / "nowhere")
        os.mkfifo(root / "fifo")
        (root / "link.tmp").symlink_to(victim)
        target = root.joinpath(*parts)
        store = root / "s.db"
        ResultStore(store).put_tuned({**_good_entry(), "origin": None})
        code, out, err = run_main(["tune", "--export", str(target), "--store", str(store), "--json"])
        event(f"exit {code}")
        assert code in (0, 2), err
        assert victim.read_text() == "precious"
        strict_json(out)
        if code == 2:
            assert "--export" in err and "Traceback" not in err
        else:
            assert target.is_file() and not target.is_symlink() and "[[entry]]" in target.read_text()
