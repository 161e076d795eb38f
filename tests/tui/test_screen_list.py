"""One list of screens (``tui.screen_list.SCREENS``) drives the top bar, the number keys, ``--screen``,
the preferences file's check, the help and the snapshot tests; every screen the cockpit has is in it.
Each test walks the list."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tui.screens
from tests.tui.conftest import screen_lines
from tests.tui.test_flows import text_of
from tui.screen_list import MODES, SCREENS, entry
from tui.screens.base import CockpitScreen, nav_and_context, nav_width, render_nav


def test_the_list_is_well_formed():
    assert [s.key for s in SCREENS] == [str(i) for i in range(1, len(SCREENS) + 1)]
    assert len(set(MODES)) == len(MODES) and len({s.label for s in SCREENS}) == len(SCREENS)
    assert all(entry(s.mode) is s for s in SCREENS) and entry("nowhere") is None


def test_every_screen_of_the_cockpit_is_in_the_list_in_its_order():
    from tui.app import CockpitApp, screen_class

    assert list(CockpitApp.MODES) == list(MODES)
    assert all(screen_class(mode).MODE == mode for mode in CockpitApp.MODES)
    found = set()
    for info in pkgutil.iter_modules(tui.screens.__path__):
        module = importlib.import_module(f"tui.screens.{info.name}")
        found |= {cls.MODE for _, cls in inspect.getmembers(module, inspect.isclass)
                  if issubclass(cls, CockpitScreen) and cls.MODE}
    assert found == set(MODES)


def test_each_key_is_bound_to_its_screen():
    from tui.app import CockpitApp

    bound = {b.key: b for b in CockpitApp.BINDINGS}
    for s in SCREENS:
        assert bound[s.key].action == f"switch_mode('{s.mode}')" and bound[s.key].tooltip == s.tooltip


@pytest.mark.parametrize("mode", MODES)
def test_screen_is_a_choice_of_the_command_line_and_of_the_preferences(tmp_path, mode):
    from tui.app import PREFERENCE_CHOICES
    from tui.cli_options import combine, parse_args
    from tui.preferences import PreferencesFile
    from tui.serve_options import ServeOptions, check_cockpit_options

    assert parse_args(["--screen", mode]).screen == mode
    path = tmp_path / "cockpit.toml"
    path.write_text(f'screen = "{mode}"\n', encoding="utf-8")
    prefs = PreferencesFile.load(path, allowed=PREFERENCE_CHOICES)
    assert prefs.problem is None and combine(parse_args([]), prefs.prefs).screen == mode
    check_cockpit_options(ServeOptions(screen=mode))  # tui serve takes it too


def test_a_screen_not_in_the_list_is_refused(tmp_path, capsys):
    from tui.app import PREFERENCE_CHOICES
    from tui.cli_options import parse_args
    from tui.preferences import PreferencesFile

    with pytest.raises(SystemExit):
        parse_args(["--screen", "nowhere"])
    path = tmp_path / "cockpit.toml"
    path.write_text('screen = "nowhere"\n', encoding="utf-8")
    prefs = PreferencesFile.load(path, allowed=PREFERENCE_CHOICES)
    assert prefs.prefs.screen is None and "screen" in (prefs.problem or "")


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("mode", MODES)
def test_the_top_bar_shows_every_key_and_names_the_current_screen(mode, width):
    labels, context = nav_and_context(mode, ["profile h100-sxm (auto) · sim", "h100-sxm · sim", "h100-sxm"], width)
    nav = render_nav(mode, labels)
    s = entry(mode)
    assert s is not None and f"] {s.key} {s.label} [/]" in nav
    assert all(f"'{t.mode}')]{t.key}" in nav or t.mode == mode for t in SCREENS)
    assert nav_width(mode, labels) + 2 + len(context) <= width or labels == 0
    if width >= 120:
        assert labels == len(SCREENS) and all(f"{t.key} {t.label}" in nav for t in SCREENS)


async def test_each_key_shows_its_screen_named_in_the_top_bar_and_the_help(make):
    app = make(start_mode="checklist")
    async with app.run_test(size=(80, 24)) as pilot:
        for s in SCREENS:
            await pilot.press(s.key)
            await pilot.pause()
            assert app.current_mode == s.mode and app.screen.MODE == s.mode
            top = screen_lines(app)[1]
            assert f"{s.key} {s.label}" in top and all(t.key in top for t in SCREENS), top
        await pilot.press(SCREENS[0].key, "question_mark")
        await pilot.pause()
        keys = " ".join(text_of(app, "#help-keys").split())
        assert f"{SCREENS[0].key}-{SCREENS[-1].key} show a screen" in keys
        assert all(f"{s.key} {s.label}" in keys for s in SCREENS), keys


def test_the_snapshot_tests_take_every_screen():
    from tests.tui import test_snapshots

    assert list(test_snapshots.MODES) == list(MODES)


def test_the_readmes_list_every_screen_and_every_key():
    """README.md's keys name every screen by its key; the cockpit README's row of each screen names
    each of its keys (the tuning view's in the Tune row), and the cockpit's own keys are there."""
    import re
    from pathlib import Path

    from tui.app import CockpitApp, screen_class
    from tui.screens.tune_run import TuneRunScreen

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    keys_para = readme[readme.index("Keys: `1`"):]
    keys_para = keys_para[:keys_para.index("\n\n")]
    cockpit = (root / "tui" / "README-cockpit.md").read_text(encoding="utf-8")
    rows = {m[1]: m[0] for m in re.finditer(r"^\| `(\d)` \|.*$", cockpit, re.M)}
    shown = {"escape": "esc", "question_mark": "?", "plus": "+", "minus": "-", "slash": "/"}
    for s in SCREENS:
        assert f"`{s.key}` {s.label}" in keys_para, s
        assert s.key in rows and f"| {s.label}" in rows[s.key], s
        bindings = list(screen_class(s.mode).BINDINGS) + (list(TuneRunScreen.BINDINGS) if s.mode == "tune" else [])
        for b in bindings:
            assert f"`{shown.get(b.key, b.key)}`" in rows[s.key], (s.label, b.key, b.action)
    for b in CockpitApp.BINDINGS:
        assert f"`{shown.get(b.key, b.key)}`" in keys_para, b.key


def test_the_cockpit_imports_a_screen_when_it_is_first_shown():
    """Issue 47's instant start: ``import tui.app`` imported every screen (and through them the
    tuner, the soak, the fleet and their plots) before the first frame. Each screen's module is now
    imported when its mode is first shown."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    code = ("import sys, tui.app; print(' '.join(m for m in sys.modules if m.startswith(('tui.screens.', "
            "'engine.', 'textual_plotext', 'plotext'))))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                timeout=60, cwd=root, env=dict(os.environ, PYTHONPATH=root)).stdout.split())
    screens = {s.screen_path[0] for s in SCREENS} | {"tui.screens.tune_run", "tui.screens.overlays"}
    assert not loaded & screens, sorted(loaded & screens)
    assert not loaded & {"engine.tuner", "engine.soak", "engine.fleet", "textual_plotext", "plotext"}, sorted(loaded)
