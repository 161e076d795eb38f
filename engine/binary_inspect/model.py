"""What `tui inspect` reports about a binary: typed, documented, and the same for --json and people."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

Severity = Literal["error", "warn", "info"]


class Finding(BaseModel):
    """One thing found that stops the binary running here (error) or that an operator should know."""

    id: str
    """Stable identifier of the kind of finding, e.g. arch.no-code, libs.missing."""
    severity: Severity
    """error: the binary will not run as it is (exit status 1); warn and info do not block."""
    title: str
    """The finding, in a few words."""
    detail: str
    """What was found, with the names and versions involved."""
    fix: str
    """What to do, in words, with the flag or command where there is one."""
    rule: str
    """The troubleshooting rule (engine/rules.toml) that describes this failure."""


class Target(BaseModel):
    """The GPU the binary is judged against."""

    compute_capability: str
    """e.g. '9.0'."""
    name: str
    """The GPU's name (from NVML) or the profile's display name."""
    source: Literal["nvml", "profile", "assumed"]
    """nvml: this machine's GPU; profile: --profile; assumed: neither was available."""
    profile: str | None = None
    """The profile used or detected, if any."""
    driver_cuda: str | None = None
    """The CUDA version the installed driver supports (NVML), e.g. '13.0'; None without a driver."""
    driver_version: str | None = None
    """The driver's version, e.g. '580.65.06'."""
    note: str | None = None
    """How the target was chosen when that needs saying (an assumption, a disagreement)."""


class Library(BaseModel):
    """One shared library the binary needs, as the dynamic loader resolves it (ldd)."""

    name: str
    """The soname, e.g. libcudart.so.13."""
    path: str | None = None
    """Where it resolves; None when not found."""
    found: bool
    """False: the loader cannot find it, so the binary will not start."""
    candidates: list[str] = []
    """For a missing library: folders on this machine that hold a file of that name."""
    packages: list[str] = []
    """For a missing library: the pip or apt packages that provide it."""


class CudaRuntime(BaseModel):
    """The CUDA runtime the binary uses, against what the driver supports."""

    linkage: Literal["shared", "static", "none"]
    """shared: libcudart.so.N in DT_NEEDED; static: linked in; none: driver API or libraries only."""
    soname: str | None = None
    """e.g. libcudart.so.13."""
    version: str | None = None
    """The runtime's version: from the resolved file's name (13.0.96) or the soname's major."""
    built_with: str | None = None
    """The CUDA release that compiled its device code, where the file says (uncompressed cubins
    carry 'Cuda compilation tools, release X.Y'; PTX implies it by its ISA version)."""
    driver_cuda: str | None = None
    """The CUDA version the driver supports; None without a driver here."""


class Smoke(BaseModel):
    """A smoke run of the binary (--run)."""

    command: list[str]
    """The program and its arguments."""
    exit_code: int | None
    """Its exit status; None when killed at the timeout or by a signal."""
    signal: str | None = None
    """The signal that ended it (SIGSEGV, SIGKILL at the timeout), if any."""
    timed_out: bool = False
    """It ran past --timeout and was killed (its whole process group)."""
    timeout_s: float
    """The limit it ran under."""
    wall_s: float
    """Seconds it ran."""
    output_bytes: int
    """Bytes it wrote to stdout and stderr together."""
    output_tail: str
    """The end of its output (bounded), for the reader."""
    rules: list[str] = []
    """Troubleshooting rules its output matched, best first."""


class Report(BaseModel):
    """Everything `tui inspect` found about one binary."""

    path: str
    """The file inspected."""
    kind: str
    """executable, shared library or object."""
    machine: str
    """Its ELF machine (EM_X86_64, EM_AARCH64)."""
    code_source: str
    """How the device code was listed: 'fatbin headers' (read from the file) or 'cuobjdump'."""
    sass: list[str]
    """Architectures with SASS (machine code), e.g. ['sm_80']."""
    ptx: list[str]
    """Virtual architectures with PTX, e.g. ['compute_80']."""
    target: Target
    """The GPU it was judged against."""
    runs_via: Literal["sass", "ptx-jit", "none", "unknown"]
    """How its kernels reach the target: its SASS, driver JIT of its PTX, not at all; unknown:
    it has no kernels of its own (they come from the libraries it links)."""
    libraries: list[Library] = []
    """The shared libraries it needs, direct and indirect (ldd's list)."""
    libraries_note: str | None = None
    """Why the library list is missing or partial (no ldd, a binary for another machine)."""
    runtime: CudaRuntime
    """The CUDA runtime it links, against the driver."""
    findings: list[Finding] = []
    """Errors first, then warnings, then notes."""
    smoke: Smoke | None = None
    """The smoke run, with --run."""

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def runnable(self) -> bool:
        return not self.blocking

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        d["runnable"] = self.runnable
        return d
