"""`tui serve` for real: the server in a subprocess on a free loopback port, a session over its
websocket (no browser needed), then the cockpit in headless Chromium (Debian's chromium package,
installed by tests/browser/setup_chromium.sh, driven by Playwright's Python package). Each test
stops the server with SIGTERM while a session is open and checks that nothing it started is left.

Set SOL_UPDATE_SCREENSHOTS=1 to refresh docs/serve-browser.png from the browser test (otherwise
the screenshot goes to the test's tmp dir, so that a test run leaves the tree as it was)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOKEN_VAR = "SOL_SERVE_TEST_TOKEN"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HOOK = "this.terminal=new "
"""Where textual-serve's page creates its xterm.js terminal: the test exposes it on ``window`` to
read the screen's text (the terminal draws on a canvas, so the text is not in the DOM)."""
SCREEN_TEXT = """() => { const t = window.__solTerminal; if (!t) return "";
  const b = t.buffer.active, rows = [];
  for (let i = 0; i < t.rows; i++) { const l = b.getLine(b.viewportY + i); rows.push(l ? l.translateToString(true) : ""); }
  return rows.join("\\n"); }"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def processes_with(token: str) -> dict[int, str]:
    """pid -> command line of every live process whose environment carries ``token``: the server
    and everything it started, wherever they were reparented (zombies have no environment)."""
    mark = f"{TOKEN_VAR}={token}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


class Served:
    """A ``tui serve`` subprocess and what the test needs to drive and stop it."""

    def __init__(self, proc: subprocess.Popen, info: dict, token: str) -> None:
        self.proc, self.info, self.token = proc, info, token
        self.url: str = info["url"]
        """The URL to open, with the server's key."""
        self.base: str = info["base_url"]

    def sessions(self) -> dict[int, str]:
        return {pid: cmd for pid, cmd in processes_with(self.token).items() if pid != self.proc.pid}

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server (not its group: it must stop its sessions itself); its exit code."""
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=20)

    def assert_nothing_left(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while (left := processes_with(self.token)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"still running after the server stopped: {left}"


@contextlib.contextmanager
def serving(*extra: str):
    """``tui serve --backend sim --json`` on a free port, with the test's tmp dirs (conftest)."""
    token = uuid.uuid4().hex
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tui.main", "serve", "--port", str(port), "--backend", "sim",
                             "--json", *extra], env={**os.environ, TOKEN_VAR: token}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, cwd=ROOT)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else b""
        if not line:
            proc.kill()
            pytest.fail(f"tui serve did not start: {proc.communicate(timeout=10)[1].decode(errors='replace')}")
        info = json.loads(line)
        assert info["status"] == "serving" and info["base_url"] == f"http://127.0.0.1:{port}"
        assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/\?key=[A-Za-z0-9_-]{{32}}", info["url"])
        assert info["warnings"] == [] and info["session_command"] == ["tui", "--backend", "sim"]
        yield Served(proc, info, token)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for pid in processes_with(token):  # after a failure: leave nothing behind either
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()
        proc.stderr.close()


@pytest.fixture
def served():
    with serving() as s:
        yield s


