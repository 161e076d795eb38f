"""Hardware profiles: datasheet peaks and limits as validated TOML, built in and per user.

Built-in profiles live in the ``profiles`` package (``profiles/*.toml``); user profiles (e.g. the
ones ``tui calibrate`` writes) live in ``<config dir>/profiles`` and win over built-ins of the same
name. A malformed user profile is reported and skipped, never fatal for the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.errors import InputError
from engine.paths import config_dir
from engine.regex import check_patterns
from engine.safe_files import write_atomic
from engine.tomlio import load_toml, short_key, short_repr

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "profiles"

PEAK_TFLOPS_MIN, PEAK_TFLOPS_MAX = 1e-3, 1e6
"""Sane peaks: 1 GFLOP/s to an exaFLOP/s. Outside, a figure is a typo, and SOL percentages (and the
JSON that carries them) would be zero, infinite or not numbers at all."""

PROVISIONAL_LABEL = "provisional (datasheet, not measured)"
"""How the CLI, the checks and the cockpit mark a profile whose ``provisional`` is true."""

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
"""Profiles are files: a boolean or a quoted number is a mistake to name, never a value to coerce,
and inf or nan is never a datasheet figure."""


class PeakTflops(BaseModel):
    """Dense (no sparsity) peak throughput per input dtype, TFLOP/s, with fp32 accumulation
    for the tensor-core types unless the profile's notes say otherwise."""

    model_config = STRICT
    fp32: float = Field(ge=PEAK_TFLOPS_MIN, lt=PEAK_TFLOPS_MAX)
    """Plain fp32 FMA throughput (CUDA cores)."""
    tf32: float = Field(ge=PEAK_TFLOPS_MIN, lt=PEAK_TFLOPS_MAX)
    """Tensor cores, tf32 inputs."""
    bf16: float = Field(ge=PEAK_TFLOPS_MIN, lt=PEAK_TFLOPS_MAX)
    """Tensor cores, bf16 inputs, fp32 accumulate."""
    fp16: float = Field(ge=PEAK_TFLOPS_MIN, lt=PEAK_TFLOPS_MAX)
    """Tensor cores, fp16 inputs, fp32 accumulate."""
    fp8: float | None = Field(default=None, ge=PEAK_TFLOPS_MIN, lt=PEAK_TFLOPS_MAX)
    """Tensor cores, fp8 inputs; absent where the architecture has no fp8."""


