"""The Prometheus exporter under a flood of half-open and trickling connections on loopback: its
threads stay bounded by the connection cap, every connection ends at the timeout, and a scrape
works again afterwards."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from engine import exporter as exporter_mod
from engine.exporter import CockpitCollector, Exporter
from engine.store import ResultStore

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def running(tmp_path, monkeypatch):
    monkeypatch.setattr(exporter_mod, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(exporter_mod, "REQUEST_TIMEOUT_S", 1.0)
    exp = Exporter(CockpitCollector(ResultStore(tmp_path / "s.db")), "127.0.0.1", 0)
    exp.start()
    yield exp
    exp.stop()


def test_half_open_connections_are_capped_and_timed_out(running):
    base = threading.active_count()
    socks = []
    for _ in range(300):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", running.port))  # all at once: none waits for the one before
        socks.append(s)
    peak, t0 = base, time.monotonic()
    while time.monotonic() - t0 < 2.0:
        for s in socks[1::2]:  # half of them send the start of a request and never finish it
            try:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass
        peak = max(peak, threading.active_count())
        time.sleep(0.05)
    assert peak - base <= 8 + 2, (base, peak)
    assert running.server.refused > 0
    deadline = time.monotonic() + 15
    while threading.active_count() > base and time.monotonic() < deadline:
        peak = max(peak, threading.active_count())
        time.sleep(0.1)
    assert peak - base <= 8 + 2, (base, peak)
    assert threading.active_count() <= base, "connections outlived the timeout"
    for s in socks:
        s.close()
    with urllib.request.urlopen(running.url, timeout=5) as r:
        assert r.status == 200 and b"sol_cockpit" in r.read()


def test_a_trickling_request_is_cut_at_the_timeout(running):
    s = socket.create_connection(("127.0.0.1", running.port), timeout=5)
    t0 = time.monotonic()
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        while time.monotonic() - t0 < 5:
            s.sendall(b"X-A: b\r\n")  # a header line every 0.1 s: each read is quick, the request never ends
            time.sleep(0.1)
    except OSError:
        pass
    finally:
        s.close()
    assert time.monotonic() - t0 < 3.0
