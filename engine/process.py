"""The engine process: one child per GPU job, watched by the caller.

The child reports over a pipe: {"type": "event", "event": {...}} while it works, then exactly one
{"type": "result", "result": {...}}. The caller enforces a wall-clock timeout and a cancel by
killing the child, and notices a child that dies without a result (a segfault, a kill). The caller
never imports cupy, so it never holds a CUDA context that a fault could poison.

Children are forked from a server process (multiprocessing's "forkserver") that has imported the
engine's modules once and never touches CUDA: each job starts from a clean, pre-imported process
instead of a fresh interpreter (ADR-0009). The caller itself is never forked.

The child dies with its caller (a parent-death signal), so a caller killed by any signal, SIGKILL
included, leaves no engine process behind holding the GPU and the terminal. The server and the
children start with a safe import path (``PYTHONSAFEPATH``): run inside an untrusted checkout, no
module from the current directory (a ``json.py``, a ``multiprocessing/``) is imported by them."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
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

PRELOAD = ("engine.runner", "engine.worker", "engine.backends.stages", "engine.backends.sim", "engine.tuner",
           "engine.tune_worker", "engine.soak", "engine.soak_worker", "engine.calibrate", "numpy.random",
           "numpy.ma")
"""What the engine server imports before it forks anything, with the built-in kernels' specs
(``preload_modules``): the modules of the entry points and the simulated backend, and the parts of
numpy it loads on first use. Never cupy, pynvml or an ``engine.backends.cuda*`` module: CUDA state
does not survive a fork, so the server must not hold any (tests/unit/test_engine_server.py)."""


def preload_modules() -> list[str]:
    """PRELOAD and the modules of the built-in kernels' specs, which every job looks up."""
    from kernels import builtin_modules

    return [*PRELOAD, *builtin_modules()]


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """These environment variables set for the processes started inside the block."""
    with _env_lock:
        before = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def safe_import_path() -> contextlib.AbstractContextManager[None]:
    """Python processes started inside this block do not put the current directory (or the
    script's) first on sys.path. multiprocessing starts its children as ``python -c ...``, which
    would otherwise import ``multiprocessing`` itself, and then everything else, from the caller's
    current directory; its command line cannot take ``-P``, the environment can."""
    return _environment(PYTHONSAFEPATH="1")


def _server_environment() -> contextlib.AbstractContextManager[None]:
    """A safe import path, and the caller's own (absolute) entries of sys.path ahead of the
    interpreter's: the server imports its modules from where the caller imports the engine (a
    checkout, not an older copy installed in site-packages)."""
    path = os.pathsep.join(p for p in sys.path if os.path.isabs(p))
    return _environment(PYTHONSAFEPATH="1", PYTHONPATH=path)


def _environment_now() -> dict[str, str]:
    """The caller's environment for a child, as a spawned child would have inherited it."""
    with _env_lock:
        return {**os.environ, "PYTHONSAFEPATH": "1"}


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
    caller that later replaces sys.stderr (Textual captures it) would otherwise make the start
    fail with 'bad value(s) in fds_to_keep'. Idempotent. The tracker exits when the last holder
    of its pipe (the caller and its engine processes) is gone."""
    try:
        from multiprocessing import resource_tracker

        with safe_import_path():
            resource_tracker.ensure_running()
    except Exception:  # the tracker is an optimisation for leaked semaphores, never a requirement
        pass


def start_engine_server() -> int | None:
    """Start the engine server (and the resource tracker) unless it runs: call it before Textual
    captures stderr, and a first job need not wait for the imports. Idempotent; returns the
    server's pid (None where it could not start: the job then says why). The server exits when
    the caller does (its end of the server's "alive" pipe closes)."""
    start_resource_tracker()
    from multiprocessing import forkserver

    try:
        mp.get_context("forkserver").set_forkserver_preload(preload_modules())
        with _server_environment():
            forkserver.ensure_running()
    except Exception:
        return None
    # multiprocessing keeps the pid private; the child checks it is still the server's child
    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def _leave_server_alive_pipe() -> None:
    """Close this child's copy of the server's "alive" pipe. While any holder lives the server does
    not exit, and a child that outlived its caller would keep it up, and the server the child (its
    parent-death signal): a caller killed by SIGKILL would leave both behind."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver  # multiprocessing keeps the pipe's fd private
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None


def _engine_main(entry: Callable[[Any, Any], None], parent_pid: int | None, payload: Any,
                 conn: Any, env: dict[str, str] | None = None) -> None:
    """The engine process's first code: bound to the server's life (which is bound to the
    caller's), with the caller's environment of now (the server's is that of its start), and deaf
    to the terminal's Ctrl-C (the caller decides: it kills the process, at once)."""
    die_with_parent(parent_pid)
    _leave_server_alive_pipe()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
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


def run_in_engine_process(entry: Callable[[Any, Any], None], payload: Any,
                          timeout_s: float, on_event: Callable[[Event], None] | None = None,
                          cancel: threading.Event | None = None, name: str = "sol-engine",
                          stall_s: float | None = None, daemon: bool = True) -> ProcessOutcome:
    """Run ``entry(payload, conn)`` in an engine process and wait for its result, the timeout, a
    cancel, or its death. ``entry`` must be a module-level function (it is pickled by name).
    ``stall_s``: kill it (status ``stalled``) when it sends nothing for that long (a hung kernel in
    a tune, whose overall timeout is long). ``daemon=False`` lets the child start processes of its
    own (a tune's compile pool); it is killed on every way out of here all the same."""
    ctx = mp.get_context("forkserver")
    server_pid = start_engine_server()
    recv_conn, send_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_engine_main, args=(entry, server_pid, payload, send_conn, _environment_now()),
                       daemon=daemon, name=name)
    t0 = time.monotonic()
    with _server_environment():  # a server that died meanwhile is started again as above
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
