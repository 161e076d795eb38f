"""The cockpit's screens, in the order of the operator's flow: the one list from which the top bar,
the number keys, ``--screen``'s choices, the preferences file's check, the help and the snapshot
tests read (tests/tui/test_screen_list.py walks it). No Textual here: ``tui --help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScreenEntry:
    """One screen: the key that shows it, its mode name and its label."""

    key: str
    """The number key that shows it (also its place in the top bar)."""
    mode: str
    """The app's mode name: ``--screen``'s value and the preferences file's ``screen``."""
    label: str
    """Its name in the top bar and the help."""
    about: str = ""
    """What it shows, where its label does not say (the key's tooltip adds it)."""

    @property
    def screen_path(self) -> tuple[str, str]:
        """(module, class name) of its screen: ``tui.screens.<mode>``'s ``<Mode>Screen``, imported
        when it is first shown, so that the cockpit's first frame waits for its first screen only."""
        return f"tui.screens.{self.mode}", f"{self.mode.title()}Screen"

    @property
    def tooltip(self) -> str:
        return f"Show the {self.label} screen" + (f": {self.about}" if self.about else "")


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("1", "checklist", "Checks"),
    ScreenEntry("2", "profile", "Profile"),
    ScreenEntry("3", "tune", "Tune"),
    ScreenEntry("4", "run", "Run"),
    ScreenEntry("5", "live", "Live"),
    ScreenEntry("6", "troubleshoot", "Diagnose"),
    ScreenEntry("7", "history", "History"),
    ScreenEntry("8", "fleet", "Fleet", "the fleet jobs' reports"),
    ScreenEntry("9", "soak", "Soak", "the task back to back for a duration, watched"),
)
MODES = tuple(s.mode for s in SCREENS)
"""The mode names, in the list's order."""


def entry(mode: str) -> ScreenEntry | None:
    """The entry of ``mode``; None for a mode not in the list."""
    return next((s for s in SCREENS if s.mode == mode), None)
