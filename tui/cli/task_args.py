"""The task flags every command that runs a kernel takes (bench, soak, tune, fleet-report and their
every-GPU runs), and the task they resolve to: flags win over the environment and the task file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from engine import DType, is_multi, resolve_task, trust_reference
from tui.cli.device_args import device_arg


def _profile_name(text: str) -> str:
    """--profile must name a profile: an empty value was silently the detected one."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give a profile name or alias (tui profiles lists them), "
                                         "or leave the flag out to detect it")
    return text


NOT_FOR_SOAK = ("--iterations", "--energy", "--rest", "--no-verify", "--no-peers")
"""Task flags a soak has no use for (it runs for ``--duration``, re-verifies on its own clock and
times no peers): ``tui soak --help`` leaves them out; given anyway, they are ignored with a note."""


def _add(p: argparse.ArgumentParser, hide: tuple[str, ...], *flags: str, **kw: Any) -> None:
    if flags[0] in hide:
        kw["help"] = argparse.SUPPRESS
    p.add_argument(*flags, **kw)


def add_alias(p: argparse._ActionsContainer, old: str, dest: str, **kw: Any) -> None:
    """A deprecated spelling kept working for scripts (``--sim``, ``--out``): not in the help or the
    usage, and it sets nothing unless given."""
    p.add_argument(old, dest=dest, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **kw)


def add_backend_arg(p: argparse.ArgumentParser, default: str | None = None, what: str = "") -> None:
    """``--backend auto|cuda|sim``, the one spelling of the device choice on every command."""
    p.add_argument("--backend", choices=["auto", "cuda", "sim"], default=default,
                   help=what or "auto: the GPU when a driver answers, else the simulated device (default auto)")


def add_task_args(p: argparse.ArgumentParser, *, soak: bool = False) -> None:
    """Task flags shared by commands that run kernels (flags win over env and the task file). With
    ``soak``, the flags in NOT_FOR_SOAK are hidden and ``--fault`` is the soak's own."""
    hide = NOT_FOR_SOAK if soak else ()
    p.add_argument("--task", type=Path, help="TOML task file (lowest precedence after defaults)")
    p.add_argument("--kernel", help="kernel name (tui kernels lists them)")
    p.add_argument("--kernel-file", dest="kernel_file", metavar="PATH.toml",
                   help="a user kernel: its TOML spec beside its .cu source (examples/kernels/)")
    p.add_argument("--trust-reference", dest="trust_reference", action="store_true",
                   help="let the user kernel's reference.file (Python code, which runs with your "
                        "permissions) run: trusts its current content, recorded by sha256")
    p.add_argument("--shape", help="e.g. m=8192,n=2560,k=2560 or batch=16,seq=512,hidden=2560 or 8192,2560,2560")
    p.add_argument("--dtype", choices=[d.value for d in DType],
                   help="element type (tf32: fp32 data on the tensor cores, opt-in)")
    p.add_argument("--block-size", dest="block_size", help="BLOCK_SIZE tile shape, e.g. 128x128 (env BLOCK_SIZE)")
    p.add_argument("--pipelining", dest="memory_pipelining",
                   help="MEMORY_PIPELINING: off or a number of stages (env MEMORY_PIPELINING)")
    p.add_argument("--fusion", dest="fusion", action="store_true", default=None, help="fused epilogue (default)")
    p.add_argument("--no-fusion", dest="fusion", action="store_false", help="GEMM, then a separate add kernel")
    _add(p, hide, "--warmup", type=int, help="warm-up launches (default 10)")
    _add(p, hide, "--iterations", type=int, help="timed launches (default 100)")
    _add(p, hide, "--energy", dest="energy_s", type=float, nargs="?", const=5.0, metavar="SECONDS",
                   help="after the timed runs, SECONDS (default 5) of back-to-back launches for board "
                        "power and energy per launch from NVML's energy counter (about +-4 %% at 5 s)")
    _add(p, hide, "--rest", dest="rest_s", type=float, nargs="?", const=3.0, metavar="SECONDS",
                   help="let the GPU idle SECONDS (default 3) before timing ours and before each peer, "
                        "so that all start from the same rested card (a GEMM timed right after "
                        "another measures slower)")
    add_backend_arg(p)
    p.add_argument("--profile", type=_profile_name,
                   help="hardware profile name or alias (default: detected from the GPU)")
    p.add_argument("--device", type=device_arg, help="GPU index (default 0); bench, soak: all, or a list such as "
                                                     "0,2,5, runs on each at once and compares them")
    p.add_argument("--timeout", dest="timeout_s", type=float, help="wall-clock limit in seconds (default 300)")
    p.add_argument("--seed", type=int, help="input seed (default 0)")
    _add(p, hide, "--no-verify", dest="verify", action="store_false", default=None, help="skip verification")
    _add(p, hide, "--no-peers", dest="peers", action="store_false", default=None, help="skip peers")
    p.add_argument("--schedule", help="schedule choices, e.g. consumers=pingpong,cluster=2 (tui kernels lists "
                                       "each kernel's; unset ones are the planner's or the tuner's)")
    if not soak:
        p.add_argument("--fault", choices=TASK_FAULTS, help="simulated device only: inject a fault (rehearsals and tests)")


TASK_FAULTS = ("none", "compile_error", "launch_failure", "illegal_address", "hang", "nan")
"""What ``--fault`` injects into one run on the simulated device."""


def ignored_flags(args: argparse.Namespace) -> list[str]:
    """The NOT_FOR_SOAK flags given to a soak (they do nothing there)."""
    given = {"--iterations": args.iterations is not None, "--energy": args.energy_s is not None,
             "--rest": args.rest_s is not None, "--no-verify": args.verify is False, "--no-peers": args.peers is False}
    return [flag for flag, on in given.items() if on]


TASK_FIELDS = ("kernel", "kernel_file", "shape", "dtype", "block_size", "memory_pipelining", "schedule", "fusion", "warmup", "iterations",
               "energy_s", "rest_s", "backend", "device", "timeout_s", "seed", "verify", "peers", "fault")


def task_from_args(args: argparse.Namespace) -> Any:
    if is_multi(getattr(args, "device", None)):
        from engine import InputError

        raise InputError(f"--device={args.device}: this command runs on one GPU", fix="give one index, e.g. --device 0")
    overrides = {f: getattr(args, f, None) for f in TASK_FIELDS}
    task = resolve_task(args.task, os.environ, overrides)
    if getattr(args, "trust_reference", False) and task.kernel_file:
        trust_reference(task.kernel_file)
    return task
