"""The soak's own flags as options (``engine.soak_options.SoakOptions``), and the check that a fault is
asked of the simulated device only: for `tui soak` on one GPU and on every GPU."""

from __future__ import annotations

import argparse
from typing import Any


def options_from_args(args: argparse.Namespace) -> Any:
    """SoakOptions from the flags; InputError naming the flag for 0, negative or unreadable values."""
    from engine import SoakOptions, parse_duration, parse_percent

    return SoakOptions(duration_s=parse_duration(args.duration, "--duration"),
                       verify_every_s=parse_duration(args.verify_every, "--verify-every"),
                       max_drift_pct=parse_percent(args.max_drift, "--max-drift"), sim_fault=args.sim_fault,
                       sim_fault_after_s=None if args.sim_fault_after is None
                       else parse_duration(args.sim_fault_after, "--fault-after"))


def check_fault(prep: Any, opts: Any) -> None:
    from engine import InputError

    if opts.sim_fault != "none" and not prep.simulated:
        raise InputError(f"--fault {opts.sim_fault}: only the simulated device injects soak faults",
                         fix="add --backend sim, or leave --fault out")
