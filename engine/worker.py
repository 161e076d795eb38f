"""The engine process's one entry: runs one ``JobRequest`` and reports over a pipe. Forked from the
engine server, a process that has imported the engine and never touched CUDA (engine.process,
ADR-0009); never forked from the caller or from any process that may hold a CUDA context, whose
state a fork breaks.

Messages to the parent are dicts: {"type": "event", "event": {...}} while running, then exactly one
{"type": "result", "result": {...}}. If the process dies before that (a segfault, a kill), the
parent notices the closed pipe and reports a crash. ``child_main`` dispatches on the request's kind
(``JOBS``); each job's body returns its result, and the body's module is imported here, in the
child, so that the parent never loads cupy."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from engine.job import JobRequest

Send = Callable[[Any], None]


def event_sender(conn: Any) -> Send:
    """``send(event)`` for an engine process's pipe: a parent that has gone away (the pipe closed)
    is not this process's error; the run goes on and its end is reported as far as it can be."""
    def send(ev: Any) -> None:
        try:
            conn.send({"type": "event", "event": ev.model_dump(mode="json")})
        except (BrokenPipeError, OSError):
            pass

    return send


def child_main(request: JobRequest, conn: Any) -> None:
    """Entry point of the engine process for every job: the body of the request's kind, then its
    result (a dict) as the one result message."""
    send = event_sender(conn)
    if request.task.kernel_file:
        # a user kernel: its spec registered here too, its reference's trust read again
        from engine.user_kernels import load_kernel_file

        load_kernel_file(request.task.kernel_file)
    try:
        result = JOBS[request.kind](request, send)
        conn.send({"type": "result", "result": result})
    finally:
        conn.close()


def run_body(request: JobRequest, send: Send) -> dict[str, Any]:
    """A run: render the plan the request carries and take it through every stage on the device.
    A failure inside the run is its result; anything else is a crash, reported with its text."""
    from engine.backends.base import Emitter, RunContext, RunFailure
    from engine.backends.collect import base_fingerprint, now_iso
    from engine.backends.stages import open_device, run_job
    from engine.recorded_task import RecordedTask
    from engine.result import RunResult, RunStatus
    from kernels import get_spec

    task, profile, backend = request.task, request.profile, request.backend
    assert profile is not None
    em = Emitter(send=send)
    started = now_iso()
    try:
        ctx = RunContext(task=task, profile=profile, spec=get_spec(task.kernel), emit=em, plan=request.plan)
        result = run_job(open_device(backend, task, profile), ctx)
    except RunFailure as exc:
        result = RunResult(status=RunStatus(exc.status), simulated=backend == "sim",
                           task=RecordedTask.model_validate(task.model_dump(mode="json")), profile=profile.name, error=exc.message,
                           error_kind=exc.error_kind, log=em.log, started_at=started,
                           fingerprint=base_fingerprint(profile, backend, None))
    except BaseException as exc:  # anything else is a crash of the run, reported with its text
        text = f"{type(exc).__name__}: {exc}"
        em.fail(em.current or "compile", text)
        result = RunResult(status=RunStatus.crashed, simulated=backend == "sim",
                           task=RecordedTask.model_validate(task.model_dump(mode="json")), profile=profile.name, error=text,
                           error_kind=type(exc).__name__,
                           log=em.log + traceback.format_exc().splitlines()[-12:], started_at=started,
                           fingerprint=base_fingerprint(profile, backend, None))
    return result.model_dump(mode="json")


def _tune(request: JobRequest, send: Send) -> dict[str, Any]:
    from engine.tune_worker import tune_body

    return tune_body(request, send)


def _soak(request: JobRequest, send: Send) -> dict[str, Any]:
    from engine.soak_worker import soak_body

    return soak_body(request, send)


@runtime_checkable
class Ceilings(Protocol):
    """What calibrate needs of a device: its ceilings measured (the CUDA device has them; the
    simulated device has nothing to measure)."""

    def ceilings(self, log: Callable[[str], None], copy_bytes: int) -> dict[str, Any]: ...


def calibrate_body(request: JobRequest, send: Send) -> dict[str, Any]:
    """Calibrate: the device's ceilings (a large device-to-device copy, large GEMMs per dtype), each
    said in the log as it is measured; ``{"ok": False, "error": ...}`` where they cannot be."""
    from engine.backends.stages import open_device
    from engine.events import LogEvent
    from engine.job import CalibrateOptions

    opts = request.options
    assert isinstance(opts, CalibrateOptions)
    try:
        dev: Any = open_device(request.backend, request.task, request.profile)
        if not isinstance(dev, Ceilings):
            raise RuntimeError(f"the {dev.name} device has no ceilings to measure")
        return {"ok": True, **dev.ceilings(lambda msg: send(LogEvent(message=msg)), opts.copy_bytes)}
    except BaseException as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


JOBS: dict[str, Callable[[JobRequest, Send], dict[str, Any]]] = {
    "run": run_body, "tune": _tune, "soak": _soak, "calibrate": calibrate_body}
"""Each job kind's body in the engine process."""
