"""What `tui serve` serves and who may talk to it: the options every session's cockpit gets, the
checks before serving (port, host, public URL, the cockpit's own options) and the guard's rules
(the Host and Origin a request may carry, the per-server key, a session's terminal size). No
aiohttp here: the server itself is ``tui.serve_web``."""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from engine import InputError, load_profiles, resolve_task
from tui.cli_options import THEMES
from tui.screen_list import MODES

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
                raise bind_error(host, port, exc) from None


def bind_error(host: str, port: int, exc: OSError) -> InputError:
    """The InputError for a failed bind, naming the port or host and what to do."""
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
