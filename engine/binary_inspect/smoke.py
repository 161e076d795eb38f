"""`tui inspect PATH --run -- ARGS`: run the binary once, bounded in time and output, and read
what it printed with the troubleshooting rules (the same ones `tui diagnose` uses).

The program runs in its own session (process group), with no standard input; at the timeout,
on Ctrl-C, and after it exits, the whole group is killed, so a child it left behind cannot hold
the GPU or the output pipe. Only the first and last ``KEEP_BYTES`` of its output are kept.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from engine.binary_inspect.model import Finding, Smoke
from engine.errors import InputError
from engine.text_safety import visible

KEEP_BYTES = 256 * 1024
"""Bytes of output kept from each end (the head holds the banner, the tail the error)."""
TAIL_CHARS = 4000
"""Characters of the output's end shown in the report."""
MAX_RULES = 3
"""Rules reported from the output, best first."""


class _Capture:
    """Reads a pipe to its end in a thread, keeping its head and tail."""

    def __init__(self, stream) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0
        self._stream = stream
        self.thread = threading.Thread(target=self._read, daemon=True, name="smoke-output")
        self.thread.start()

    def _read(self) -> None:
        while chunk := self._stream.read1(65536):
            self.total += len(chunk)
            room = KEEP_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail.append(chunk)
                self.tail_len += len(chunk)
                while self.tail_len - len(self.tail[0]) >= KEEP_BYTES:
                    self.tail_len -= len(self.tail.popleft())

    def text(self) -> str:
        tail = b"".join(self.tail)[-KEEP_BYTES:]
        skipped = self.total - len(self.head) - len(tail)
        gap = f"\n[... {skipped} bytes not kept ...]\n".encode() if skipped > 0 else b""
        return (bytes(self.head) + gap + tail).decode("utf-8", errors="replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_smoke(path: Path, args: list[str], timeout_s: float) -> tuple[Smoke, str]:
    """Run ``path ARGS`` for at most ``timeout_s`` seconds: what happened, and the output kept.
    InputError when it cannot start."""
    cmd = [str(path.resolve()), *args]
    if not os.access(cmd[0], os.X_OK):
        raise InputError(f"--run: {path} is not executable", fix=f"chmod +x {path}")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except OSError as exc:
        raise InputError(f"--run: cannot start {path}: {exc.strerror or exc}",
                         fix="check that it is built for this machine (`file PATH`) and executable") from None
    cap = _Capture(proc.stdout)
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        _kill_group(proc.pid)
    rc = proc.wait()
    wall = time.monotonic() - start
    cap.thread.join(timeout=5.0)
    if proc.stdout is not None:
        proc.stdout.close()
    text = cap.text()
    sig = signal.Signals(-rc).name if rc < 0 and -rc in signal.valid_signals() else None
    return Smoke(command=[visible(w, one_line=True) for w in (str(path), *args)], exit_code=None if rc < 0 else rc,
                 signal=sig, timed_out=timed_out, timeout_s=timeout_s, wall_s=round(wall, 3), output_bytes=cap.total,
                 output_tail=visible(text[-TAIL_CHARS:]), rules=[]), text


def diagnose_smoke(smoke: Smoke, output: str) -> list[Finding]:
    """Findings from a smoke run: the timeout, the rules its output matches, or a failure that no
    rule explains."""
    from engine.troubleshoot import match_text

    failed = smoke.timed_out or smoke.signal is not None or smoke.exit_code != 0
    out: list[Finding] = []
    if smoke.timed_out:
        out.append(Finding(id="smoke.timeout", severity="error", title=f"still running after {smoke.timeout_s:g} s",
                           detail=f"timed out after {smoke.timeout_s:g} s: the program (and its process group) was "
                                  "killed; a hang, a wait on a busy GPU, or a run longer than the timeout",
                           fix="raise --timeout if it needs longer; otherwise look for a hung kernel or a lock "
                               "(`nvidia-smi` shows what else holds the GPU)",
                           rule="task-timeout-hang"))
    matches = [m for m in match_text(output) if not (smoke.timed_out and m.id == "task-timeout-hang")]
    smoke.rules = [m.id for m in matches[:MAX_RULES]]
    for m in matches[:MAX_RULES]:
        out.append(Finding(id="smoke.output", severity="error" if failed else "warn", title=m.title,
                           detail=f"its output says: {m.evidence}", fix=m.fix, rule=m.id))
    if failed and not smoke.timed_out and not matches:
        how = f"killed by {smoke.signal}" if smoke.signal else f"exited with status {smoke.exit_code}"
        last = next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
        out.append(Finding(id="smoke.failed", severity="error", title=f"smoke run failed: {how}",
                           detail=f"smoke run: {how}; no known failure pattern in its output"
                                  + (f"; its last line: {visible(last[:200], one_line=True)}" if last
                                     else " (it printed nothing)"),
                           fix="read its output below; check its arguments; for a crash in a kernel run it under "
                               "`compute-sanitizer`",
                           rule="binary-smoke-failed"))
    return out
