"""`tui calibrate`: measure this machine's ceilings and save them as a user profile, so SOL can be
shown against the datasheet and against what this GPU actually reaches, side by side."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, cast

from engine.errors import BackendUnavailable, CockpitError
from engine.events import Event
from engine.job import CalibrateOptions, JobRequest
from engine.process import run_in_engine_process
from engine.profiles import PeakTflops, Profile, ProfileSet
from engine.task import BackendName, TaskSpec
from engine.worker import child_main


def measure(device: int = 0, on_event: Callable[[Event], None] | None = None,
            cancel: threading.Event | None = None, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run the measurement in the engine process (a ``JobRequest`` of kind ``calibrate``);
    CockpitError when it fails, times out or dies."""
    from engine.backends.select import probe_cuda

    probe_cuda(device)  # BackendUnavailable (exit 3) with the driver problem and the fix
    request = JobRequest(kind="calibrate", task=TaskSpec(device=device, backend=BackendName.cuda), profile=None,
                         backend="cuda", plan=None, options=CalibrateOptions())
    out = run_in_engine_process(child_main, request, timeout_s, on_event, cancel, name="sol-calibrate")
    if out.status != "ok":
        raise CockpitError(f"calibration {out.status} (exit code {out.exitcode})")
    result = cast(dict[str, Any], out.result)  # status "ok" comes only with the child's result dict
    if not result.get("ok"):
        raise BackendUnavailable(f"calibration failed: {result.get('error')}",
                                 fix="run `tui check` to see what is wrong with the GPU")
    return result


def measured_profile(base: Profile, ceilings: dict[str, Any], name: str | None = None,
                     host: str | None = None) -> Profile:
    """A profile with ``base``'s limits and this machine's measured ceilings as its peaks."""
    t = ceilings["tflops"]
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return base.model_copy(update={
        "name": name or f"{base.name}-measured",
        "display_name": f"{base.display_name} (measured)",
        "aliases": [],
        "peak_tflops": PeakTflops(fp32=t["fp32"], tf32=t["tf32"], bf16=t["bf16"], fp16=t["fp16"]),
        "memory_bandwidth_gbps": ceilings["copy_gbps"],
        "measured": True,
        "provisional": False,
        "base_profile": base.name,
        "source": (f"tui calibrate on {host or socket.gethostname()} ({ceilings.get('gpu_name')}), {when}: "
                   f"{ceilings.get('copy_bytes', 0) / 2**30:.0f} GiB device-to-device copy, cuBLAS GEMMs "
                   "8192^3 (bf16, fp16, tf32) and 4096^3 (fp32), medians of CUDA-event timings"),
        "notes": "Measured ceilings, not datasheet figures: SOL against these says how close a kernel "
                 "gets to what this GPU reaches in practice.",
    })


def measured_for(profiles: ProfileSet, profile: Profile) -> Profile | None:
    """The newest calibrated profile measured against ``profile`` (None when there is none)."""
    if profile.measured:
        return None
    cands = [p for p in profiles.profiles.values() if p.measured and p.base_profile == profile.name]
    return sorted(cands, key=lambda p: p.name)[0] if cands else None
