"""The engine process of a soak: set the kernel up once, then launch it back to back in windows,
reporting each window as a ``SoakEvent``; re-verify every ``verify_every_s``; stop at the first
error. Sends one result message at the end: the counters before and after, the last
verification, the fingerprint and the error (if any). Spawned by ``engine.soak.run_soak``, with the
options of ``engine.soak_options``.

A soaker (``engine.backends.cuda_soak.CudaSoak``, ``engine.backends.sim_soak.SimSoak``) offers
``setup(emitter)``, ``info()``, ``counters(with_xid)``, ``now()`` (seconds soaked), ``window(seconds)``
(a dict: ms, launches and the telemetry), ``verify()`` (a Correctness), ``fingerprint()`` and
``close()``."""

from __future__ import annotations

import traceback
from typing import Any

from engine.worker import event_sender, task_and_profile


def _soaker(backend: str, task: Any, profile: Any, opts: Any) -> Any:
    if backend == "cuda":
        from engine.backends.cuda_soak import CudaSoak

        return CudaSoak(task, profile)
    from engine.backends.sim_soak import SimSoak

    return SimSoak(task, profile, opts)


def corruption_text(c: Any, t_s: float) -> tuple[str, str]:
    """(error text, kind) of a re-verification that failed at ``t_s`` after passing at the start."""
    from engine.backends.collect import mismatch_text

    kind = "nan" if c.nan_count or c.inf_count else "sdc"
    return (f"silent data corruption at {t_s:.1f} s into the soak: the output verified at the start, now "
            f"{mismatch_text(c)}"), kind


def soak_main(payload: dict[str, Any], conn: Any) -> None:
    """Entry point of the soak's engine process."""
    from engine.backends.base import Emitter, RunFailure
    from engine.backends.collect import mismatch_text, now_iso
    from engine.events import SoakEvent
    from engine.soak_health import new_errors
    from engine.soak_options import SoakOptions

    send = event_sender(conn)
    task, profile = task_and_profile(payload)
    opts = SoakOptions.model_validate(payload["options"])
    em = Emitter(send=send)
    result: dict[str, Any] = {"started_at": now_iso(), "log": em.log, "error": None, "error_kind": None}
    soaker: Any = None

    def stop(text: str, kind: str) -> None:
        result["error"], result["error_kind"] = text, kind

    try:
        soaker = _soaker(payload["backend"], task, profile, opts)
        soaker.setup(em)
        info = soaker.info()
        before = soaker.counters(True)
        result.update(counters_before=before, gpu_name=info.get("gpu_name"))
        send(SoakEvent(info={**info, "counters_before": before}))
        em.start("verify", "before the soak")
        c = soaker.verify()
        result["correctness"] = c.model_dump(mode="json")
        if not c.correct:
            em.fail("verify", mismatch_text(c))
            stop(f"before the soak: {mismatch_text(c)}", "incorrect")
        else:
            em.done("verify", "ok")
            em.start("timed", f"soak of {opts.duration_s:g} s, re-verified every {opts.verify_every_s:g} s")
            next_verify = opts.verify_every_s
            while result["error"] is None and soaker.now() < opts.duration_s:
                w = soaker.window(min(opts.window_s, opts.duration_s - soaker.now()))
                t = w["t_s"] = soaker.now()
                w.setdefault("verified", None)
                if t >= next_verify or t >= opts.duration_s:
                    next_verify = t + opts.verify_every_s
                    c = soaker.verify()
                    result["correctness"] = c.model_dump(mode="json")
                    w["verified"] = c.correct
                    if not c.correct:
                        stop(*corruption_text(c, t))
                    elif found := new_errors(before, soaker.counters(False)):
                        stop(found, "counters")
                send(SoakEvent(window=w))
                em.progress("timed", int(min(t, opts.duration_s)), int(opts.duration_s) or 1)
            if result["error"]:
                em.fail("timed", result["error"])
            else:
                em.done("timed", f"{opts.duration_s:g} s soaked")
        after = soaker.counters(True)
        result["counters_after"] = after
        if result["error"] is None and (found := new_errors(before, after)):
            stop(found, "counters")
        result["fingerprint"] = soaker.fingerprint()
    except RunFailure as exc:
        stop(exc.message, exc.error_kind)
    except BaseException as exc:  # anything else ends the soak with its text, as a run's crash does
        stop(f"{type(exc).__name__}: {exc}", type(exc).__name__)
        em.fail(em.current or "compile", result["error"])
        result["log"] = em.log + traceback.format_exc().splitlines()[-12:]
    finally:
        if soaker is not None:
            try:
                soaker.close()
            except Exception:
                pass
    try:
        conn.send({"type": "result", "result": result})
    finally:
        conn.close()
