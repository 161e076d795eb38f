"""One job model: every kind is a ``JobRequest`` with its own typed options, run by the one engine
entry (``engine.worker.child_main``) on a device behind one interface (``engine.backends.device``)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from engine.backends.device import Device
from engine.job import OPTIONS, CalibrateOptions, JobKind, JobRequest, RunOptions, TuneOptions
from engine.profiles import load_profiles
from engine.soak_options import SoakOptions
from engine.task import TaskSpec
from engine.worker import JOBS, child_main


class _Pipe:
    def __init__(self) -> None:
        self.msgs: list[dict] = []

    def send(self, msg: dict) -> None:
        self.msgs.append(msg)

    def close(self) -> None:
        pass


def _members(proto: type) -> set[str]:
    return {n for n in vars(proto) if not n.startswith("_")} | set(typing.get_type_hints(proto))


def test_every_kind_has_its_options_and_its_body():
    kinds = set(typing.get_args(JobKind))
    assert kinds == set(OPTIONS) == set(JOBS) == {"run", "tune", "soak", "calibrate"}


def test_a_request_takes_only_its_kinds_options_and_a_plan_where_it_builds_a_kernel():
    task, prof = TaskSpec(backend="sim"), load_profiles().get("h100-sxm")
    with pytest.raises(TypeError, match="a soak job takes SoakOptions, not RunOptions"):
        JobRequest("soak", task, prof, "sim", None, RunOptions())
    with pytest.raises(TypeError, match="needs its profile and plan"):
        JobRequest("run", task, prof, "sim", None, RunOptions())
    with pytest.raises(TypeError, match="TuneOptions"):
        JobRequest("tune", task, prof, "sim", None, SoakOptions(duration_s=1))
    req = JobRequest("calibrate", task, None, "cuda", None, CalibrateOptions())
    assert req.options.copy_bytes == 2**30
    with pytest.raises(dataclasses.FrozenInstanceError):  # a request is a value
        req.kind = "run"  # type: ignore[misc]
    assert TuneOptions.__dataclass_params__.frozen and CalibrateOptions.__dataclass_params__.frozen  # type: ignore[attr-defined]


@pytest.mark.parametrize("module, cls", [("engine.backends.sim", "SimDevice"), ("engine.backends.cuda", "CudaDevice")])
def test_both_devices_offer_every_primitive_the_jobs_compose(module, cls):
    """The stage primitives (``Device``) and what a tune and a soak need beyond them; calibrate's
    ceilings on the GPU alone. The CUDA device cannot run here, but it must answer every primitive
    (an import needs cupy, not a GPU)."""
    from engine.soak_worker import SoakDevice
    from engine.tune_worker import TuneDevice
    from engine.worker import Ceilings

    if module.endswith("cuda"):
        pytest.importorskip("cupy")
    dev = getattr(__import__(module, fromlist=[cls]), cls)
    protocols = [Device, TuneDevice, SoakDevice] + ([Ceilings] if cls == "CudaDevice" else [])
    set_by_init = {"task", "profile", "spec", "limits"}
    missing = sorted(f"{p.__name__}.{name}" for p in protocols for name in _members(p)
                     if not hasattr(dev, name) and name not in set_by_init)
    assert missing == []
    assert not hasattr(dev, "ceilings") or cls == "CudaDevice"  # the simulated device measures nothing


def test_calibrate_runs_through_the_one_entry_and_says_each_ceiling(monkeypatch):
    """A calibrate request goes to the same entry as every job; the device's ceilings come back as
    the result, each one said in the log as it is measured."""
    import engine.backends.stages as stages

    class Gpu:
        name = "cuda"

        def __init__(self, task, profile):
            self.device = task.device

        def ceilings(self, log, copy_bytes):
            log(f"copy of {copy_bytes} B on GPU {self.device}")
            return {"copy_gbps": 3000.0, "tflops": {"bf16": 700.0}, "gpu_name": "a GPU", "copy_bytes": copy_bytes}

    monkeypatch.setattr(stages, "open_device", lambda backend, task, profile, **_: Gpu(task, profile))
    pipe = _Pipe()
    child_main(JobRequest("calibrate", TaskSpec(device=3), None, "cuda", None, CalibrateOptions(copy_bytes=4096)), pipe)
    events, result = pipe.msgs[:-1], pipe.msgs[-1]
    assert [e["event"]["message"] for e in events] == ["copy of 4096 B on GPU 3"]
    assert result == {"type": "result", "result": {"ok": True, "copy_gbps": 3000.0, "tflops": {"bf16": 700.0},
                                                   "gpu_name": "a GPU", "copy_bytes": 4096}}


def test_calibrate_on_a_device_without_ceilings_is_refused_with_its_reason():
    pipe = _Pipe()
    child_main(JobRequest("calibrate", TaskSpec(backend="sim"), load_profiles().get("h100-sxm"), "sim", None,
                          CalibrateOptions()), pipe)
    result = pipe.msgs[-1]["result"]
    assert result["ok"] is False and "the sim device has no ceilings to measure" in result["error"]


def test_a_soak_renders_the_plan_it_was_sent_and_plans_nothing(monkeypatch):
    """The soak's engine process renders the caller's plan once, as a run's does; it plans again
    only where the device's limits differ from the profile's (they do not here)."""
    import collections

    import kernels
    from engine.backends.select import BackendChoice
    from engine.runner import prepare
    from engine.soak_worker import soak_body

    monkeypatch.setenv("SOL_SIM_SOAK_SPEED", "1000")
    prep = prepare(TaskSpec(backend="sim", peers=False), "h100-sxm", backend_choice=BackendChoice(name="sim"))
    seen: collections.Counter[str] = collections.Counter()
    cls = type(kernels.get_spec(prep.task.kernel))
    for name in ("plan", "render"):
        original = getattr(cls, name)

        def counted(*a, _original=original, _name=name, **k):
            seen[_name] += 1
            return _original(*a, **k)

        monkeypatch.setattr(cls, name, counted)
    sent: list = []
    result = soak_body(JobRequest("soak", prep.task, prep.profile, "sim", prep.plan.kernel,
                                  SoakOptions(duration_s=2, verify_every_s=1)), sent.append)
    assert result["error"] is None and result["correctness"]["correct"]
    assert seen == {"render": 1}
    windows = [e.window for e in sent if getattr(e, "window", None)]
    assert windows and windows[-1]["t_s"] >= 2 and sum(w["verified"] is not None for w in windows) >= 2


def test_a_soak_re_planned_on_its_device_says_so_in_knobs_from():
    """Where the soak's engine process planned again (its GPU's limits differ from the profile's),
    the stored run's ``knobs_from`` says so after the plan's source, as a run's does."""
    from engine.backends.select import BackendChoice
    from engine.job import REPLANNED
    from engine.runner import prepare
    from engine.soak import summarize
    from engine.soak_result import soak_run_result

    prep = prepare(TaskSpec(backend="sim", peers=False), "h100-sxm", backend_choice=BackendChoice(name="sim"))
    opts = SoakOptions(duration_s=1)
    line = f"{REPLANNED} its limits differ from profile h100-sxm's (sm_count 132 -> 114)"
    run = soak_run_result(prep, summarize([], opts, 0, True), {"log": ["compiled", line]}, [], 1.0)
    assert run.knobs_from == f"{prep.plan.source_label}; {line}"
    plain = soak_run_result(prep, summarize([], opts, 0, True), {"log": ["compiled"]}, [], 1.0)
    assert plain.knobs_from == prep.plan.source_label
