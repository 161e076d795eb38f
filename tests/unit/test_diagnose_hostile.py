"""`tui diagnose` on hostile input: rules that search in linear time on the worst line we can build
for each of them, logs too large to read whole, pipes without end, UTF-16 and broken UTF-8, exit
status, and log text that looks like markup."""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import tui.cli.diagnose  # noqa: F401 -- its help states the limits as imported, before a test shrinks them
from engine import log_reader
from engine.errors import InputError
from engine.regex import _Anchor, _Chars, _p, _paths, check_linear, linear_problem, required_literal
from engine.troubleshoot import _default_rules, _lowered, _search, load_rules, match_text, rules
from tui.cli.main import main

MIB = 2**20
RULE_BUDGET_S = 0.5
"""CPU seconds one rule (all its patterns) may take on a 1 MiB hostile line: the slowest takes about
0.15 s (``A.{0,120}B`` from 50,000 starts); one that backtracks quadratically takes minutes."""
RANK_BYTES = 16 * 1024
"""Lines are ranked at this size, where a backtracking pattern already takes a large part of the
1 MiB budget (and fails fast) while a linear one takes a millisecond."""

ISSUE_LINES = ["cudaFuncSetAttribute ", "NVRM: Xid (", "SOL", "nvcc fatal :", "LnkSta:", "NVML",
               "|  0  N/A  N/A  ", "========= ", "\x00", "1", " "]
"""Seeds from the reports, repeated to fill a line (``'cudaFuncSetAttribute ' * 20000`` took 2 min)."""


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")


