"""engine.log_reader: a log given by path is stat'ed before it is opened, so a FIFO, a device or a
/proc file is read within bounds or refused, never waited on; and `tui diagnose` prints a hostile
log's title, clear-screen and clipboard sequences as text."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from engine import safe_files
from engine.errors import InputError
from engine.log_reader import read_log
from tests.unit.test_fuzz_inputs import run_main

pytestmark = pytest.mark.timeout(30)

HOSTILE_LOG = ("RuntimeError: CUDA error: an illegal memory access was encountered \x1b]0;owned\x07\n"
               "\x1b[2J\x1b[H[bold red]boss[/] CUDA out of memory. \x1b]52;c;cm0gLXJmIH4K\x07\n"
               "\x9b31m nvcc fatal : Unsupported gpu architecture 'compute_99' \x1b]8;;http://x\x1b\\\n")


def test_a_fifo_without_a_writer_is_an_empty_log_at_once(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    log = read_log(str(fifo))
    assert log.text == "" and log.total_bytes == 0 and time.monotonic() - t0 < 1.0


def test_a_fifo_whose_writer_goes_silent_ends_after_the_idle_time(tmp_path, monkeypatch):
    monkeypatch.setattr(safe_files, "FIFO_IDLE_S", 0.3)
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    holder: list[int] = []
    opened = threading.Event()

    def writer() -> None:
        holder.append(os.open(fifo, os.O_WRONLY))
        os.write(holder[0], b"CUDA error: out of memory\n")
        opened.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    for _ in range(100):  # the writer's open waits for a reader: read once it has one
        try:
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            break
        except OSError:
            time.sleep(0.01)
    opened.wait(5)
    t0 = time.monotonic()
    log = read_log(str(fifo))
    os.close(fd)
    os.close(holder[0])
    assert "out of memory" in log.text and time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("path, words", [("/proc/self/mem", "cannot read"), ("/", "a folder"),
                                         ("/no/such/log", "no such file")])
def test_what_cannot_be_read_is_an_input_error_naming_it(path, words):
    with pytest.raises(InputError, match=words) as info:
        read_log(path)
    assert path in info.value.message


def test_a_device_is_read_to_its_limit(monkeypatch):
    from engine import log_reader

    monkeypatch.setattr(log_reader, "STREAM_MAX_BYTES", 8 * 2**20)
    log = read_log("/dev/zero")
    assert log.stream_cut and log.total_bytes == 8 * 2**20


def test_a_regular_file_reads_whole(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("hello\n")
    log = read_log(str(path))
    assert log.text == "hello\n" and log.complete


def test_diagnose_prints_a_hostile_log_as_text(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text(HOSTILE_LOG)
    for argv in (["diagnose", str(path)], ["diagnose", str(path), "--json"]):
        code, out, err = run_main(argv)
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    code, out, _ = run_main(["diagnose", str(path), "--json"])
    evidence = " ".join(m["evidence"] for m in json.loads(out)["matches"])
    assert "\\x1b]0;owned\\x07" in evidence and "\\x9b31m" in evidence
