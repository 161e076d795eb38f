"""`tui serve` before it serves: a port in use, a non-loopback address, bad options. No server is
started here and no browser (tests/tui/test_serve_browser.py does both)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tui.cli.main import main


@pytest.fixture
def busy_port():
    """A port something listens on (loopback), for as long as the test runs."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_port_in_use_is_named_with_a_fix(busy_port, capsys):
    assert main(["serve", "--port", str(busy_port), "--backend", "sim"]) == 2
    err = capsys.readouterr().err
    assert f"--port={busy_port}: port {busy_port} on 127.0.0.1 is in use" in err
    assert f"--port {busy_port + 1}" in err and "fix:" in err


def test_port_in_use_json_is_one_object(busy_port, capsys):
    assert main(["serve", "--port", str(busy_port), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "invalid" and out["field"] == "--port" and out["exit_code"] == 2
    assert str(busy_port) in out["error"] and "--port" in out["fix"]


def test_non_loopback_address_warns_that_there_is_no_authentication(busy_port, capsys):
    """0.0.0.0 conflicts with the loopback listener, so nothing is served; the warning comes first."""
    assert main(["serve", "--host", "0.0.0.0", "--port", str(busy_port)]) == 2
    err = capsys.readouterr().err
    warning = err.split("error:")[0]
    assert warning.startswith("warning: --host=0.0.0.0 is not a loopback address")
    assert "no authentication" in warning and f"ssh -L {busy_port}:127.0.0.1:{busy_port}" in warning
    assert "is in use" in err


def test_loopback_addresses_do_not_warn():
    from tui.serve_options import exposure_warning, is_loopback

    assert exposure_warning("127.0.0.1", 8000) is None
    assert exposure_warning("localhost", 8000) is None
    assert is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("::")
    assert "textual-serve has no authentication" in (exposure_warning("0.0.0.0", 8000) or "")


@pytest.mark.parametrize(("argv", "field", "words"), [
    (["--port", "0"], "--port", "not a TCP port"),
    (["--port", "70000"], "--port", "not a TCP port"),
    (["--host", "no.such.host.invalid"], "--host", "can resolve"),
    (["--host", " "], "--host", "empty"),
    (["--public-url", "ftp://x"], "--public-url", "not an http"),
    (["--screen", "nowhere"], "--screen", "unknown"),
    (["--theme", "pink"], "--theme", "unknown"),
    (["--profile", "no-such-gpu"], "profile", "no-such-gpu"),
])
def test_bad_input_is_named_before_serving(argv, field, words, capsys):
    assert main(["serve", *argv, "--json"]) == 2
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["status"] == "invalid" and field in out["error"] and words in out["error"], out
    assert out["fix"] and "warning" not in captured.err


def test_missing_task_file_is_refused(tmp_path, capsys):
    assert main(["serve", "--task", str(tmp_path / "none.toml"), "--json"]) == 2
    assert "none.toml" in json.loads(capsys.readouterr().out)["error"]


def test_sessions_get_the_cockpit_options(tmp_path):
    from tui.serve_options import ServeOptions, public_url, session_argv

    task = tmp_path / "t.toml"
    opts = ServeOptions(profile="h200", backend="sim", task=task, theme="light")
    assert opts.cockpit_args == ["--profile", "h200", "--backend", "sim", "--task", str(task.resolve()),
                                 "--theme", "light"]
    assert session_argv(opts.cockpit_args)[:3] == [sys.executable, "-m", "tui.main"]
    assert ServeOptions().cockpit_args == []
    assert public_url("127.0.0.1", 8000, None) == "http://127.0.0.1:8000"
    assert public_url("::1", 8000, None) == "http://[::1]:8000"
    assert public_url("0.0.0.0", 8000, "https://cockpit.example.org/") == "https://cockpit.example.org"


def test_engine_parser_loads_no_serving_code():
    code = ("import sys, tui.cli.main as m; m.build_parser(); "
            "print(','.join(x for x in ('tui.serve', 'textual_serve', 'aiohttp', 'textual') if x in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