def _cpu(fn: Callable[[], object]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def _pick(chars: frozenset[int], prefer: str) -> list[str]:
    """A few characters of a class: one the prefix holds (to make runs overlap), the first
    printable one, and a space."""
    printable = [chr(c) for c in sorted(chars) if 32 <= c < 127]
    picks = [c for c in prefer if ord(c) in chars][:1] + printable[:1] + ([" "] if ord(" ") in chars else [])
    return list(dict.fromkeys(picks)) or [chr(min(chars))]


LineMaker = Callable[[int], str]
"""Builds one hostile line of a given length."""


def _repeat(unit: str) -> LineMaker:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


def _run(prefix: str, c: str) -> LineMaker:
    return lambda size: (prefix + c * size)[:size]


def hostile_lines(pattern: str) -> list[LineMaker]:
    """Lines built from the pattern's structure: each prefix of a way through it repeated (so that
    every start rescans the rest), and each prefix ending in a repeat followed by a long run of
    that repeat's characters (so that it backtracks over the run)."""
    out: list[LineMaker] = []
    for path in _paths(_p.parse(pattern, re.IGNORECASE | re.MULTILINE), True, False)[:4]:
        reps = [i for i, t in enumerate(path) if isinstance(t, _Chars) and t.hi > 1]
        cuts = {len(path), len(path) - 1} | set(reps) | {i + 1 for i in reps}
        parts: list[str] = []
        for i, t in enumerate(path):
            if isinstance(t, _Chars):
                parts.append(_pick(t.chars, "".join(parts))[0] * max(1, min(t.lo, 4)))
            elif isinstance(t, _Anchor) and t.kind == "line" and i > 0:
                parts.append("\n")
            if i + 1 not in cuts:
                continue
            prefix = "".join(parts)
            if prefix:
                out += [_repeat(prefix), _repeat(prefix + "\n")]
            if isinstance(t, _Chars) and t.hi > 1:
                for c in _pick(t.chars, prefix):
                    out += [_run(prefix, c), _repeat(prefix + c * 16)]
    return out


def rule_lines(patterns: list[str]) -> list[LineMaker]:
    """The seeds from the reports and every pattern's hostile lines, in a fixed order."""
    return [_repeat(seed) for seed in ISSUE_LINES] + [make for p in patterns for make in hostile_lines(p)]


def _rule_cost(compiled: list, line: str) -> tuple[float, float]:
    """(CPU seconds of match_text's search, of a plain regex search) for one rule's patterns."""
    low = _lowered(line)
    prefiltered = sum(_cpu(lambda c=c: _search(c, line, low)) for c in compiled)
    plain = sum(_cpu(lambda rx=rx: rx.search(line)) for rx, _ in compiled)
    return prefiltered, plain


def allowed_s(size: int) -> float:
    """CPU seconds a rule may take on a line of ``size`` characters: 4 times its linear share of
    the budget, at most the budget. A quadratic search outgrows it before 1 MiB."""
    return RULE_BUDGET_S * min(1.0, 4 * size / MIB)


def worst_line_cost(rule_id: str, patterns: list[str], compiled: list) -> tuple[float, float, str]:
    """(CPU s with the prefilter, CPU s of a plain search, line head) on the rule's worst 1 MiB
    line. Lines are ranked at ``RANK_BYTES``; the worst must stay within ``allowed_s`` there and as
    it grows 4-fold at a time to 1 MiB, so that a backtracking pattern fails within seconds instead
    of running for minutes."""
    makers = rule_lines(patterns)
    costs = []
    for make in makers:
        line = make(RANK_BYTES)
        pre, plain = _rule_cost(compiled, line)
        assert max(pre, plain) < allowed_s(RANK_BYTES), (rule_id, line[:40], pre, plain)
        costs.append(pre + plain)
    make = makers[costs.index(max(costs))]
    for size in (4 * RANK_BYTES, 16 * RANK_BYTES, MIB):
        line = make(size)
        pre, plain = _rule_cost(compiled, line)
        assert max(pre, plain) < allowed_s(size), (rule_id, size, line[:40], pre, plain)
    return pre, plain, line[:40]


def worst_lines() -> list[tuple[str, float, float, str]]:
    """(rule id, CPU s with the prefilter, CPU s of a plain search, line head) for every rule."""
    return [(rule.id, *worst_line_cost(rule.id, rule.patterns, compiled)) for rule, compiled in _default_rules()]


def test_every_rule_is_fast_on_its_worst_1mib_line() -> None:
    assert len(worst_lines()) == len(rules())


def test_the_worst_lines_catch_the_pattern_that_backtracked() -> None:
    """The pattern from the report (the lint refuses it now) fails the timing above."""
    pattern = r"cudaFuncSetAttribute.*(failed|invalid)"
    compiled = [(re.compile(pattern, re.IGNORECASE | re.MULTILINE), required_literal(pattern))]
    with pytest.raises(AssertionError):
        worst_line_cost("old", [pattern], compiled)


def test_all_rules_together_on_the_reported_line_are_fast() -> None:
    """The reported line (it took 2 minutes), grown to 1 MiB, and a 1 MiB line of NUL bytes."""
    for line in ["cudaFuncSetAttribute " * 20000, "cudaFuncSetAttribute " * (MIB // 21), "\x00" * MIB]:
        assert _cpu(lambda line=line: match_text(line)) < 2 * RULE_BUDGET_S, line[:30]


@pytest.mark.parametrize("pattern", [r"A.*B", r"A.{0,200}B", r"NVRM: Xid \([^)]*\): 79", r"\bSOL\s*[:=]?\s*[0-9]+%",
                                     r"(ab)+c", r"[a-z]+:", r"NVML\w*: Not Supported", r"x(?=a*b)",
                                     r"x.{0,100}y*z", r"\d+\.\d+"])
def test_lint_refuses_backtracking_shapes(pattern: str) -> None:
    assert linear_problem(pattern)
    with pytest.raises(ValueError, match="could be slow"):
        check_linear([pattern])


@pytest.mark.parametrize("pattern", [r"A.{0,120}B", r"NVRM: Xid \([^)\n]{0,40}\): 79\b", r"\bSOL[\s:=]*1?[0-9](\.\d+)?\s*%",
                                     r"Persistence Mode\s*:\s*Disabled", r"\b[1-9]\d* NaN\b", r"segfault at [0-9a-f]+",
                                     r"^\|\s+\d+\s+N/A\s+\S+", r"(?<!passing )\bCUDA_LAUNCH_BLOCKING=1\b"])
def test_lint_accepts_linear_shapes(pattern: str) -> None:
    assert linear_problem(pattern) is None


def test_every_builtin_pattern_has_a_literal_to_prefilter_on() -> None:
    for rule in rules():
        for p in rule.patterns:
            assert len(required_literal(p).text) >= 3, (rule.id, p)


def test_a_rules_file_with_a_backtracking_pattern_names_the_rule(tmp_path: Path) -> None:
    p = tmp_path / "rules.toml"
    p.write_text('[[rule]]\nid = "slow"\ntitle = "t"\ncause = "c"\nfix = "f"\npatterns = [\'foo.*bar\']\n')
    with pytest.raises(InputError, match=r"rule slow: patterns: .*could be slow"):
        load_rules(p)


def test_literal_prefilter_finds_what_a_full_search_finds() -> None:
    """Matches far from the literal's line (within CONTEXT_LINES), at the text's ends, and after
    characters whose lower case is longer (the dotted capital I)."""
    text = ("İ" * 3 + "\n") * 5 + "    MIG Mode\n        Current                           : Enabled\n" + \
           "x\n" * 3 + "|    0   N/A  N/A     4242      C   python3        2048MiB |\n" + "4096 NaN"
    got = {m.id for m in match_text(text)}
    assert {"mig-enabled", "other-processes", "nan-inf-output"} <= got


# --- reading -------------------------------------------------------------------------------------


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_reader, "HEAD_BYTES", 64 * 1024)
    monkeypatch.setattr(log_reader, "TAIL_BYTES", 64 * 1024)
    monkeypatch.setattr(log_reader, "CHUNK_BYTES", 16 * 1024)
    monkeypatch.setattr(log_reader, "STREAM_MAX_BYTES", 4 * MIB)


def _filler(n: int) -> str:
    line = "step 10 loss 2.31 lr 3e-4 tokens/s 81234\n"
    return line * (n // len(line) + 1)


def test_big_file_reads_head_and_tail_and_says_so(tmp_path: Path, small_limits: None,
                                                  capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "train.log"
    middle = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n"
    log.write_text("Persistence Mode : Disabled\n" + _filler(200_000) + middle + _filler(200_000)
                   + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    read = log_reader.read_log(str(log))
    assert not read.complete and read.read_bytes <= 128 * 1024 < read.total_bytes
    rc = main(["diagnose", str(log), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [m["id"] for m in out["matches"]] == ["torch-out-of-memory", "persistence-off"]
    assert out["input"]["complete"] is False and "not read" in out["input"]["note"]
    assert main(["diagnose", str(log)]) == 0
    assert "the first 65536 bytes and the last 65536 bytes" in capsys.readouterr().out


def test_dev_zero_stops_at_the_stated_limit(small_limits: None, capsys: pytest.CaptureFixture) -> None:
    t = time.monotonic()
    rc = main(["diagnose", "/dev/zero", "--json"])
    assert time.monotonic() - t < 10
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["matches"] == []
    assert out["input"]["total_bytes"] == 4 * MIB and "stopped" in out["input"]["note"]


def test_endless_stdin_pipe_is_bounded(monkeypatch: pytest.MonkeyPatch, small_limits: None) -> None:
    class Endless(io.RawIOBase):
        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            b[:] = b"y\n" * (len(b) // 2) + b"y" * (len(b) % 2)
            return len(b)

        def readable(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    read = log_reader.read_log("-")
    assert read.stream_cut and read.total_bytes == 4 * MIB and len(read.text) <= 128 * 1024 + 2


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_utf16_and_other_unicode_logs_decode(tmp_path: Path, codec: str) -> None:
    log = tmp_path / "ps.log"
    text = "PS> python train.py\r\nRuntimeError: CUDA error: out of memory\r\nété ✓\r\n"
    log.write_bytes(text.encode(codec))
    read = log_reader.read_log(str(log))
    assert "CUDA error: out of memory" in read.text and "\x00" not in read.text
    assert match_text(read.text)[0].id == "torch-out-of-memory"


def test_utf16_tail_is_aligned_when_read_from_an_odd_offset(tmp_path: Path, small_limits: None) -> None:
    log = tmp_path / "ps.log"
    body = "x" * 100_001 + "\n" + "GPU has fallen off the bus\n"
    log.write_bytes(codecs.BOM_UTF16_LE + body.encode("utf-16-le") + b"\x00")  # odd total size
    read = log_reader.read_log(str(log))
    assert not read.complete and "GPU has fallen off the bus" in read.text
    assert read.encoding == "utf-16-le"


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "bin.log"
    log.write_bytes(b"\xfd\xff garbage \xc3\x28\n\x80CUDA_ERROR_OUT_OF_MEMORY: out of memory\n\xed\xa0\x80\n")
    assert main(["diagnose", str(log)]) == 0
    assert "cupy-out-of-memory" in capsys.readouterr().out


def test_invalid_utf8_on_stdin_is_replaced_not_fatal(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    data = b"\xc3\x28 \xa0\xa1 dmesg\n[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus\n\xff"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert main(["diagnose", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["matches"][0]["id"] == "xid-fallen-off-bus"


def test_binary_stdin_in_utf16(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    data = "nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n".encode("utf-16")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["diagnose", "-", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["matches"][0]["id"] == "nvml-version-mismatch" and out["input"]["encoding"] == "utf-16-le"


# --- exit status and output ----------------------------------------------------------------------


def test_exit_status_matched_nothing_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    hit, miss, empty = tmp_path / "hit.log", tmp_path / "miss.log", tmp_path / "empty.log"
    hit.write_text("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n")
    miss.write_text("all fine\n")
    empty.write_text("")
    assert main(["diagnose", str(hit)]) == 0
    assert main(["diagnose", str(miss)]) == 1
    assert main(["diagnose", str(empty)]) == 1
    assert "input is empty" in capsys.readouterr().out
    assert main(["diagnose", str(tmp_path / "nope.log")]) == 2
    assert main(["diagnose", str(tmp_path)]) == 2
    assert main(["diagnose", str(miss), "--json"]) == 1


def test_help_states_the_limit_and_exit_status(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["diagnose", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "first 4 MiB and the last 4 MiB" in text and "1 GiB" in text
    assert "exit status: 0 a rule matched 1 no rule matched 2 bad input" in text
    assert "UTF-16" in text


def test_log_text_that_looks_like_markup_is_printed_verbatim(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "x.log"
    log.write_text("[/bold] [link=file:///etc] CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access [/]\n")
    assert main(["diagnose", str(log)]) == 0
    assert "[/bold] [link=file:///etc] CUDA_ERROR_ILLEGAL_ADDRESS" in " ".join(capsys.readouterr().out.split())


def test_a_fifo_without_a_writer_is_refused_at_once_with_exit_2(tmp_path: Path) -> None:
    """A FIFO nobody writes to: `tui diagnose` says so and exits 2 within a second or two, in a real
    process (an open that blocks would hang it past the timeout)."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tui.cli.main", "diagnose", str(fifo)],
                          capture_output=True, text=True, timeout=30)
    assert time.monotonic() - t < 20
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "FIFO with no writer" in proc.stderr and str(fifo) in proc.stderr
