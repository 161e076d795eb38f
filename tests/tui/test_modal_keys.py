"""Modal keys: no screen opens with focus in a text field; Esc always leaves one; with no field
focused ``q``, ``?`` and the digits reach the cockpit; the footer always shows ``?`` and ``q``; the
same action has the same key on every screen. The walk below presses each key on every screen at
80x24, as a new user would."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.tui.conftest import screen_lines
from tui.screen_list import MODES, SCREENS
from tui.screens.base import takes_keys
from tui.screens.overlays import ConfirmQuitScreen, HelpScreen


def in_a_field(app) -> bool:
    """Focus is on a widget that would type ``q`` (an Input, a Select searching as you type)."""
    return takes_keys(app.screen.focused)


def field_values(app) -> dict[str, str]:
    return {f"{w.id}": w.value for w in app.screen.query(Input)}


def footer(app) -> str:
    return screen_lines(app)[-1]


async def assert_footer_keys(pilot, app, where: str) -> None:
    """The footer shows ? and q (it is redrawn after a refresh: given a moment on a busy machine)."""
    for _ in range(40):
        line = footer(app)
        if "? Help" in line and "q Quit" in line:
            return
        await pilot.pause(0.05)
    raise AssertionError(f"{where}: {footer(app)!r}")


async def _quit_reaches_the_app(pilot, app, quits: list[int], where: str) -> None:
    before = len(quits)
    await pilot.press("q")
    await pilot.pause()
    if isinstance(app.screen, ConfirmQuitScreen):
        await pilot.press("n")
        await pilot.pause()
    assert len(quits) == before + 1 or not app.is_running, f"{where}: q did not reach the cockpit"


@pytest.mark.parametrize("mode", MODES)
async def test_every_key_reaches_the_cockpit_on_every_screen(make, mode):
    app = make(start_mode=mode)
    quits: list[int] = []
    app.exit = lambda *a, **k: quits.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.current_mode == mode
        values = field_values(app)
        assert not in_a_field(app), f"{mode} opens with focus in {app.screen.focused!r}"
        await assert_footer_keys(pilot, app, mode)
        await _quit_reaches_the_app(pilot, app, quits, mode)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen), f"{mode}: ? did not open the help"
        await pilot.press("escape")
        await pilot.pause()
        assert app.current_mode == mode and not isinstance(app.screen, HelpScreen)
        for s in SCREENS:
            await pilot.press(s.key)
            await pilot.pause()
            assert app.current_mode == s.mode, f"{mode}: {s.key} did not show {s.label}"
            assert not in_a_field(app), f"{s.mode} shows with focus in {app.screen.focused!r}"
            await assert_footer_keys(pilot, app, s.mode)
        await pilot.press(next(s.key for s in SCREENS if s.mode == mode))
        await pilot.pause()
        for _ in range(3):
            await pilot.press("tab")
            await pilot.pause()
            await pilot.press("escape")
            await pilot.pause()
            assert not in_a_field(app), f"{mode}: esc left focus in {app.screen.focused!r}"
            assert app.current_mode == mode
            await assert_footer_keys(pilot, app, f"{mode} after tab, esc")
            await _quit_reaches_the_app(pilot, app, quits, f"{mode} after tab, esc")
            await pilot.press("5")
            await pilot.pause()
            assert app.current_mode == "live", f"{mode}: 5 after tab, esc did not reach the cockpit"
            await pilot.press(next(s.key for s in SCREENS if s.mode == mode))
            await pilot.pause()
        assert field_values(app) == values, f"{mode}: a key was typed into a field the user did not enter"


async def test_in_a_field_the_footer_offers_esc_and_still_shows_help_and_quit(make):
    app = make(start_mode="soak")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.screen.query_one("#soak-duration", Input).focus()
        await pilot.pause()
        await pilot.press("q", "1")
        await pilot.pause()
        assert app.screen.query_one("#soak-duration", Input).value.endswith("q1")  # the user entered it
        await assert_footer_keys(pilot, app, "soak, in the duration field")
        assert "esc Leave field" in footer(app), footer(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not in_a_field(app) and "esc Leave field" not in footer(app)


START_ACTIONS = {"start_run", "start", "restart"}
CANCEL_ACTIONS = {"cancel_run", "cancel", "cancel_tune", "stop_run", "cancel_job"}


def test_one_key_for_one_action_on_every_screen():
    """r starts (a run, a soak, a tune), x cancels, on every screen; no ctrl+r or ctrl+x anywhere
    (ctrl+r reset the Tune form and started a soak)."""
    from textual.binding import Binding

    from tui.app import screen_class
    from tui.screen_list import SCREENS
    from tui.screens.tune_run import TuneRunScreen

    seen = 0
    for cls in [*(screen_class(s.mode) for s in SCREENS), TuneRunScreen]:
        for b in cls.BINDINGS:
            assert isinstance(b, Binding)
            assert b.key not in ("ctrl+r", "ctrl+x"), (cls.__name__, b)
            if b.action in START_ACTIONS:
                assert b.key == "r", (cls.__name__, b)
                seen += 1
            if b.action in CANCEL_ACTIONS:
                assert b.key == "x", (cls.__name__, b)
    assert seen >= 3
