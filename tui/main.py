"""The `tui` console command: a headless subcommand goes to the headless CLI (``tui.cli``); no
subcommand opens the cockpit (Textual is imported only then). ``tui --help`` prints the cockpit's
options and the headless commands."""

from __future__ import annotations

import sys

from tui.cli.main import COMMANDS
from tui.cli.main import main as cli_main


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        from tui.cli_options import full_help

        print(full_help(), end="")
        return 0
    if any(a in COMMANDS for a in argv[:1]) or argv[:1] == ["--version"]:
        return cli_main(argv)
    if argv and not argv[0].startswith("-"):  # a mistyped command: exit 2 listing the commands
        return cli_main(argv)
    from tui.app import run_app

    return run_app(argv)


if __name__ == "__main__":
    sys.exit(main())
