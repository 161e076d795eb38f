"""The engine process: one spawned child per GPU job, watched by the caller.

The child reports over a pipe: {"type": "event", "event": {...}} while it works, then exactly one
{"type": "result", "result": {...}}. The caller enforces a wall-clock timeout and a cancel by
killing the child, and notices a child that dies without a result (a segfault, a kill). The caller
never imports cupy, so it never holds a CUDA context that a fault could poison.

The child dies with its caller (a parent-death signal), so a caller killed by any signal, SIGKILL
included, leaves no engine process behind holding the GPU and the terminal. Children start with
a safe import path (``PYTHONSAFEPATH``): run inside an untrusted checkout, no module from the
current directory (a ``json.py``, a ``multiprocessing/``) is imported by them."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.events import Event, LogEvent, StageEvent, event_from_dict


@dataclass
class ProcessOutcome:
    """How the engine process ended: ``ok`` (with ``result``), ``timeout``, ``cancelled`` or
    ``crashed`` (with ``exitcode``); ``stage`` is the last stage it reported."""

    status: str
    result: dict[str, Any] | None = None
    stage: str = "compile"
    exitcode: int | None = None
    log: list[str] = field(default_factory=list)
    wall_s: float = 0.0


PR_SET_PDEATHSIG = 1
_env_lock = threading.Lock()


@contextlib.contextmanager
def safe_import_path() -> Iterator[None]:
    """Python processes started inside this block do not put the current directory (or the
    script's) first on sys.path. multiprocessing starts its children as ``python -c ...``, which
    would otherwise import ``multiprocessing`` itself, and then everything else, from the caller's
    current directory; its command line cannot take ``-P``, the environment can."""
    with _env_lock:
        before = os.environ.get("PYTHONSAFEPATH")
        os.environ["PYTHONSAFEPATH"] = "1"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PYTHONSAFEPATH", None)
            else:
                os.environ["PYTHONSAFEPATH"] = before


def die_with_parent(parent_pid: int | None = None) -> None:
    """Have the kernel SIGKILL this process when the thread that started it ends (Linux ``prctl``),
    and exit now if that already happened: a caller killed by SIGKILL runs no cleanup, and an
    engine process left behind would keep the GPU busy and the caller's terminal open."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (AttributeError, OSError):  # not Linux: the caller's exit paths still kill it
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker while stderr is still a real file descriptor: a
    caller that later replaces sys.stderr (Textual captures it) would otherwise make the spawn
    fail with 'bad value(s) in fds_to_keep'. Idempotent. The tracker exits when the last holder
    of its pipe (the caller and its engine processes) is gone."""
    try:
        from multiprocessing import resource_tracker

        with safe_import_path():
            resource_tracker.ensure_running()
    except Exception:  # the tracker is an optimisation for leaked semaphores, never a requirement
        pass


def _engine_main(entry: Callable[[dict[str, Any], Any], None], parent_pid: int, payload: dict[str, Any],
                 conn: Any) -> None:
    """The engine process's first code: bound to its caller's life, and deaf to the terminal's
    Ctrl-C (the caller decides: it kills the process, at once)."""
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    entry(payload, conn)


def _kill(proc: Any) -> None:
    """SIGTERM, then SIGKILL after half a second: a cancel is prompt even for a child stuck in a
    kernel, and a child in uninterruptible sleep is not waited on for long."""
    if proc.is_alive():
        proc.terminate()
        proc.join(0.5)
    if proc.is_alive():
        proc.kill()
        proc.join(2)


def run_in_engine_process(entry: Callable[[dict[str, Any], Any], None], payload: dict[str, Any],
                          timeout_s: float, on_event: Callable[[Event], None] | None = None,
                          cancel: threading.Event | None = None, name: str = "sol-engine",
                          stall_s: float | None = None, daemon: bool = True) -> ProcessOutcome:
    """Run ``entry(payload, conn)`` in a spawned process and wait for its result, the timeout, a
    cancel, or its death. ``entry`` must be a module-level function (spawn pickles it by name).
    ``stall_s``: kill it (status ``stalled``) when it sends nothing for that long (a hung kernel in
    a tune, whose overall timeout is long). ``daemon=False`` lets the child start processes of its
    own (a tune's compile pool); it is killed on every way out of here all the same."""
    ctx = mp.get_context("spawn")
    start_resource_tracker()
    recv_conn, send_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_engine_main, args=(entry, os.getpid(), payload, send_conn), daemon=daemon, name=name)
    t0 = time.monotonic()
    with safe_import_path():
        proc.start()
    send_conn.close()
    out = ProcessOutcome(status="running")
    last_msg = t0
    finished = False
    try:
        while out.status == "running":
            if stall_s is not None and time.monotonic() > last_msg + stall_s:
                _kill(proc)
                out.status = "stalled"
                break
            if cancel is not None and cancel.is_set():
                _kill(proc)
                out.status = "cancelled"
                break
            if time.monotonic() > t0 + timeout_s:
                _kill(proc)
                out.status = "timeout"
                break
            try:
                ready = recv_conn.poll(0.05)
            except (EOFError, OSError):
                ready = True
            if not ready:
                if not proc.is_alive() and not recv_conn.poll(0):
                    proc.join(1)
                    out.status, out.exitcode = "crashed", proc.exitcode
                continue
            try:
                msg = recv_conn.recv()
            except (EOFError, OSError):
                proc.join(2)
                out.status, out.exitcode = "crashed", proc.exitcode
                break
            last_msg = time.monotonic()
            if msg.get("type") == "event":
                ev = event_from_dict(msg["event"])
                if isinstance(ev, StageEvent):
                    out.stage = ev.stage
                elif isinstance(ev, LogEvent) and ev.message:
                    out.log.append(ev.message)
                if on_event is not None:
                    on_event(ev)
            elif msg.get("type") == "result":
                out.status, out.result = "ok", msg["result"]
        finished = True
    finally:
        recv_conn.close()
        if finished and proc.is_alive():
            proc.join(5)  # a child that sent its result exits by itself; one interrupted is killed now
        _kill(proc)
    out.wall_s = time.monotonic() - t0
    return out
