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

import asyncio
import contextlib
import errno
import ipaddress
import json
import os
import secrets
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlencode, urlparse

from engine import CockpitError, InputError, load_profiles, resolve_task
from tui.cli_options import THEMES
from tui.screen_list import MODES

QUIT_GRACE_S = 3.0
"""How long a session's cockpit gets to quit when asked (it cancels its work and saves the
preferences) before its process group is sent SIGTERM."""
TERM_GRACE_S = 2.0
"""How long a session's process group gets after SIGTERM before SIGKILL."""
PR_SET_PDEATHSIG = 1
KEY_COOKIE = "sol_cockpit_key"
MAX_COLUMNS = 500
MAX_ROWS = 200
"""A session's terminal is clamped to this size (a 30000x30000 terminal took 572 MB)."""
MAX_MESSAGE_BYTES = 64 * 1024
"""The largest websocket message a browser may send (keystrokes and resizes are a few bytes)."""


@dataclass
class ServeOptions:
    """What ``tui serve`` was asked for: where to listen, and the cockpit each session opens."""

    host: str = "127.0.0.1"
    """The address to listen on (loopback by default: textual-serve has no authentication)."""
    port: int = 8000
    """The TCP port to listen on."""
    public_url: str | None = None
    """The URL browsers reach the server by (a reverse proxy, a tunnel); default http://HOST:PORT."""
    profile: str | None = None
    """Every session's --profile (None: the saved one, else detected)."""
    backend: str | None = None
    """Every session's --backend: auto, cuda or sim (None: the cockpit's default)."""
    task: Path | None = None
    """Every session's --task file."""
    screen: str | None = None
    """Every session's first screen (--screen)."""
    theme: str | None = None
    """Every session's colour theme (--theme)."""
    json: bool = False
    """Print one JSON object when serving starts instead of the human line."""
    max_sessions: int = 4
    """Browser sessions at once (each is a cockpit process); more are refused with 503."""
    key: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """The per-server secret in the printed URL; a browser without it gets 403."""

    @property
    def cockpit_args(self) -> list[str]:
        """The cockpit options every session gets, as ``tui`` takes them."""
        args: list[str] = []
        for flag, value in (("--profile", self.profile), ("--backend", self.backend),
                            ("--task", self.task.resolve() if self.task else None), ("--screen", self.screen),
                            ("--theme", self.theme)):
            if value is not None:
                args += [flag, str(value)]
        return args


