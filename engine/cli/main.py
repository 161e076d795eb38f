"""`tui <command> ...`: argument parsing and dispatch to one module per command."""

from __future__ import annotations

import argparse
import importlib
import sys

from engine import __version__
from engine.errors import CockpitError

COMMANDS = {
    "bench": "engine.cli.bench",
    "tune": "engine.cli.tune_cmd",
    "profiles": "engine.cli.profiles_cmd",
    "history": "engine.cli.history",
    "kernels": "engine.cli.kernels_cmd",
    "calibrate": "engine.cli.calibrate_cmd",
    "check": "engine.cli.check",
    "diagnose": "engine.cli.diagnose",
    "checklist": "engine.cli.checklist_cmd",
    "report": "engine.cli.report",
}
"""Command name -> module with ``register(subparsers)`` and ``run(args) -> int``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tui",
        description="SOL Cockpit: environment checks, hardware profiles, fused kernels and their "
                    "Speed-of-Light figures. Without a command, opens the terminal cockpit.",
    )
    parser.add_argument("--version", action="version", version=f"sol-cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in COMMANDS.values():
        importlib.import_module(modname).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except CockpitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
