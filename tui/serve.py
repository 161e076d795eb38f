"""`tui serve`: the cockpit in a web browser through textual-serve. Each browser connection gets its
own cockpit process (``tui`` with the options given to ``serve``), bridged over a websocket.

textual-serve has no authentication and no TLS, so the server adds what a local web server needs
against other sites (``guard``): it answers only requests whose Host header names it (no DNS
rebinding) and websockets whose Origin is its own (no cross-site websocket), and only to a browser
that has the per-server key of the URL it prints (a cookie, SameSite=Strict, once the page is
open). Sessions are capped in number and terminal size. It listens on the loopback address unless
told otherwise, and says what that means when it is told otherwise. Every session runs in
its own process group: stopping the server (Ctrl-C, SIGTERM, SIGHUP) asks each cockpit to quit,
then kills the group, so that no cockpit and no engine process outlives the server; a server killed
outright takes its sessions with it (Linux parent-death signal)."""

from __future__ import annotations

import contextlib
import sys

from engine import CockpitError, InputError
from tui.serve_options import (
    ServeOptions,
    addresses,
    check_cockpit_options,
    check_port,
    exposure_warning,
    public_url,
)


def _require_textual_serve() -> None:
    try:
        import aiohttp  # noqa: F401
        import textual_serve.server  # noqa: F401
    except ImportError as exc:
        raise CockpitError(f"tui serve needs textual-serve, which is not installed ({exc})",
                           fix="pip install 'textual-serve>=1.1' (a dependency of sol-cockpit: "
                               "reinstall it with pip install -e .)") from None


def serve(options: ServeOptions) -> int:
    """Check the input, warn about a non-loopback address, then serve until stopped."""
    _require_textual_serve()
    check_cockpit_options(options)
    if not 1 <= options.max_sessions <= 64:
        raise InputError(f"--max-sessions={options.max_sessions}: outside 1..64", fix="pass a number from 1 to 64 (default 4)")
    public_url(options.host, options.port, options.public_url)
    addresses(options.host, options.port)  # a bad port or host is an error before any warning
    warning = exposure_warning(options.host, options.port)
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    check_port(options.host, options.port)
    out = sys.stdout
    # Everything but the line saying where it serves goes to stderr: textual-serve copies a
    # session's stderr to stdout, which would break the one JSON object of --json.
    with contextlib.redirect_stdout(sys.stderr):
        from tui.serve_web import make_server

        return int(make_server(options, out).run())
