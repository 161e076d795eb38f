"""The engine-process body of a soak: the stages up to the warm-up once (compile, load, inputs,
warm-up: ``engine.backends.stages``), then the kernel back to back in windows on the device
(``Device.window``), each reported as a ``SoakEvent``; a re-verification every ``verify_every_s``;
the first error stops it. Returns one result: the counters before and after, the last
verification, the fingerprint and the error (if any). Run by ``engine.worker`` for a
``JobRequest`` of kind ``soak`` (``engine.soak.run_soak`` sends it, with ``SoakOptions``)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from engine.backends.base import Emitter, RunContext, RunFailure
from engine.backends.collect import mismatch_text, now_iso
from engine.backends.device import Bound, Device, Inputs, Probe
from engine.backends.stages import compile_stage, inputs_stage, load_stage, open_device, warmup_stage
from engine.events import SoakEvent
from engine.job import JobRequest
from engine.result import Fingerprint
from engine.soak_health import new_errors
from engine.soak_options import SoakOptions
from kernels import get_spec


@runtime_checkable
class SoakDevice(Device, Protocol):
    """What a soak needs of a device beyond the stage primitives: windows of back-to-back launches,
    the seconds soaked, the error counters, who the GPU is."""

    def now(self) -> float:
        """Seconds soaked."""
        ...

    def window(self, bound: Bound, seconds: float, probed: Probe) -> dict[str, Any]:
        """Back-to-back launches for ``seconds``: ms (mean per launch), launches, the telemetry."""
        ...

    def info(self) -> dict[str, Any]:
        """gpu_name, nvml_index, pci_bus_id, simulated."""
        ...

    def counters(self, with_xid: bool = True) -> dict[str, Any]:
        """The error counters a soak compares before and after (ECC, retired rows, Xid events)."""
        ...

    def identify(self, fp: Fingerprint) -> Fingerprint:
        """``fp`` with the GPU's UUID and the driver's version."""
        ...


def corruption_text(c: Any, t_s: float) -> tuple[str, str]:
    """(error text, kind) of a re-verification that failed at ``t_s`` after passing at the start."""
    kind = "nan" if c.nan_count or c.inf_count else "sdc"
    return (f"silent data corruption at {t_s:.1f} s into the soak: the output verified at the start, now "
            f"{mismatch_text(c)}"), kind


def soak_body(request: JobRequest, send: Callable[[Any], None]) -> dict[str, Any]:
    """Set up, verify, soak, read the counters; a failure ends the soak with its text."""
    opts = request.options
    assert isinstance(opts, SoakOptions) and request.profile is not None
    em = Emitter(send=send)
    result: dict[str, Any] = {"started_at": now_iso(), "log": em.log, "error": None, "error_kind": None}
    dev: SoakDevice | None = None
    try:
        opened = open_device(request.backend, request.task, request.profile, sim_fault=opts.sim_fault,
                             fault_at_s=opts.fault_at_s)
        if not isinstance(opened, SoakDevice):
            raise RuntimeError(f"the {opened.name} device cannot soak")
        dev = opened
        ctx = RunContext(task=request.task, profile=request.profile, spec=get_spec(request.task.kernel), emit=em,
                         plan=request.plan)
        with _faults(dev, "setup"):
            bound, inputs, probed = _setup(dev, ctx)
        _soak(dev, opts, em, bound, inputs, probed, send, result)
        result["fingerprint"] = dev.identify(dev.fingerprint(bound.loaded.build if bound.loaded else None)
                                             ).model_dump(mode="json")
    except RunFailure as exc:
        _stop(result, exc.message, exc.error_kind)
    except BaseException as exc:  # anything else ends the soak with its text, as a run's crash does
        _stop(result, f"{type(exc).__name__}: {exc}", type(exc).__name__)
        em.fail(em.current or "compile", result["error"])
        result["log"] = em.log + traceback.format_exc().splitlines()[-12:]
    finally:
        if dev is not None:
            try:
                dev.close()
            except Exception:
                pass
    return result


def _setup(dev: Device, ctx: RunContext) -> tuple[Bound, Inputs, Probe]:
    """Compile, load, inputs (one output set: the soak launches back to back on it), warm-up."""
    em, task = ctx.emit, ctx.task
    compiled, resources = compile_stage(dev, em, ctx.spec, ctx.device_plan(dev.limits), "none")
    loaded = load_stage(dev, em, compiled, resources)
    inputs = inputs_stage(dev, em, ctx.spec, rotate=False)
    bound = dev.bind(loaded, inputs, "soak", em)
    return bound, inputs, warmup_stage(dev, em, bound, max(5, task.warmup))


@contextmanager
def _faults(dev: Device, stage: str) -> Iterator[None]:
    """A fault of the device during ``stage`` as a RunFailure naming it (the rules match it)."""
    try:
        yield
    except dev.errors as exc:
        message, kind = dev.failure(exc)
        raise RunFailure("launch_error", f"{message} (during the soak's {stage})", kind) from None


def _stop(result: dict[str, Any], text: str, kind: str) -> None:
    result["error"], result["error_kind"] = text, kind


def _soak(dev: SoakDevice, opts: SoakOptions, em: Emitter, bound: Bound, inputs: Inputs, probed: Probe,
          send: Callable[[Any], None], result: dict[str, Any]) -> None:
    """The counters and a verification before; windows until the duration or the first error, a
    re-verification (and the counters) every ``verify_every_s``; the counters after."""
    info = dev.info()
    before = dev.counters(True)
    result.update(counters_before=before, gpu_name=info.get("gpu_name"))
    send(SoakEvent(info={**info, "counters_before": before}))
    em.start("verify", "before the soak")
    with _faults(dev, "verification"):
        c = dev.verify(bound, inputs, "none")
    result["correctness"] = c.model_dump(mode="json")
    if not c.correct:
        em.fail("verify", mismatch_text(c))
        _stop(result, f"before the soak: {mismatch_text(c)}", "incorrect")
    else:
        em.done("verify", "ok")
        em.start("timed", f"soak of {opts.duration_s:g} s, re-verified every {opts.verify_every_s:g} s")
        _windows(dev, opts, em, bound, inputs, probed, send, result, before)
        if result["error"]:
            em.fail("timed", result["error"])
        else:
            em.done("timed", f"{opts.duration_s:g} s soaked")
    after = dev.counters(True)
    result["counters_after"] = after
    if result["error"] is None and (found := new_errors(before, after)):
        _stop(result, found, "counters")


def _windows(dev: SoakDevice, opts: SoakOptions, em: Emitter, bound: Bound, inputs: Inputs, probed: Probe,
             send: Callable[[Any], None], result: dict[str, Any], before: dict[str, Any]) -> None:
    next_verify = opts.verify_every_s
    while result["error"] is None and dev.now() < opts.duration_s:
        with _faults(dev, "timed launches"):
            w = dev.window(bound, min(opts.window_s, opts.duration_s - dev.now()), probed)
        t = w["t_s"] = dev.now()
        w.setdefault("verified", None)
        if t >= next_verify or t >= opts.duration_s:
            next_verify = t + opts.verify_every_s
            with _faults(dev, "verification"):
                c = dev.verify(bound, inputs, "none")
            result["correctness"] = c.model_dump(mode="json")
            w["verified"] = c.correct
            if not c.correct:
                _stop(result, *corruption_text(c, t))
            elif found := new_errors(before, dev.counters(False)):
                _stop(result, found, "counters")
        send(SoakEvent(window=w))
        em.progress("timed", int(min(t, opts.duration_s)), int(opts.duration_s) or 1)