class Profile(BaseModel):
    """One GPU model's datasheet peaks and limits (or measured ceilings, for calibrated ones)."""

    model_config = STRICT
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=64)
    """Short identifier used on the command line, e.g. h100-sxm."""
    display_name: str
    """Marketing name, e.g. 'NVIDIA H100 SXM5 80GB'."""
    aliases: list[str] = []
    """Other names accepted by --profile (e.g. h100)."""
    compute_capability: str = Field(pattern=r"^\d{1,2}\.\d{1,2}$")
    """CUDA compute capability, e.g. '9.0'."""
    sm_count: int = Field(gt=0, le=100_000)
    """Streaming multiprocessors."""
    peak_tflops: PeakTflops
    """Dense peak TFLOP/s per dtype."""
    memory_bandwidth_gbps: float = Field(ge=1, lt=1e6)
    """Peak DRAM bandwidth, GB/s (10^9 bytes per second)."""
    memory_gb: float = Field(ge=0.01, lt=1e6)
    """Device memory, GB."""
    l2_mb: float = Field(ge=0.01, lt=1e6)
    """L2 cache, MB."""
    shared_memory_per_sm_bytes: int = Field(gt=0, le=2**24)
    """Shared memory per multiprocessor, bytes."""
    shared_memory_per_block_bytes: int = Field(gt=0, le=2**24)
    """Largest dynamic shared memory one block may opt in to, bytes (at most the per-SM figure)."""
    registers_per_sm: int = Field(gt=0, le=2**24)
    """32-bit registers per multiprocessor."""
    max_threads_per_block: int = Field(default=1024, gt=0, le=2**16)
    """Threads per block limit."""
    power_w: float = Field(ge=1, lt=1e5)
    """Board power limit (TDP), W."""
    nvml_name_patterns: list[str] = []
    """Regular expressions matched (case-insensitively) against the NVML device name."""
    source: str
    """Where the figures come from (datasheet, whitepaper, or a calibration run)."""
    notes: str = ""
    """Anything a reader must know about the figures."""
    measured: bool = False
    """True for calibrated profiles: peaks measured on this machine, not datasheet figures."""
    base_profile: str | None = None
    """For calibrated profiles: the datasheet profile this one was measured against."""
    provisional: bool = False
    """True where no figure of this profile was ever measured by this product on that GPU model:
    datasheet peaks and programming-guide limits only, shown as "provisional (datasheet, not
    measured)" in the cockpit and as ``provisional`` in ``--json``. README's table of what has been
    measured on which GPU says which built-ins are not; a calibrated (``measured``) profile never is."""

    @field_validator("nvml_name_patterns")
    @classmethod
    def _patterns_compile(cls, v: list[str]) -> list[str]:
        return check_patterns(v)

    @model_validator(mode="after")
    def _measured_not_provisional(self) -> Profile:
        if self.measured and self.provisional:
            raise ValueError("measured and provisional are both true: a calibrated profile's peaks were measured "
                             "on this machine, so it is not provisional")
        return self

    @model_validator(mode="after")
    def _block_within_sm(self) -> Profile:
        if self.shared_memory_per_block_bytes > self.shared_memory_per_sm_bytes:
            raise ValueError(f"shared_memory_per_block_bytes ({self.shared_memory_per_block_bytes}) is more than "
                             f"shared_memory_per_sm_bytes ({self.shared_memory_per_sm_bytes}): a block runs on one SM")
        return self

    @property
    def cc(self) -> tuple[int, int]:
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype`` (bf16, fp16, fp32, tf32, fp8)."""
        val = getattr(self.peak_tflops, dtype, None)
        if val is None:
            raise InputError(f"profile {self.name} has no peak for dtype {dtype}")
        return float(val) * 1e12

    def sol_peak_flops(self, dtype: str) -> float:
        """The compute ceiling SOL uses for ``dtype``: the datasheet peak, except fp32, whose
        fp32-accurate results also come from three tf32 tensor-core products (3xTF32): its
        ceiling is the faster of the FFMA peak and a third of the tf32 peak (H100/H200: 164.9
        vs 66.9 TFLOP/s; L40S and RTX 4090: FFMA stays faster)."""
        peak = self.peak_flops(dtype)
        if dtype == "fp32" and self.peak_tflops.tf32:
            peak = max(peak, float(self.peak_tflops.tf32) * 1e12 / 3)
        return peak

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gbps * 1e9

    def matches_device_name(self, device_name: str) -> bool:
        return any(re.search(p, device_name, re.IGNORECASE) for p in self.nvml_name_patterns)


@dataclass
class ProfileSet:
    """All profiles that loaded, and the problems of those that did not."""

    profiles: dict[str, Profile] = field(default_factory=dict)
    origins: dict[str, Path] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """File stem -> why that user profile was skipped, so that asking for it by name says why."""

    def names(self) -> list[str]:
        return sorted(self.profiles)

    def get(self, name: str) -> Profile:
        """Look a profile up by name or alias; unknown -> InputError listing the known ones (or, for
        a user profile that was skipped, why)."""
        key = name.strip().lower()
        if not key:
            raise InputError("profile: empty name", fix=f"give a profile name or alias: {', '.join(self.names())}")
        if key in self.profiles:
            return self.profiles[key]
        for prof in self.profiles.values():
            if key in (a.lower() for a in prof.aliases):
                return prof
        known = ", ".join(
            p.name + (f" ({', '.join(p.aliases)})" if p.aliases else "")
            for p in sorted(self.profiles.values(), key=lambda p: p.name)
        )
        if key in self.skipped:
            raise InputError(f"profile {name!r} was skipped: {self.skipped[key]}",
                             fix="correct the field named above, or pick one of the known profiles: " + known)
        raise InputError(f"unknown profile {name!r}; known profiles: {known}",
                         fix="pick one of the known profiles, or save a calibrated one with `tui calibrate`")

    def detect(self, device_name: str, *, sm_count: int | None = None, memory_gib: float | None = None,
               power_limit_w: float | None = None) -> Profile | None:
        """The profile whose NVML name patterns match ``device_name``, most specific pattern first.
        Where the device's facts are known (SM count, memory in GiB as NVML reports it, the enforced
        power limit), a profile they contradict is not picked (``contradicts``), and among equally
        specific names the one nearest in power and memory wins: an H100 SXM (132 SMs, 80 GB, 700 W), PCIe
        (114 SMs, 80 GB, 350 W) and NVL (132 SMs, 94 GB, 400 W) are told apart even by a name that
        says only "H100". None where no profile fits, or where several fit equally (a name that says
        only "H100" with no facts to tell the boards apart). Measured (calibrated) profiles are never picked by
        detection: they are chosen by name."""
        scored: dict[str, tuple[int, float]] = {}
        for prof in self.profiles.values():
            if prof.measured or contradicts(prof, sm_count=sm_count, memory_gib=memory_gib,
                                            power_limit_w=power_limit_w):
                continue
            lengths = [len(p) for p in prof.nvml_name_patterns if re.search(p, device_name, re.IGNORECASE)]
            if lengths:
                scored[prof.name] = (max(lengths), -_distance(prof, sm_count=sm_count, memory_gib=memory_gib,
                                                              power_limit_w=power_limit_w))
        if not scored:
            return None
        top = max(scored.values())
        winners = [name for name, score in scored.items() if score == top]
        return self.profiles[winners[0]] if len(winners) == 1 else None  # a tie: the name alone cannot say


MEMORY_TOLERANCE = 0.10
"""NVML's total memory (GiB) against a profile's memory_gb: within this share fits (80 GB boards report
79.2-79.6 GiB, the H200's 141 GB 140.4)."""
POWER_OVER = 1.10
"""An enforced power limit above this multiple of a profile's board power is another board (a 700 W
SXM limit is no 350 W PCIe card); limits below it fit (administrators lower them)."""


def contradicts(prof: Profile, sm_count: int | None = None, memory_gib: float | None = None,
                power_limit_w: float | None = None) -> bool:
    """Whether a device's known facts rule ``prof`` out: another SM count, memory outside
    ``MEMORY_TOLERANCE``, or a power limit above ``POWER_OVER`` times the profile's. Unknown facts
    (None) rule nothing out."""
    if sm_count is not None and sm_count != prof.sm_count:
        return True
    if memory_gib is not None and abs(memory_gib - prof.memory_gb) > MEMORY_TOLERANCE * prof.memory_gb:
        return True
    return power_limit_w is not None and power_limit_w > POWER_OVER * prof.power_w


def _distance(prof: Profile, sm_count: int | None = None, memory_gib: float | None = None,
              power_limit_w: float | None = None) -> float:
    """How far the known facts are from the profile's (relative memory plus relative power)."""
    d = 0.0
    if memory_gib is not None:
        d += abs(memory_gib - prof.memory_gb) / prof.memory_gb
    if power_limit_w is not None:
        d += abs(power_limit_w - prof.power_w) / prof.power_w
    return d


def user_profiles_dir() -> Path:
    return config_dir() / "profiles"


def _format_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "profile"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("missing", "extra_forbidden") or not err["loc"]:
            parts.append(f"{short_key(loc)}: {msg}")
        else:
            parts.append(f"{short_key(loc)}={short_repr(err.get('input'))}: {msg}")
    return "; ".join(parts)


def load_profile_file(path: Path) -> Profile:
    """Load one profile TOML; InputError naming the file and the field on any problem."""
    data = load_toml(path, "profile")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"profile {path}: {_format_error(exc)}",
                         fix="correct the field named above (see profiles/h100-sxm.toml for a valid profile)") from None