# --- checks before serving -------------------------------------------------------------------------
def addresses(host: str, port: int) -> list[tuple[Any, ...]]:
    """The addresses the server would listen on; InputError for a port out of range or a host
    that does not resolve."""
    if not 1 <= port <= 65535:
        raise InputError(f"--port={port}: not a TCP port", fix="pass a port from 1024 to 65535 (default 8000)")
    if not host.strip():
        raise InputError("--host: empty", fix="pass an address such as 127.0.0.1 (the default)")
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"--host={host}: not an address or a name this machine can resolve ({exc})",
                         fix="pass an address such as 127.0.0.1 (the default) or 0.0.0.0") from None


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address."""
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM,
                                                           flags=socket.AI_PASSIVE)}
    except (socket.gaierror, UnicodeError):
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addrs)


def exposure_warning(host: str, port: int) -> str | None:
    """The warning for a non-loopback address (None for a loopback one)."""
    if is_loopback(host):
        return None
    return (f"--host={host} is not a loopback address: anyone who can reach port {port} on it gets a "
            "cockpit that runs kernels on this machine and reads its results. textual-serve has no "
            "authentication and no TLS. Prefer the default 127.0.0.1 with an SSH tunnel "
            f"(ssh -L {port}:127.0.0.1:{port} THIS_HOST), or an authenticating reverse proxy in front "
            "(and --public-url).")


def check_port(host: str, port: int) -> None:
    """Raise InputError naming the port when the server could not listen there (in use, not
    allowed, not an address of this machine). Binds each address as the server will (SO_REUSEADDR,
    IPv6 only on IPv6 sockets), then lets it go."""
    for family, kind, proto, _, addr in addresses(host, port):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                raise _bind_error(host, port, exc) from None


def _bind_error(host: str, port: int, exc: OSError) -> InputError:
    if exc.errno == errno.EADDRINUSE:
        return InputError(f"--port={port}: port {port} on {host} is in use (another server, or a "
                          "tui serve still running)",
                          fix=f"pass another port (tui serve --port {port + 1 if port < 65535 else 8000}), "
                              f"or stop what listens there (ss -ltnp 'sport = :{port}' names it)")
    if exc.errno == errno.EACCES:
        return InputError(f"--port={port}: not allowed to listen on port {port} (ports below 1024 need root)",
                          fix="pass a port from 1024 to 65535 (default 8000)")
    if exc.errno == errno.EADDRNOTAVAIL:
        return InputError(f"--host={host}: not an address of this machine",
                          fix="pass one of this machine's addresses, 127.0.0.1 (the default) or 0.0.0.0")
    return InputError(f"--port={port}: cannot listen on {host} port {port} ({exc.strerror or exc})",
                      fix="pass another --port or --host")


def public_url(host: str, port: int, given: str | None) -> str:
    """The URL the page's websocket connects back to: ``given`` (checked), else http://HOST:PORT
    (this machine's name for a wildcard host, which no browser can connect to)."""
    if given:
        parsed = urlparse(given)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InputError(f"--public-url={given}: not an http:// or https:// URL",
                             fix="pass the URL browsers open, e.g. https://cockpit.example.org")
        return given.rstrip("/")
    name = socket.getfqdn() if host in ("0.0.0.0", "::") else host
    return f"http://[{name}]:{port}" if ":" in name else f"http://{name}:{port}"


def check_cockpit_options(options: ServeOptions) -> None:
    """Refuse before serving what every session's cockpit would refuse or fall back from: an
    unknown profile, a bad task file, screen or theme (each session would show it, one by one)."""
    if options.profile is not None:
        load_profiles().get(options.profile)
    if options.task is not None:
        resolve_task(options.task)
    for flag, value, allowed in (("--screen", options.screen, MODES), ("--theme", options.theme, THEMES),
                                 ("--backend", options.backend, ("auto", "cuda", "sim"))):
        if value is not None and value not in allowed:
            raise InputError(f"{flag}={value}: unknown", fix=f"pass one of {', '.join(allowed)}")


def session_argv(cockpit_args: list[str]) -> list[str]:
    """The command each browser connection runs: this Python's ``tui`` with the cockpit options."""
    return [sys.executable, "-m", "tui.main", *cockpit_args]


# --- who may talk to the server ----------------------------------------------------------------------
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(options: ServeOptions) -> frozenset[str]:
    """The Host headers the server answers (lower case, with the port): the public URL's, the
    listening address's, and the loopback names where it listens on loopback or a wildcard. A
    DNS-rebound name (evil.example resolving to 127.0.0.1) is not among them."""
    port = options.port
    hosts = {urlparse(public_url(options.host, port, options.public_url)).netloc.lower()}
    host = f"[{options.host}]" if ":" in options.host and not options.host.startswith("[") else options.host
    hosts.add(f"{host}:{port}".lower())
    if options.host in ("0.0.0.0", "::") or is_loopback(options.host):
        hosts.update(f"{name}:{port}" for name in LOOPBACK_NAMES)
    return frozenset(hosts)


def allowed_origins(options: ServeOptions) -> frozenset[str]:
    """The Origin headers a websocket may come from: this server's own pages."""
    out = {f"{scheme}://{h}" for h in allowed_hosts(options) for scheme in ("http", "https")}
    parsed = urlparse(public_url(options.host, options.port, options.public_url))
    out.add(f"{parsed.scheme}://{parsed.netloc}".lower())
    return frozenset(out)


def refusal(method: str, path: str, headers: Any, query: Any, cookies: Any, options: ServeOptions) -> str | None:
    """Why a request is refused (403), or None: a foreign Host, a foreign Origin, or no key (a
    static file needs no key: it is the same for everyone)."""
    if (headers.get("Host") or "").lower() not in allowed_hosts(options):
        return "this server answers only to its own address (Host header refused)"
    origin = headers.get("Origin")
    if origin is not None and origin.lower() not in allowed_origins(options):
        return f"requests from {origin[:80]} are refused (another site's page)"
    if path.startswith("/static/"):
        return None
    given = query.get("key") or cookies.get(KEY_COOKIE) or ""
    if not secrets.compare_digest(given.encode(), options.key.encode()):
        return "open the URL that `tui serve` printed: it carries this server's key"
    return None


def clamp_size(width: int, height: int) -> tuple[int, int]:
    """A session's terminal size within 1..MAX_COLUMNS x 1..MAX_ROWS."""
    return max(1, min(MAX_COLUMNS, width)), max(1, min(MAX_ROWS, height))


# --- the server ----------------------------------------------------------------------------------
def _die_with_server() -> None:
    """In a session's process before exec: SIGKILL it when the server dies (Linux ``prctl``)."""
    import ctypes

    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a session's process group; False when nothing in it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def make_server(options: ServeOptions, out: TextIO) -> Any:
    """The textual-serve server for ``options``; ``out`` gets the line (or JSON object) that says
    where it serves, once it listens. Imported here: textual-serve and aiohttp load only to serve."""
    from aiohttp import WSCloseCode, web
    from rich.console import Console
    from textual_serve.app_service import AppService
    from textual_serve.server import Server, to_int

    argv = session_argv(options.cockpit_args)

    class SessionService(AppService):
        """One browser connection's cockpit, in its own process group (see the module's docstring)."""

        async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
            env = self._build_environment(width=width, height=height)
            env["PYTHONSAFEPATH"] = "1"  # nothing imported from the current directory (python -m)
            self._process = process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True, preexec_fn=_die_with_server)
            assert process.stdin is not None
            self._stdin = process.stdin
            return process

        async def set_terminal_size(self, width: int, height: int) -> None:
            await super().set_terminal_size(*clamp_size(to_int(str(width), 80), to_int(str(height), 24)))

        async def stop(self) -> None:
            """Ask the cockpit to quit; then SIGTERM, then SIGKILL its process group."""
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(super().stop(), QUIT_GRACE_S)
            process = self._process
            if process is None:
                return
            for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, TERM_GRACE_S)):
                if not _signal_group(process.pid, sig):
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(process.wait(), grace)

    class CockpitServer(Server):
        """textual-serve's server with sessions that are stopped with it, logging on stderr."""

        def __init__(self) -> None:
            super().__init__(" ".join(["tui", *options.cockpit_args]), host=options.host, port=options.port,
                             title="SOL Cockpit",
                             public_url=public_url(options.host, options.port, options.public_url))
            self.console = Console(stderr=True)
            self.sessions: dict[SessionService, web.WebSocketResponse] = {}
            self.stop_signal: int | None = None

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(self.guard)
            return app

        @web.middleware
        async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
            """403 for another site or no key (``refusal``); a key given in the URL is kept as a
            cookie, so the page's websocket and reloads carry it."""
            why = refusal(request.method, request.path, request.headers, request.query, request.cookies, options)
            if why is not None:
                return web.Response(status=403, text=f"403 Forbidden: {why}\n")
            response = await handler(request)
            if "key" in request.query and request.path == "/":
                response.set_cookie(KEY_COOKIE, options.key, httponly=True, samesite="Strict", path="/")
            return response

        async def on_startup(self, app: web.Application) -> None:
            """Nothing: the line saying where it serves comes once it listens (``ready``)."""

        async def on_shutdown(self, app: web.Application) -> None:
            sessions = list(self.sessions.items())
            await asyncio.gather(*(service.stop() for service, _ in sessions), return_exceptions=True)
            for _, websocket in sessions:
                await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"server stopped")

        def ready(self, *_: object) -> None:
            info = {"status": "serving", "url": f"{self.public_url}/?{urlencode({'key': options.key})}",
                    "base_url": self.public_url, "host": options.host, "port": options.port,
                    "max_sessions": options.max_sessions,
                    "pid": os.getpid(), "session_command": ["tui", *options.cockpit_args],
                    "warnings": [w for w in (exposure_warning(options.host, options.port),) if w]}
            if options.json:
                out.write(json.dumps(info) + "\n")
            else:
                out.write(f"Serving the SOL Cockpit on {info['url']} (open this URL: its key lets your browser "
                          f"in; each tab opens its own {' '.join(info['session_command'])}, at most "
                          f"{options.max_sessions} at once). Ctrl-C stops it and its sessions.\n")
            out.flush()

        async def handle_websocket(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
            """textual-serve's handler, with a session that the server can stop."""
            if len(self.sessions) >= options.max_sessions:
                return web.Response(status=503, text=f"503: {options.max_sessions} sessions are open, the most "
                                                     "this server allows (tui serve --max-sessions)\n")
            websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE_BYTES)
            width, height = clamp_size(to_int(request.query.get("width", "80"), 80),
                                       to_int(request.query.get("height", "24"), 24))
            service = SessionService(self.command, write_bytes=websocket.send_bytes,
                                     write_str=websocket.send_str, close=websocket.close,
                                     download_manager=self.download_manager, debug=self.debug)
            self.sessions[service] = websocket  # counted before the first await: the cap holds under a burst
            try:
                await websocket.prepare(request)
                await service.start(width, height)
                await self._process_messages(websocket, service)
            except asyncio.CancelledError:
                await websocket.close()
            except Exception as error:  # one broken session never stops the server
                self.console.print(f"session ended with an error: {error!r}", markup=False)
            finally:
                await service.stop()
                self.sessions.pop(service, None)
            return websocket

        def stop(self, signum: int) -> None:
            """A stop signal: the first one shuts down (sessions first); later ones are ignored."""
            if self.stop_signal is None:
                from aiohttp.web_runner import GracefulExit

                self.stop_signal = signum
                raise GracefulExit()

        def run(self) -> int:
            """Serve until a stop signal; 128 + its number, as the other commands exit on one."""
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: keep serving
                    loop.add_signal_handler(sig, self.stop, sig)
            try:
                web.run_app(self._make_app(), host=options.host, port=options.port, handle_signals=False,
                            loop=loop, print=self.ready, access_log=None, shutdown_timeout=QUIT_GRACE_S)
            except OSError as exc:  # lost the port between the check and the bind
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                    raise
                raise _bind_error(options.host, options.port, exc) from None
            finally:
                for service in list(self.sessions):
                    if service._process is not None:
                        _signal_group(service._process.pid, signal.SIGKILL)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    loop.remove_signal_handler(sig)
                loop.close()
            if self.stop_signal is None:
                return 0
            name = signal.Signals(self.stop_signal).name
            self.console.print("interrupted" if self.stop_signal == signal.SIGINT else f"stopped by {name}",
                               "(every session closed)", markup=False)
            return 128 + self.stop_signal

    return CockpitServer()


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
        return int(make_server(options, out).run())
