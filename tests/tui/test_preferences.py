"""Preferences that persist (theme, profile, last task, last screen) in the config dir's
cockpit.toml: written atomically when the cockpit quits, the command line over them, and a
malformed file reported and left untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import Input

from tests.tui.conftest import fixed_sampler
from tui.preferences import tomllib  # tomllib, or tomli before Python 3.11


def prefs_path() -> Path:
    return Path(os.environ["SOL_COCKPIT_CONFIG_DIR"]) / "cockpit.toml"


def open_cockpit(*argv: str):
    """The cockpit as `tui ARGV` opens it (preferences from the config dir), on fixed telemetry."""
    from tui.app import app_from_command_line

    return app_from_command_line(["--backend", "sim", *argv], telemetry=fixed_sampler(), start_telemetry=False,
                                 checks_on_start=False)


async def test_theme_profile_task_and_screen_persist_and_the_command_line_wins():
    app = open_cockpit()
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "textual-dark" and app.current_mode == "checklist"
        await pilot.press("ctrl+t", "2")
        app.screen.query_one("#profile-table").move_cursor(row=app.screen.query_one("#profile-table")
                                                           .get_row_index("h200"))
        await pilot.press("u", "3")
        app.screen.query_one("#f-iterations", Input).value = "50"
        await pilot.pause()
        await pilot.press("escape", "4", "q")
    saved = tomllib.loads(prefs_path().read_text(encoding="utf-8"))
    assert (saved["theme"], saved["profile"], saved["screen"]) == ("light", "h200", "run")
    assert saved["task"]["iterations"] == 50 and "backend" not in saved["task"] and "fault" not in saved["task"]
    assert not [p for p in prefs_path().parent.iterdir() if p.name != "cockpit.toml"]  # no temporary left

    again = open_cockpit()
    async with again.run_test(size=(100, 30)):
        assert again.theme == "textual-light" and again.current_mode == "run"
        assert again.profile_name == "h200" and again.task_spec.iterations == 50
        assert again.task_spec.backend.value == "sim"

    told = open_cockpit("--theme", "dark", "--screen", "tune", "--profile", "l40s")
    async with told.run_test(size=(100, 30)):
        assert told.theme == "textual-dark" and told.current_mode == "tune" and told.profile_name == "l40s"


@pytest.mark.parametrize("text", ["theme = [\n", 'theme = "blue"\n', "task = 3\n"])
async def test_a_malformed_file_is_reported_and_left_untouched(text):
    prefs_path().parent.mkdir(parents=True, exist_ok=True)
    prefs_path().write_text(text, encoding="utf-8")
    app = open_cockpit()
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "textual-dark"  # the defaults
        assert any(str(prefs_path()) in p for p in app.startup_problems)
        assert any(str(prefs_path()) in n.message for n in app._notifications)
        await pilot.press("ctrl+t", "q")
    assert prefs_path().read_text(encoding="utf-8") == text


async def test_a_saved_task_that_no_longer_validates_falls_back_to_the_default():
    prefs_path().parent.mkdir(parents=True, exist_ok=True)
    prefs_path().write_text('theme = "light"\n[task]\niterations = -4\n', encoding="utf-8")
    app = open_cockpit()
    async with app.run_test(size=(100, 30)):
        assert app.theme == "textual-light" and app.task_spec.iterations > 0
        assert any("saved task" in p for p in app.startup_problems)


def test_the_write_is_atomic(tmp_path, monkeypatch):
    from tui.preferences import Preferences, PreferencesFile

    path = tmp_path / "cfg" / "cockpit.toml"
    pf = PreferencesFile.load(path)
    assert pf.problem is None and pf.prefs == Preferences()
    assert pf.save(Preferences(theme="light", screen="run", extra={"future_key": 1})) is None
    assert PreferencesFile.load(path).prefs.theme == "light"
    assert PreferencesFile.load(path).prefs.extra == {"future_key": 1}  # kept for later versions
    before = path.read_text(encoding="utf-8")

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    problem = pf.save(Preferences(theme="dark"))
    assert problem and "No space left" in problem
    assert path.read_text(encoding="utf-8") == before and [p.name for p in path.parent.iterdir()] == ["cockpit.toml"]


def test_command_line_over_preferences_over_defaults():
    from tui.cli_options import combine, parse_args
    from tui.preferences import Preferences

    saved = Preferences(theme="light", profile="h200", screen="history", task={"iterations": 7})
    opts = combine(parse_args([]), saved)
    assert (opts.theme, opts.profile, opts.screen, opts.task) == ("light", "h200", "history", {"iterations": 7})
    opts = combine(parse_args(["--theme", "dark", "--screen", "run", "--task", "t.toml"]), saved)
    assert (opts.theme, opts.screen, opts.task, opts.task_file) == ("dark", "run", None, Path("t.toml"))
    opts = combine(parse_args([]), Preferences())
    assert (opts.theme, opts.profile, opts.screen) == ("dark", None, "checklist")
