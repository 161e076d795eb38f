"""`tui COMMAND ...` builds the parser of that command alone (the others' modules are not even
imported): its usage, help and errors must be what the whole CLI's parser gives."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tui.cli.main import COMMANDS, build_parser


def _command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subs.choices[name]


def _outcome(parser: argparse.ArgumentParser, argv: list[str], capsys: pytest.CaptureFixture) -> tuple:
    try:
        ns = vars(parser.parse_args(argv))
    except SystemExit as exc:
        ns = {"exit": exc.code}
    out = capsys.readouterr()
    return ns, out.out, out.err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_one_command_alone_parses_as_among_all(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    alone, whole = build_parser(name), build_parser()
    assert _command(alone, name).format_help() == _command(whole, name).format_help()
    assert alone.format_usage() == whole.format_usage()
    for argv in ([name], [name, "--help"], [name, "--no-such-flag"], [name, "--json", "--device", "x"]):
        assert _outcome(alone, argv, capsys) == _outcome(whole, argv, capsys), argv


def test_anything_but_a_command_gets_every_command(capsys):
    for word in (None, "--version", "-h", "benhc", "BENCH"):
        subs = next(a for a in build_parser(word)._actions if isinstance(a, argparse._SubParsersAction))
        assert set(COMMANDS) <= set(subs.choices), word


def test_a_command_imports_no_other_commands_module():
    code = ("import sys; from tui.cli.main import COMMANDS, build_parser; build_parser('history'); "
            "print(','.join(m for n, m in COMMANDS.items() if n != 'history' and m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
