"""Overlays over any screen: ``?`` help with the current screen's keys, and the question asked
before quitting while a run or a tune is in flight."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from tui.screen_list import SCREENS, entry

MOVING = ("arrows, Tab and shift+Tab move; Enter selects; Esc leaves a field; the mouse works "
          "(screen names on the top line, table rows and headers, footer keys)")


def keys_table(app, screen: Screen) -> Table:
    """Every key of ``screen`` and of the cockpit, with what it does (the binding's tooltip)."""
    t = Table(box=None, pad_edge=False, show_header=False, expand=True)
    t.add_column("key", style="bold", no_wrap=True)
    t.add_column("what", ratio=1)
    shown = entry(getattr(screen, "MODE", ""))
    title = getattr(screen, "HELP_TITLE", "") or (shown.label if shown else type(screen).__name__)
    keys = {s.key for s in SCREENS}
    sections = ((f"{title} screen", screen), ("Everywhere", app))
    for title, owner in sections:
        rows = [b for b in getattr(owner, "BINDINGS", []) if isinstance(b, Binding)
                and owner.check_action(b.action.split("(")[0], ()) is not False]
        if not rows:
            continue
        t.add_row(Text(title, style="bold underline"), "")
        for b in rows:
            if owner is app and b.key in keys:
                continue
            t.add_row(app.get_key_display(b), b.tooltip or b.description)
        if owner is app:
            t.add_row(f"{SCREENS[0].key}-{SCREENS[-1].key}",
                      "show a screen: " + ", ".join(f"{s.key} {s.label}" for s in SCREENS))
    t.add_row("", "")
    t.add_row(Text("Moving", style="bold underline"), Text(MOVING, style="dim"))
    note = app.device_note() if hasattr(app, "device_note") else ""
    if note:  # the header's first part, in full
        t.add_row("", "")
        t.add_row(Text("Device", style="bold underline"), Text(note))
    return t


class HelpScreen(ModalScreen[None]):
    """The keys of the screen it was opened over; any of ``?``, ``esc`` or ``q`` closes it."""

    BINDINGS = [
        Binding("escape", "dismiss", "Close", tooltip="Close the help"),
        Binding("question_mark", "dismiss", "Close", show=False, tooltip="Close the help"),
        Binding("q", "dismiss", "Close", show=False, tooltip="Close the help"),
    ]

    def __init__(self, over: Screen) -> None:
        super().__init__()
        self.over = over

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="overlay"):
            yield Static(Text("Keys  (esc closes)", style="bold"), classes="overlay-title")
            with VerticalScroll():
                yield Static(keys_table(self.app, self.over), id="help-keys")

    def action_dismiss(self, result=None) -> None:
        self.dismiss(None)


class ConfirmQuitScreen(ModalScreen[bool]):
    """Asked when quitting with work in flight: ``y`` quits (cancelling it), ``n`` or ``esc`` stays."""

    BINDINGS = [
        Binding("y", "answer(True)", "Quit and cancel", tooltip="Cancel what is in flight and quit"),
        Binding("q", "answer(True)", "Quit", show=False, tooltip="Cancel what is in flight and quit"),
        Binding("n", "answer(False)", "Stay", tooltip="Keep the cockpit open"),
        Binding("escape", "answer(False)", "Stay", show=False, tooltip="Keep the cockpit open"),
    ]

    def __init__(self, busy: list[str]) -> None:
        super().__init__()
        self.busy = busy

    def compose(self) -> ComposeResult:
        text = Text("Quit the cockpit?\n\n", style="bold")
        text.append(f"{' and '.join(self.busy)} in flight: quitting cancels "
                    f"{'them' if len(self.busy) > 1 else 'it'} (what was measured is stored).\n\n")
        text.append("y", style="bold reverse")
        text.append(" quit and cancel    ")
        text.append("n", style="bold reverse")
        text.append(" / ")
        text.append("esc", style="bold reverse")
        text.append(" stay")
        with Vertical(id="confirm-box", classes="overlay"):
            yield Static(text, id="confirm-text")

    def action_answer(self, quit_now: bool) -> None:
        self.dismiss(quit_now)
