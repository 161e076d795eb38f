"""`tui bench` stopped by a signal while a kernel hangs: it exits at once with 128 + the signal, and
no process of ours (the engine process, multiprocessing's resource tracker) outlives it, not even
when the CLI is SIGKILLed and runs no cleanup at all (the engine process's parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; prctl is Linux's")

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]


def _ours(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (the children inherit it; zombies have
    no readable environment)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def _start(tmp_path: Path, sig: signal.Signals) -> tuple[subprocess.Popen[bytes], str, Path]:
    marker = f"sol-signal-test-{uuid.uuid4().hex}"
    err = tmp_path / f"{sig.name}.err"
    env = {**os.environ, "SOL_COCKPIT_STORE": str(tmp_path / f"{marker}.sqlite"), "SOL_SIM_DELAY": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli.main", "bench", "--backend", "sim", "--fault", "hang",
                             "--timeout", "120"], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    return proc, marker, err


def _kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_signal_to_bench_during_a_hung_kernel_leaves_no_process_behind(tmp_path):
    runs = {sig: _start(tmp_path, sig) for sig in SIGNALS}
    try:
        deadline = time.monotonic() + 60
        for proc, _, err in runs.values():
            while b"never returns" not in err.read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.1)
        time.sleep(0.3)
        exits: dict[signal.Signals, tuple[int, float]] = {}
        for sig, (proc, _, _) in runs.items():
            t0 = time.monotonic()
            os.kill(proc.pid, sig)  # the CLI alone: the engine process does not see it
            rc = proc.wait(timeout=10)
            exits[sig] = (rc, time.monotonic() - t0)
        time.sleep(0.5)
        left: dict[str, list[int]] = {}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            left = {sig.name: _ours(marker) for sig, (_, marker, _) in runs.items()}
            if not any(left.values()):
                break
            time.sleep(0.2)
        assert not any(left.values()), f"processes left behind: {left}"
        for sig, (rc, took) in exits.items():
            want = -signal.SIGKILL if sig == signal.SIGKILL else 128 + sig
            assert rc == want, f"{sig.name}: exit {rc}, want {want}: {runs[sig][2].read_text()[-300:]}"
            assert took < 3.0, f"{sig.name}: the CLI took {took:.1f} s to stop"
        assert "stopped by SIGTERM" in runs[signal.SIGTERM][2].read_text()
    finally:
        for proc, marker, _ in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _kill_leftovers(_ours(marker))


def test_an_engine_process_whose_caller_is_killed_dies_too(tmp_path):
    """The parent-death signal alone (no CLI, no handler): a caller that runs no cleanup at all."""
    marker = f"sol-pdeath-test-{uuid.uuid4().hex}"
    code = ("import sys\n"
            "from engine.process import run_in_engine_process\n"
            "from tests.unit.test_signals import _entry\n"
            "run_in_engine_process(_entry, {}, 120, on_event=lambda ev: print('child up', flush=True))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "SOL_PDEATH_MARK": marker},
                            stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"child up"
        assert len(_ours(marker)) >= 2  # the caller, its engine process (and the resource tracker)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while _ours(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ours(marker) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(_ours(marker))


def _entry(payload, conn) -> None:
    conn.send({"type": "event", "event": {"kind": "log", "level": "info", "message": "up"}})
    time.sleep(60)


def test_closing_the_terminal_stops_bench_cleanly(tmp_path):
    """An SSH session that ends hangs up the terminal: the CLI exits 128 + SIGHUP (its live
    progress bar cannot be erased on a dead terminal, which must not turn that into a crash) and
    leaves nothing behind."""
    import pty

    marker = f"sol-hangup-test-{uuid.uuid4().hex}"
    env = {**os.environ, "SOL_COCKPIT_STORE": str(tmp_path / f"{marker}.sqlite"), "SOL_SIM_DELAY": "0"}
    argv = [sys.executable, "-m", "tui.cli.main", "bench", "--backend", "sim", "--fault", "hang", "--timeout", "120"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader on the terminal, as a login shell's command is
        try:
            os.chdir(ROOT)
            os.execve(sys.executable, argv, env)
        finally:
            os._exit(127)
    try:
        seen, deadline = b"", time.monotonic() + 60
        while b"never returns" not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
        assert b"never returns" in seen, seen[-500:]
        time.sleep(0.3)
        os.close(fd)
        fd = -1
        t0 = time.monotonic()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGHUP
        assert time.monotonic() - t0 < 3.0
        deadline = time.monotonic() + 5
        while _ours(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ours(marker) == []
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        _kill_leftovers(_ours(marker))
