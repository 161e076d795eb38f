"""`tui serve [--host 127.0.0.1] [--port 8000] [--public-url URL] [cockpit options] [--json]`: the
cockpit in a web browser. The serving code lives in ``tui.serve`` and is imported only when the
command runs: the engine never loads the UI (or textual-serve) to build its parser."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.screen_list import MODES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="serve the cockpit to web browsers (textual-serve; loopback only by default)",
        description="Serve the cockpit over HTTP: each browser tab gets its own cockpit process with "
                    "the options below. The printed URL carries a per-server key; requests from other "
                    "sites (a foreign Origin or Host header) are refused. There is no TLS: keep the "
                    "default loopback address and reach it through an SSH tunnel "
                    "(ssh -L 8000:127.0.0.1:8000 HOST), or put an authenticating proxy in front.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s; another address prints a warning)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default: %(default)s)")
    p.add_argument("--public-url", help="the URL browsers open, behind a proxy or a tunnel "
                                        "(default: http://HOST:PORT)")
    p.add_argument("--max-sessions", type=int, default=4,
                   help="browser sessions at once, each a cockpit process (default: %(default)s)")
    cockpit = p.add_argument_group("cockpit options (every session opens with them)")
    cockpit.add_argument("--profile", help="hardware profile (default: the saved one, else detected)")
    cockpit.add_argument("--backend", choices=("auto", "cuda", "sim"),
                         help="auto, cuda or sim, the SIMULATED device (default: SOL_BACKEND, else auto)")
    cockpit.add_argument("--task", type=Path, help="a TOML task file for the Tune screen")
    cockpit.add_argument("--screen", help=f"screen to open first ({', '.join(MODES)})")
    cockpit.add_argument("--theme", help="dark or light")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (url, host, port, pid, warnings) once serving, or the error")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tui.serve import serve
    from tui.serve_options import ServeOptions

    return serve(ServeOptions(host=args.host, port=args.port, public_url=args.public_url, profile=args.profile,
                              backend=args.backend, task=args.task, screen=args.screen, theme=args.theme,
                              json=args.json, max_sessions=args.max_sessions))
