"""What a run records beside its times, as typed models: its SOL figures (``RunResult.sol`` and
``sol_measured``), board power and energy (``energy``), the launch geometry and resources
(``launch``) and the conditions it ran under (``validity``).

They are stored inside each run's JSON (the results store, ``tui bench --json``), so a record reads
any document written before it was typed and writes it back byte for byte: the keys present stay
present and in their order, a key absent stays absent (not ``null``), keys this version does not
know are kept, and a number keeps its kind (``Number``: an integer stays an integer)."""

from __future__ import annotations

from typing import Any, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

Number: TypeAlias = int | float
"""A figure as it was written: ``5`` stays ``5`` and ``5.0`` stays ``5.0`` when a record is read
and written again (a plain ``float`` field would write ``5`` back as ``5.0``)."""


class Record(BaseModel):
    """A typed record whose JSON is the JSON it was read from: the keys given, in their order, plus
    any set later; keys not declared are kept (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow")
    _keys: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        record = handler(data)
        if isinstance(data, dict) and isinstance(record, Record):
            record._keys = tuple(data)
        return record

    @model_serializer(mode="wrap")
    def _as_read(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        present = set(self.model_fields_set) | set(self.__pydantic_extra__ or {})
        keys = [k for k in self._keys if k in present and k in out]
        keys += [k for k in out if k in present and k not in keys]
        return {k: out[k] for k in keys}


class SolRecord(Record):
    """SOL figures for one measured time (``engine.sol.SolFigures``); units are in the names."""

    flops: int
    """Floating-point operations of one launch at the run's shape."""
    bytes: int
    """Bytes one launch must move: each input read once, each output written once."""
    t_sol_ms: Number
    """The speed-of-light time: the larger of ``t_compute_ms`` and ``t_memory_ms``."""
    t_compute_ms: Number
    """``flops`` at the peak FLOP rate of the dtype."""
    t_memory_ms: Number
    """``bytes`` at the peak memory bandwidth."""
    sol_bound: str
    """Which term sets T_SOL: 'compute' or 'memory' (the roofline's prediction)."""
    time_ms: Number | None = None
    """The measured time the figures below are for (the median launch)."""
    tflops: Number | None = None
    """Achieved TFLOP/s at ``time_ms``."""
    gbps: Number | None = None
    """Achieved GB/s at ``time_ms``."""
    compute_util_pct: Number | None = None
    """Achieved FLOP rate as a percentage of the peak."""
    bandwidth_util_pct: Number | None = None
    """Achieved bandwidth as a percentage of the peak."""
    sol_pct: Number | None = None
    """T_SOL over the measured time, in percent: 100 is the speed of light."""
    bound: str | None = None
    """Measured bound: 'compute', 'memory' or 'latency' (both under 60 % of peak)."""


class EnergyRecord(Record):
    """Board power and energy per launch over back-to-back launches (``engine.energy``), or only a
    ``note`` saying why they were not measured."""

    note: str | None = None
    """Why energy was not measured (then no figure is set)."""
    watts: Number | None = None
    """Mean board power over the window, from NVML's energy counter."""
    ms_per_launch: Number | None = None
    """Mean time per launch over the window."""
    mj_per_launch: Number | None = None
    """Energy per launch, in millijoules."""
    window_s: Number | None = None
    """Seconds between the two counter edges the figures are taken over."""
    counter_step_s: Number | None = None
    """The energy counter's update spacing seen."""
    uncertainty_pct: Number | None = None
    """How far off the power may be: two counter steps over the window."""
    launches: int | None = None
    """Launches in the window."""
    sm_clock_mhz: Number | None = None
    """Median SM clock over the window (None where NVML had no reading)."""
    instant_w: Number | None = None
    """Median instant power reading over the window (None where NVML had none)."""
    throttle_reasons: list[str] | None = None
    """Clock event reasons seen during the window."""
    source: str | None = None
    """Where the figures come from (the NVML counter)."""
    gflop_per_j: Number | None = None
    """Work per energy: GFLOP per joule."""
    gb_per_j: Number | None = None
    """Traffic per energy: GB per joule."""