def test_other_sites_and_browsers_without_the_key_are_refused():
    """DNS rebinding (a foreign Host), a cross-site websocket (a foreign Origin), no key: 403;
    the key in the URL becomes a SameSite=Strict cookie; past --max-sessions: 503."""
    import asyncio

    import aiohttp

    async def probe(s: Served) -> None:
        port = s.info["port"]
        key = s.url.split("key=", 1)[1]
        ws = s.base.replace("http://", "ws://") + "/ws?width=80&height=24"
        async with aiohttp.ClientSession() as http:
            async def status(url: str, **headers: str) -> int:
                async with http.get(url, headers=headers, allow_redirects=False) as r:
                    return r.status

            assert await status(s.url, Host="evil.example") == 403
            assert await status(s.url, Host=f"evil.example:{port}") == 403
            assert await status(s.base + "/") == 403
            assert await status(s.base + "/?key=wrong") == 403
            async with http.get(s.url) as r:
                assert r.status == 200
                assert "samesite=strict" in r.headers["Set-Cookie"].lower()
                assert "httponly" in r.headers["Set-Cookie"].lower()
            for headers in ({"Origin": "http://evil.example"}, {"Origin": f"http://evil.example:{port}"},
                            {"Host": "evil.example"}):
                with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                    async with http.ws_connect(f"{ws}&key={key}", headers=headers):
                        pass
                assert err.value.status == 403, headers
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:  # no key (a fresh client: no cookie)
                async with aiohttp.ClientSession() as fresh, fresh.ws_connect(ws, headers={"Origin": s.base}):
                    pass
            assert err.value.status == 403
            async with http.ws_connect(f"{ws}&key={key}", headers={"Origin": s.base}) as first:
                await first.receive(timeout=30)  # the session started
                with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                    async with http.ws_connect(f"{ws}&key={key}", headers={"Origin": s.base}):
                        pass
                assert err.value.status == 503

    with serving("--max-sessions", "1") as s:
        asyncio.run(probe(s))
        assert s.stop() == 128 + signal.SIGTERM
        s.assert_nothing_left()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_session_over_the_websocket_ends_with_the_server(served, sig):
    """No browser: textual-serve's own protocol. The cockpit starts and draws the Checks screen;
    a stop signal (SIGINT is Ctrl-C) stops the server, the session's cockpit and its processes,
    and the server exits 128 + the signal's number, as the other commands do."""
    import asyncio

    import aiohttp

    async def first_screen() -> bytes:
        key = served.url.split("key=", 1)[1]
        ws_url = served.base.replace("http://", "ws://") + f"/ws?width=120&height=40&key={key}"
        seen = b""
        async with aiohttp.ClientSession() as http, http.ws_connect(ws_url) as ws:
            deadline = time.monotonic() + 30
            while b"Environment checks" not in seen and time.monotonic() < deadline:
                msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
                if msg.type == aiohttp.WSMsgType.BINARY:
                    seen += msg.data
                elif msg.type != aiohttp.WSMsgType.TEXT:
                    break
            sessions = served.sessions()
            assert sessions, "no cockpit process while a session is open"
            for pid in sessions:  # own process group; python -m imports nothing from the cwd
                assert os.getpgid(pid) != served.proc.pid
                assert b"PYTHONSAFEPATH=1" in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert served.stop(sig) == 128 + sig
            ends = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED)
            for _ in range(1000):  # what was sent before the stop, then the close
                if (await ws.receive(timeout=10)).type in ends:
                    break
            else:
                raise AssertionError("the websocket stayed open after the server stopped")
        return seen

    seen = asyncio.run(first_screen())
    assert b"Environment checks" in seen and b" SIM " in seen
    served.assert_nothing_left()
    said = served.proc.stderr.read().decode(errors="replace")
    assert ("interrupted" if sig == signal.SIGINT else f"stopped by {sig.name}") in said
    assert "Traceback" not in said


def _browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed: run tests/browser/setup_chromium.sh")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
    return sync_api


def test_the_cockpit_in_headless_chromium(served, tmp_path):
    """The page shows the Checks screen, key 2 switches to the Profile screen, a screenshot is
    taken; stopping the server ends the session in the page and leaves nothing running."""
    sync_api = _browser()
    shot = tmp_path / "serve-browser.png"
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())  # web fonts

            def expose_terminal(route) -> None:
                response = route.fetch()
                body = response.text()
                assert HOOK in body, f"textual-serve's textual.js changed: {HOOK!r} not found; update HOOK"
                route.fulfill(response=response, body=body.replace(HOOK, "this.terminal=window.__solTerminal=new ", 1))

            page.route("**/static/js/textual.js", expose_terminal)
            page.goto(served.url)

            def wait_for_screen(shows: list[str], not_shows: list[str], timeout_s: float = 30) -> str:
                """The screen's text once it shows all of ``shows`` and none of ``not_shows`` (a
                screen is drawn in more than one write: wait for the whole of it)."""
                page.wait_for_function(
                    f"([yes, no]) => {{ const s = ({SCREEN_TEXT})(); "
                    "return yes.every(t => s.includes(t)) && !no.some(t => s.includes(t)); }",
                    arg=[shows, not_shows], timeout=timeout_s * 1000)
                return page.evaluate(SCREEN_TEXT)

            checks = wait_for_screen(["Checklist", "Environment checks", " SIM ", "1 Checks"], ["Use profile"])
            assert "a Re-run all" in checks
            page.evaluate("() => window.__solTerminal.focus()")
            page.keyboard.press("2")
            wait_for_screen(["Use profile", "detected profile", "h100-sxm"], ["Environment checks", "Re-run all"], 15)
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            if os.environ.get("SOL_UPDATE_SCREENSHOTS") == "1":
                shutil.copyfile(shot, ROOT / "docs" / "serve-browser.png")

            assert served.sessions(), "no cockpit process while the page is open"
            assert served.stop() == 128 + signal.SIGTERM
            page.wait_for_selector("body.-closed", timeout=10_000)  # the page says "Session ended."
        finally:
            browser.close()
    served.assert_nothing_left()