def load_profiles(user_dir: Path | None = None, include_user: bool = True) -> ProfileSet:
    """Built-in profiles plus user profiles. A built-in that fails is a bug and raises; a user
    profile that fails for any reason is recorded in ``errors`` (and ``skipped``) and skipped: one
    bad file in the user's config dir must not stop the CLI or the cockpit."""
    ps = ProfileSet()
    for path in sorted(BUILTIN_DIR.glob("*.toml")):
        prof = load_profile_file(path)
        ps.profiles[prof.name] = prof
        ps.origins[prof.name] = path
    if include_user:
        udir = user_dir if user_dir is not None else user_profiles_dir()
        if udir.is_dir():
            for path in sorted(udir.glob("*.toml")):
                try:
                    prof = load_profile_file(path)
                except InputError as exc:
                    ps.errors.append(str(exc.message))
                    ps.skipped[path.stem.lower()] = str(exc.message)
                    continue
                except Exception as exc:  # noqa: BLE001 -- promised: reported and skipped, never fatal
                    msg = f"profile {path}: cannot load it ({type(exc).__name__}: {short_repr(str(exc))})"
                    ps.errors.append(msg)
                    ps.skipped[path.stem.lower()] = msg
                    continue
                ps.profiles[prof.name] = prof
                ps.origins[prof.name] = path
    return ps


def save_user_profile(profile: Profile, user_dir: Path | None = None) -> Path:
    """Write ``profile`` as TOML into the user profile dir, atomically. Returns the path."""
    import tomli_w

    udir = user_dir if user_dir is not None else user_profiles_dir()
    udir.mkdir(parents=True, exist_ok=True)
    path = udir / f"{profile.name}.toml"
    write_atomic(path, tomli_w.dumps(profile.model_dump(mode="json", exclude_none=True)), mode=0o644,
                 what="profile")
    return path