class FunctionResources(Record):
    """One entry function's resources: ptxas' figures and the driver's."""

    name: str | None = None
    """The function's name, as ptxas reports it."""
    registers: int | None = None
    """Registers per thread."""
    stack_frame_bytes: int | None = None
    """Stack frame per thread."""
    spill_store_bytes: int | None = None
    """Bytes spilled to local memory (stores)."""
    spill_load_bytes: int | None = None
    """Bytes read back from spills."""
    static_smem_bytes: int | None = None
    """Static shared memory per block."""
    local_bytes: int | None = None
    """Local memory per thread, as the driver reports it."""


class KernelLaunch(Record):
    """One launch of the build: its function and geometry."""

    function: str
    """The entry function launched."""
    grid: list[int]
    """Blocks per grid dimension (x, y, z), as launched."""
    block: list[int]
    """Threads per block dimension (x, y, z)."""
    shared_mem_bytes: int
    """Dynamic shared memory per block."""
    cluster: int | None = None
    """CTAs per thread-block cluster (CUDA device only; 1: no cluster)."""
    pdl: bool | None = None
    """Launched with programmatic dependent launch (it may start before the launch before ends)."""


class LaunchRecord(Record):
    """The build that ran: its functions, the kernel's own description of it, its launches and, on
    a GPU, each function's resources. Empty for a run that never built."""

    functions: list[str] | None = None
    """Entry functions of the build, in launch order."""
    info: dict[str, Any] | None = None
    """The kernel's description of the build (path, tile, schedule, math, ...): each kernel's own
    keys, so an open mapping."""
    arch: str | None = None
    """The architecture it was compiled for, e.g. 'sm_90a'."""
    resources: dict[str, FunctionResources] | None = None
    """Function name -> its resources (CUDA device only)."""
    input_sets: int | None = None
    """Input sets the timed launches rotate through (CUDA device only)."""
    launches: list[KernelLaunch] | None = None
    """Each launch of one run of the build."""


class GpuProcess(Record):
    """Another process that held the GPU during the run."""

    pid: int
    """Its process id."""
    used_mib: Number | None = None
    """GPU memory it used, in MiB (None where NVML does not say)."""


class QueueHold(Record):
    """Which timings were queued behind the hold kernel (``engine.backends.cuda_timer``)."""

    held: list[str] | None = None
    """Implementations whose launches were queued behind the hold."""
    not_held: list[str] | None = None
    """Implementations timed without it (the GPU ran slower than the host queued)."""
    held_chunks: int | None = None
    """Chunks of launches queued behind a hold."""
    expired_chunks: int | None = None
    """Held chunks whose hold ran out before the host had queued them: their times include gaps."""
    expired: list[str] | None = None
    """The implementations with an expired chunk."""


class LaunchCounts(Record):
    """Launches each implementation got."""

    warmup: int | None = None
    """Warm-up launches before timing."""
    timed: int | None = None
    """Timed launches."""


class ValidityRecord(Record):
    """The conditions a run ran under, which say whether its times can be trusted. A key that was not
    recorded is None (and absent from the JSON); the simulated device records only a ``note``."""

    note: str | None = None
    """Why nothing else is recorded (the simulated device)."""
    samples: int | None = None
    """NVML samples taken during the run."""
    throttle_reasons_seen: list[str] | None = None
    """Clock event reasons seen in any sample."""
    harmful_throttle: bool | None = None
    """A reason that slows a running kernel was seen (power cap, thermal, power brake)."""
    sm_clock_mhz_min: Number | None = None
    """Lowest SM clock sampled."""
    sm_clock_mhz_max: Number | None = None
    """Highest SM clock sampled."""
    temperature_c_max: Number | None = None
    """Highest GPU temperature sampled."""
    power_w_max: Number | None = None
    """Highest board power sampled."""
    other_processes: list[GpuProcess] | None = None
    """Other processes on the GPU at the end of the run (empty: none; None: not checked)."""
    power_limit_w: Number | None = None
    """The power limit in force."""
    power_limit_default_w: Number | None = None
    """The board's default power limit."""
    queue_hold: QueueHold | None = None
    """Which timings were queued behind the hold kernel."""
    rest_applied_s: Number | None = None
    """The rest taken before ours and each peer."""
    launches_each: LaunchCounts | None = None
    """Warm-up and timed launches each implementation got."""
    soak: dict[str, Any] | None = None
    """A soak's summary (``engine.soak.SoakSummary`` as JSON), for a soak stored as a run."""
