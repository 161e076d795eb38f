"""The `tui serve` web server: textual-serve's server and app service, with sessions that live in
their own process groups and stop with the server, and the guard of ``tui.serve_options`` in front
of every request. Imported only to serve: it loads aiohttp and textual-serve."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
from typing import Any, TextIO
from urllib.parse import urlencode

from aiohttp import WSCloseCode, web
from rich.console import Console
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from tui.serve_options import (
    KEY_COOKIE,
    MAX_MESSAGE_BYTES,
    ServeOptions,
    bind_error,
    clamp_size,
    exposure_warning,
    public_url,
    refusal,
    session_argv,
)

QUIT_GRACE_S = 3.0
"""How long a session's cockpit gets to quit when asked (it cancels its work and saves the
preferences) before its process group is sent SIGTERM."""
TERM_GRACE_S = 2.0
"""How long a session's process group gets after SIGTERM before SIGKILL."""
PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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


class SessionService(AppService):
    """One browser connection's cockpit (``argv``), in its own process group that dies with the
    server, its terminal clamped (``clamp_size``)."""

    def __init__(self, *args: Any, argv: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.argv = argv

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        env = self._build_environment(width=width, height=height)
        env["PYTHONSAFEPATH"] = "1"  # nothing imported from the current directory (python -m)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
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


def serving_info(options: ServeOptions, base_url: str) -> dict[str, Any]:
    """What ``--json`` prints once the server listens (the human line says the same)."""
    return {"status": "serving", "url": f"{base_url}/?{urlencode({'key': options.key})}",
            "base_url": base_url, "host": options.host, "port": options.port,
            "max_sessions": options.max_sessions,
            "pid": os.getpid(), "session_command": ["tui", *options.cockpit_args],
            "warnings": [w for w in (exposure_warning(options.host, options.port),) if w]}


class CockpitServer(Server):
    """textual-serve's server with sessions that are stopped with it, logging on stderr; ``out``
    gets the line (or JSON object) that says where it serves, once it listens."""

    def __init__(self, options: ServeOptions, out: TextIO) -> None:
        super().__init__(" ".join(["tui", *options.cockpit_args]), host=options.host, port=options.port,
                         title="SOL Cockpit", public_url=public_url(options.host, options.port, options.public_url))
        self.options = options
        self.out = out
        self.argv = session_argv(options.cockpit_args)
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
        options = self.options
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
        options, out = self.options, self.out
        info = serving_info(options, self.public_url)
        if options.json:
            out.write(json.dumps(info) + "\n")
        else:
            out.write(f"Serving the SOL Cockpit on {info['url']} (open this URL: its key lets your browser "
                      f"in; each tab opens its own {' '.join(info['session_command'])}, at most "
                      f"{options.max_sessions} at once). Ctrl-C stops it and its sessions.\n")
        out.flush()

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        """textual-serve's handler, with a session that the server can stop."""
        max_sessions = self.options.max_sessions
        if len(self.sessions) >= max_sessions:
            return web.Response(status=503, text=f"503: {max_sessions} sessions are open, the most "
                                                 "this server allows (tui serve --max-sessions)\n")
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE_BYTES)
        width, height = clamp_size(to_int(request.query.get("width", "80"), 80),
                                   to_int(request.query.get("height", "24"), 24))
        service = SessionService(self.command, write_bytes=websocket.send_bytes,
                                 write_str=websocket.send_str, close=websocket.close,
                                 download_manager=self.download_manager, debug=self.debug, argv=self.argv)
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
        options = self.options
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: keep serving
                loop.add_signal_handler(sig, self.stop, sig)
        try:
            web.run_app(self._make_app(), host=options.host, port=options.port, handle_signals=False,
                        loop=loop, print=self.ready, access_log=None, shutdown_timeout=QUIT_GRACE_S)
        except OSError as exc:  # lost the port between the check and the bind
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                raise
            raise bind_error(options.host, options.port, exc) from None
        finally:
            self._kill_sessions()
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
            loop.close()
        return self._exit_code()

    def _kill_sessions(self) -> None:
        """SIGKILL every session's process group that is still there (after the shutdown)."""
        for service in list(self.sessions):
            if service._process is not None:
                _signal_group(service._process.pid, signal.SIGKILL)

    def _exit_code(self) -> int:
        if self.stop_signal is None:
            return 0
        name = signal.Signals(self.stop_signal).name
        self.console.print("interrupted" if self.stop_signal == signal.SIGINT else f"stopped by {name}",
                           "(every session closed)", markup=False)
        return 128 + self.stop_signal


def make_server(options: ServeOptions, out: TextIO) -> CockpitServer:
    """The textual-serve server for ``options``; ``out`` gets the line (or JSON object) that says
    where it serves, once it listens."""
    return CockpitServer(options, out)
