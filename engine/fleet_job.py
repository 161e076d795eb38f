"""What a fleet job runs, shared by the Kubernetes and the Slurm exports: ``tui fleet-report`` with
the seed bench's flags, and the knob environment variables (BLOCK_SIZE, MEMORY_PIPELINING) the
deployment manifests already use. Validated here, on the operator's machine, so a bad flag is
named before a cluster ever sees the job."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine.errors import InputError

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
"""An environment variable's name as a shell and a Pod both take it (a key is written unquoted)."""
MAX_ENV_VALUE = 4096
MAX_NAME = 52
"""A Job's pods are named after it plus a suffix; 52 leaves room within the 63 a label allows."""
MAX_GPUS = 64


def check_name(field: str, value: str, max_len: int = MAX_NAME) -> str:
    """A DNS-1123 label (what Kubernetes names and Slurm job names both accept), or InputError."""
    if not value or len(value) > max_len or not NAME_RE.match(value):
        raise InputError(f"{field}={value!r}: not a valid name",
                         fix=f"lower-case letters, digits and '-', starting and ending with a letter or digit, "
                             f"at most {max_len} characters (e.g. sol-fleet)")
    return value


class FleetJob(BaseModel):
    """The report each job step runs, and how many GPUs it asks for."""

    name: str = "sol-fleet"
    """Job name (a DNS-1123 label)."""
    gpus: int = 1
    """GPUs per host the job asks the scheduler for (0: none, only with the simulated backend)."""
    backend: Literal["auto", "cuda", "sim"] = "cuda"
    """Passed to ``tui fleet-report --backend``. 'cuda' by default: on a node whose driver is broken
    'auto' would fall back to the simulated device, and a fleet wants that host reported as broken.
    'sim' rehearses the job without GPUs."""
    kernel: str | None = None
    """Seed bench kernel (default: the task's default, the fused GEMM + residual)."""
    shape: str | None = None
    """Seed bench shape, as ``tui bench --shape``."""
    dtype: str | None = None
    """Seed bench dtype."""
    profile: str | None = None
    """Hardware profile (default: detected on each host)."""
    iterations: int | None = None
    """Timed launches per bench."""
    warmup: int | None = None
    """Warm-up launches per bench."""
    block_size: str | None = None
    """BLOCK_SIZE for the job's environment."""
    memory_pipelining: str | None = None
    """MEMORY_PIPELINING for the job's environment."""
    peers: bool = True
    """Time the peers (cuBLAS, PyTorch) too; off saves time on a large fleet."""
    checks: bool = True
    """Run the environment checks before the benches."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    """More environment variables for the job."""

    def validate_all(self) -> FleetJob:
        """InputError naming the first bad field; the task flags through the same validation as
        ``tui bench``."""
        check_name("--name", self.name)
        for key, value in self.knob_env().items():
            check_env(key, value)
        if not 0 <= self.gpus <= MAX_GPUS:
            raise InputError(f"--gpus={self.gpus}: outside 0..{MAX_GPUS}", fix="give the GPUs per host, e.g. 8")
        if self.gpus == 0 and self.backend != "sim":
            raise InputError(f"--gpus=0 with --backend={self.backend}: a bench on a GPU needs a GPU",
                             fix="ask for at least one GPU, or rehearse with --backend sim")
        from engine.backends.select import BackendChoice
        from engine.runner import prepare
        from engine.task import resolve_task

        # The plan against --profile (else the simulated device's default): a tile or a shape the
        # kernel cannot take is named here; each host plans again against its own GPU.
        task = resolve_task(None, {}, {**self.task_overrides(), "backend": "sim"})
        prepare(task, self.profile, backend_choice=BackendChoice(name="sim"))
        return self

    def task_overrides(self) -> dict[str, Any]:
        return {k: v for k, v in {"kernel": self.kernel, "shape": self.shape, "dtype": self.dtype,
                                  "iterations": self.iterations, "warmup": self.warmup, "block_size": self.block_size,
                                  "memory_pipelining": self.memory_pipelining, "backend": self.backend}.items()
                if v is not None}

    def report_args(self) -> list[str]:
        """``tui fleet-report`` flags (without the output and host, which each scheduler sets)."""
        args = ["--backend", self.backend]
        for flag, value in (("--kernel", self.kernel), ("--shape", self.shape), ("--dtype", self.dtype),
                            ("--profile", self.profile), ("--iterations", self.iterations),
                            ("--warmup", self.warmup)):
            if value is not None:
                args += [flag, str(value)]
        if not self.peers:
            args.append("--no-peers")
        if not self.checks:
            args.append("--no-checks")
        return args

    def knob_env(self) -> dict[str, str]:
        """The knobs as the deployment manifests pass them; a simulated rehearsal gets as many
        simulated GPUs as the job asks for real ones."""
        env = {}
        if self.backend == "sim":
            env["SOL_COCKPIT_SIM_DEVICES"] = str(max(self.gpus, 1))
        if self.block_size is not None:
            env["BLOCK_SIZE"] = self.block_size
        if self.memory_pipelining is not None:
            env["MEMORY_PIPELINING"] = self.memory_pipelining
        return {**env, **self.extra_env}


def check_env(key: str, value: str) -> None:
    """InputError for a variable name that is not a plain identifier (a shell would run the rest of
    ``A;touch X;B``) or a value with a newline, a NUL or other control characters."""
    if not ENV_KEY_RE.match(key):
        raise InputError(f"--env {key!r}: not an environment variable name",
                         fix="letters, digits and '_', not starting with a digit (e.g. --env NCCL_DEBUG=INFO)")
    if len(value) > MAX_ENV_VALUE or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InputError(f"--env {key}={value[:40]!r}: the value has a newline or another control character, "
                         f"or is longer than {MAX_ENV_VALUE}", fix="give a one-line value")


def parse_pairs(field: str, items: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` flags (repeatable) as a dict, or InputError naming the bad one."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{field}={item!r}: not KEY=VALUE", fix=f"e.g. {field} nvidia.com/gpu.product=H100")
        out[key.strip()] = value.strip()
    return out
