"""Property-based fuzzing of the inputs of the fleet, soak, inspect and user-kernel commands, in the
manner of test_fuzz_inputs.py: whatever comes in, a result or exit 2 naming what was wrong; never
a traceback, never a hang; `--json` output is strict JSON."""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from engine.errors import InputError
from engine.soak import parse_duration, parse_percent
from tests.unit.test_fuzz_inputs import fuzz, run_main, strict_json
from tui.cli.device_args import device_arg

pytestmark = pytest.mark.timeout(120)

texts = st.one_of(st.text(max_size=12), st.from_regex(r"[-+]?[0-9.]{0,400}(ms|s|m|h|d|%|e9)?", fullmatch=True))


@fuzz(300)
@given(text=texts)
@example(text="9" * 400)  # a float's inf, once taken as a duration
@example(text="9" * 400 + "h")
def test_durations_percentages_and_devices(text):
    """A duration is finite and positive or refused naming the flag; so is a percentage; a device
    list is indices or refused."""
    for parse, flag in ((parse_duration, "--duration"), (lambda t, f: parse_percent(t, f), "--max-drift")):
        try:
            value = parse(text, flag)
        except InputError as exc:
            assert flag in exc.message and exc.exit_code == 2
        else:
            assert math.isfinite(value) and value >= 0, (text, value)
    try:
        dev = device_arg(text)
    except (InputError, ValueError, argparse.ArgumentTypeError) as exc:  # argparse: exit 2 naming the flag
        event(type(exc).__name__)
    else:
        assert dev is not None


json_like = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                   st.text(max_size=8)),
                         lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                 st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                         max_leaves=12)


@fuzz(100)
@given(doc=st.one_of(json_like.map(lambda v: __import__("json").dumps(v).encode()), st.binary(max_size=200)))
def test_fleet_reads_any_report_file(doc):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "host.json").write_bytes(doc)
        code, out, err = run_main(["fleet", tmp, "--json"])
    assert code in (0, 1, 2), err
    strict_json(out)


@fuzz(100)
@given(head=st.sampled_from([b"", b"\x7fELF", b"\x7fELF\x02\x01\x01", b"#!/bin/sh\n"]), body=st.binary(max_size=300))
def test_inspect_reads_any_file(head, body):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prog"
        path.write_bytes(head + body)
        code, out, err = run_main(["inspect", str(path), "--profile", "h200", "--json"])
    assert code in (0, 1, 2), err
    strict_json(out)


spec_keys = st.sampled_from(["name", "entry", "source", "dtypes", "dims", "args", "knobs", "constraints",
                             "launch", "flops", "bytes", "reference", "grid", "block", "extra"])
spec_values = st.one_of(st.integers(-5, 5), st.text(max_size=10).map(lambda s: '"' + s.replace('"', "").replace("\\", "")
                                                                      + '"'),
                        st.sampled_from(['["bf16"]', "[1, 2]", '{ n = "cdiv(n, 4)" }', '"__import__(\'os\')"',
                                         '"a.b"', '"n ** 99999"']))


@fuzz(100)
@given(lines=st.lists(st.tuples(spec_keys, spec_values), max_size=6, unique_by=lambda kv: kv[0]))
def test_user_kernel_specs(lines):
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "k.toml"
        spec.write_text("\n".join(f"{k} = {v}" for k, v in lines) + "\n")
        (Path(tmp) / "k.cu").write_text('extern "C" __global__ void k() {}\n')
        code, out, err = run_main(["kernels", "--kernel-file", str(spec), "--json"])
    event(f"exit {code}")
    assert code in (0, 2), err
    strict_json(out)
