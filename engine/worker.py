"""The engine process: runs one task and reports over a pipe. Forked from the engine server, a
process that has imported the engine and never touched CUDA (engine.process, ADR-0009); never
forked from the caller or from any process that may hold a CUDA context, whose state a fork breaks.

Messages to the parent are dicts: {"type": "event", "event": {...}} while running, then exactly one
{"type": "result", "result": {...}}. If the process dies before that (a segfault, a kill), the
parent notices the closed pipe and reports a crash."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any


def event_sender(conn: Any) -> Callable[[Any], None]:
    """``send(event)`` for an engine process's pipe: a parent that has gone away (the pipe closed)
    is not this process's error; the run goes on and its end is reported as far as it can be."""
    def send(ev: Any) -> None:
        try:
            conn.send({"type": "event", "event": ev.model_dump(mode="json")})
        except (BrokenPipeError, OSError):
            pass

    return send


def task_and_profile(payload: dict[str, Any]) -> tuple[Any, Any]:
    """The payload's task and profile as the engine's models (validated again in the child)."""
    from engine.profiles import Profile
    from engine.task import TaskSpec

    return TaskSpec.model_validate(payload["task"]), Profile.model_validate(payload["profile"])


def child_main(request: Any, conn: Any) -> None:
    """Entry point of the engine process for a ``JobRequest`` of kind ``run``: render the plan it
    carries and run it."""
    # Imports happen here, in the child, so that the parent never loads cupy.
    from engine.backends.base import Emitter, RunContext, RunFailure
    from engine.backends.collect import base_fingerprint, now_iso
    from engine.result import RunResult, RunStatus
    from engine.user_kernels import load_kernel_file
    from kernels import get_spec

    send = event_sender(conn)
    task, profile, backend_name = request.task, request.profile, request.backend
    if task.kernel_file:  # a user kernel: its spec registered here too, its reference's trust read again
        load_kernel_file(task.kernel_file)
    spec = get_spec(task.kernel)
    em = Emitter(send=send)
    started = now_iso()
    try:
        if backend_name == "cuda":
            from engine.backends.cuda import CudaBackend

            backend: Any = CudaBackend()
        else:
            from engine.backends.sim import SimBackend

            backend = SimBackend()
        result = backend.run(RunContext(task=task, profile=profile, spec=spec, emit=em, plan=request.plan))
    except RunFailure as exc:
        result = RunResult(status=RunStatus(exc.status), simulated=backend_name == "sim",
                           task=task.model_dump(mode="json"), profile=profile.name, error=exc.message,
                           error_kind=exc.error_kind, log=em.log, started_at=started,
                           fingerprint=base_fingerprint(profile, backend_name, None))
    except BaseException as exc:  # anything else is a crash of the run, reported with its text
        stage = em.current or "compile"
        text = f"{type(exc).__name__}: {exc}"
        em.fail(stage, text)
        result = RunResult(status=RunStatus.crashed, simulated=backend_name == "sim",
                           task=task.model_dump(mode="json"), profile=profile.name, error=text,
                           error_kind=type(exc).__name__,
                           log=em.log + traceback.format_exc().splitlines()[-12:], started_at=started,
                           fingerprint=base_fingerprint(profile, backend_name, None))
    try:
        conn.send({"type": "result", "result": result.model_dump(mode="json")})
    finally:
        conn.close()
