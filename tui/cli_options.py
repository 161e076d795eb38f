"""The cockpit's command-line options, how they combine with the saved preferences (the command
line wins, then the preferences file, then the defaults), and ``tui --help``. No Textual here: the
help prints without loading the UI."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.preferences import Preferences
from tui.screen_list import MODES

THEMES = ("dark", "light")
DEFAULT_SCREEN = "checklist"
DEFAULT_THEME = "dark"


def build_parser() -> argparse.ArgumentParser:
    from tui.cli.main import COMMANDS as CLI_COMMANDS

    p = argparse.ArgumentParser(
        prog="tui", description="SOL Cockpit: open the terminal cockpit (no command), or run a headless "
                                "command.",
        epilog=f"headless commands: {', '.join(CLI_COMMANDS)} (tui COMMAND --help). Options left out "
               "come from the preferences file (tui/README-cockpit.md), then the defaults.")
    p.add_argument("--profile", help="hardware profile (default: the saved one, else detected from the GPU)")
    p.add_argument("--backend", choices=("auto", "cuda", "sim"), default=os.environ.get("SOL_BACKEND", "auto"),
                   help="auto: the GPU when a driver answers, else the simulated device (default: %(default)s)")
    p.add_argument("--task", type=Path, help="a TOML task file to load into the Tune screen (default: the last task)")
    p.add_argument("--screen", choices=MODES, help=f"screen to open first (default: the last one, else "
                                                      f"{DEFAULT_SCREEN})")
    p.add_argument("--theme", choices=THEMES, help=f"colour theme (default: the saved one, else {DEFAULT_THEME})")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def full_help() -> str:
    """``tui --help``: the cockpit's own options, then the headless commands (the CLI's help)."""
    from tui.cli.main import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli_main(["--help"])
    return (build_parser().format_help() + "\nHeadless commands (the same engine, no UI):\n\n"
            + out.getvalue())


@dataclass
class CockpitOptions:
    """What the cockpit opens with, after the command line and the preferences are combined."""

    profile: str | None
    backend: str
    task_file: Path | None
    task: dict[str, Any] | None
    """The saved task (used when no --task is given)."""
    screen: str
    theme: str


def combine(args: argparse.Namespace, prefs: Preferences) -> CockpitOptions:
    """The command line wins; what it leaves out comes from the preferences, then the defaults."""
    return CockpitOptions(
        profile=args.profile or prefs.profile,
        backend=args.backend,
        task_file=args.task,
        task=None if args.task else prefs.task,
        screen=args.screen or (prefs.screen if prefs.screen in MODES else DEFAULT_SCREEN),
        theme=args.theme or (prefs.theme if prefs.theme in THEMES else DEFAULT_THEME),
    )
