"""engine.text_safety: text from elsewhere is shown, never obeyed by the terminal or by Rich."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from engine.text_safety import for_rich, has_control, visible
from tests.unit.test_fuzz_inputs import fuzz

SEQUENCES = ["\x1b]0;title\x07", "\x1b]0;title\x1b\\", "\x1b[2J\x1b[H", "\x1b]52;c;aGVsbG8=\x07", "\x9b31m",
             "\x07", "\x00", "\x7f", "\u202e", "\r"]


def test_control_characters_become_visible_escapes():
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("\x9b") == "\\x9b" and visible("\u202e") == "\\u202e"
    assert visible("line 1\nline 2\ttab") == "line 1\nline 2\ttab"
    assert visible("a\nb\tc\r", one_line=True) == "a\\nb\\tc\\r"
    assert visible(5) == "5" and visible("plain") == "plain"
    for s in SEQUENCES:
        assert has_control(s) and not has_control(visible(s, one_line=True))


def test_for_rich_prints_markup_and_escapes_as_written():
    out = io.StringIO()
    Console(file=out, force_terminal=False, width=200).print(for_rich("[bold red]x[/] \x1b]0;t\x07 [link=file:///]y"),
                                                            highlight=False)
    text = out.getvalue()
    assert "[bold red]x[/]" in text and "\\x1b]0;t\\x07" in text and "[link=file:///]y" in text


@fuzz(300)
@given(text=st.text(alphabet=st.characters(max_codepoint=0x3000), max_size=40)
       | st.lists(st.sampled_from([*SEQUENCES, "[b]", "[/]", "\\", "x"]), max_size=8).map("".join))
def test_nothing_that_reaches_a_terminal_holds_esc(text):
    out = io.StringIO()
    Console(file=out, force_terminal=False, width=300, soft_wrap=True).print(for_rich(text), highlight=False)
    printed = out.getvalue()
    assert "\x1b" not in printed and "\x07" not in printed and "\x9b" not in printed
