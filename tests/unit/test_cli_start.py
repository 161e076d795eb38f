"""`tui --help` starts at once: it loads no command's module, no UI, no CUDA and no pydantic or rich
(issue 47, "instant start")."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tui.cli.main import COMMANDS, SUMMARIES, build_parser

HEAVY = ("textual", "cupy", "pynvml", "pydantic", "rich", "numpy")


def test_tui_help_imports_no_ui_cuda_or_command_module():
    code = ("import sys, io, contextlib\nfrom tui.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out: main(['--help'])\n"
            "assert 'history' in out.getvalue()\n"
            f"mods = {list(HEAVY)!r} + {sorted(COMMANDS.values())!r}\n"
            "print(','.join(m for m in mods if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_mistyped_command_lists_every_command_without_loading_them(capsys):
    code = ("import sys\nfrom tui.cli.main import main\ntry: main(['histroy'])\nexcept SystemExit: pass\n"
            f"print(','.join(m for m in {list(HEAVY) + sorted(COMMANDS.values())!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert "invalid choice: 'histroy'" in out.stderr and "fleet-report" in out.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_summary_is_what_the_command_registers(name):
    subs = next(a for a in build_parser(name)._actions if isinstance(a, argparse._SubParsersAction))
    line = next(c.help for c in subs._choices_actions if c.dest == name)
    assert SUMMARIES[name] == line


def test_a_mistyped_command_at_the_tui_prompt_lists_the_commands():
    out = subprocess.run([sys.executable, "-m", "tui.main", "histroy"], capture_output=True, text=True)
    assert out.returncode == 2 and "invalid choice: 'histroy'" in out.stderr and "history" in out.stderr
